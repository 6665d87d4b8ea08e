/**
 * Box text (assistant words, tool output, messages, prompts a worker queued, errors it caused)
 * reaches a person's terminal through roster. A terminal obeys escape sequences — set the
 * window title, clear the screen, move the cursor, write the clipboard (OSC 52) — so no control
 * character from a box is ever printed as itself: C0 (but newline and tab), DEL and C1 become
 * visible stand-ins, as do the bidirectional overrides that make text read other than it is.
 */
 
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g

const standIn = (c: string) => {
  const code = c.charCodeAt(0)
  if (code < 0x20) return String.fromCharCode(0x2400 + code) // ␛ for ESC, ␍ for CR, ...
  if (code === 0x7f) return "␡"
  return `<U+${code.toString(16).toUpperCase().padStart(4, "0")}>`
}

export const visible = (text: string) => text.replace(CONTROLS, standIn)

/** roster's own colours: only on a terminal, and never under NO_COLOR (https://no-color.org). */
export const colourOn = (stream: { readonly isTTY?: boolean } = process.stdout) =>
  stream.isTTY === true && (process.env.NO_COLOR ?? "") === ""

/** Faint text where colour is on (this process's stdout unless said: a daemon says for the terminal it writes to). */
export const dim = (s: string, on: boolean = colourOn()) => (on ? `\x1b[2m${s}\x1b[0m` : s)
