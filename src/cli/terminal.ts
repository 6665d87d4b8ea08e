import type { Console } from "effect"
/**
 * Box text (assistant words, tool output, messages, prompts a worker queued, errors it caused)
 * reaches a person's terminal through roster. A terminal obeys escape sequences — set the
 * window title, clear the screen, move the cursor, write the clipboard (OSC 52) — so no control
 * character from a box is ever printed as itself: C0 (but newline and tab), DEL and C1 become
 * visible stand-ins, as do the bidirectional overrides that make text read other than it is.
 */
 
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g

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

export const dim = (s: string) => (colourOn() ? `\x1b[2m${s}\x1b[0m` : s)

 
const SGR = /\x1b\[[0-9;]*m/g

const strip = (arg: unknown) => (typeof arg === "string" ? arg.replace(SGR, "") : arg)

/**
 * The console roster prints through: what goes to stdout passes `tidy` (the help's rewording),
 * and colour (SGR sequences — @effect/cli's help and errors carry them) is removed from a
 * stream that is not a terminal or under NO_COLOR.
 */
export const plainConsole = (c: Console.Console, tidy: (text: string) => string = (t) => t): Console.Console => {
  const out = colourOn(process.stdout)
  const err = colourOn(process.stderr)
  const tidied = (args: ReadonlyArray<unknown>) => args.map((a) => (typeof a === "string" ? tidy(a) : a))
  const o = (args: ReadonlyArray<unknown>) => (out ? tidied(args) : tidied(args).map(strip))
  const e = (args: ReadonlyArray<unknown>) => (err ? args : args.map(strip))
  return {
    ...c,
    log: (...args) => c.log(...o(args)),
    info: (...args) => c.info(...o(args)),
    error: (...args) => c.error(...e(args)),
    warn: (...args) => c.warn(...e(args)),
    unsafe: {
      ...c.unsafe,
      log: (...args) => c.unsafe.log(...o(args)),
      info: (...args) => c.unsafe.info(...o(args)),
      error: (...args) => c.unsafe.error(...e(args)),
      warn: (...args) => c.unsafe.warn(...e(args))
    }
  }
}
