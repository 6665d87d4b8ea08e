/** The longest message each service takes: Discord refuses over 2000; Slack advises under 4000 (it truncates at 40 000). */
export const CHAT_MESSAGE_MAX = { slack: 3900, discord: 2000 } as const

const FENCE = /^\s*(`{3,8})([\w+.-]{0,16})/
// A part may carry a reopened fence line before its text and a closing one after it.
const RESERVE = 32

const cut = (line: string, size: number): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < line.length; i += size) out.push(line.slice(i, i + size))
  return out.length === 0 ? [""] : out
}

/**
 * An answer as the service's messages, each at most `max` characters: cut at a line break where
 * one fits (a longer line where it must be), and a code block cut in two is closed at the end of
 * one part and opened again, with its language, at the start of the next — so every part renders
 * as the whole would have.
 */
export const splitMessage = (text: string, max: number): Array<string> => {
  const budget = Math.max(1, max - RESERVE)
  const parts: Array<string> = []
  let lines: Array<string> = []
  let size = 0
  let fence: string | null = null // the fence open after the last line taken
  let reopened = false // the part so far is only the fence it reopened
  for (const line of text.split("\n").flatMap((l) => cut(l, budget))) {
    const grows = (lines.length > 0 ? 1 : 0) + line.length
    if (lines.length > 0 && !reopened && size + grows > budget) {
      parts.push(fence === null ? lines.join("\n") : `${lines.join("\n")}\n${fence.replace(/[^`].*$/, "")}`)
      lines = fence === null ? [] : [fence]
      size = fence === null ? 0 : fence.length
      reopened = fence !== null
    }
    size += (lines.length > 0 ? 1 : 0) + line.length
    lines.push(line)
    reopened = false
    const open = FENCE.exec(line)
    if (open) fence = fence === null ? `${open[1]}${open[2]}` : null
  }
  if (lines.length > 0) parts.push(lines.join("\n"))
  return parts
}
