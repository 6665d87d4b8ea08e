/**
 * @effect/cli's help, in roster's words: the type blurbs every argument and option carries ("A
 * user-defined piece of text.", "This setting is optional.") are dropped — each has its own
 * description — and the usage line starts with the whole command (`$ roster worker run …`),
 * not the subcommand's name alone.
 */
import { VERSION } from "../contract/version.js"
import { helpWidth, rootHelp, wrapHelp } from "./helpLayout.js"

const BLURBS = [
  /^\s*A user-defined piece of text\.\s*$/,
  /^\s*A floating point number\.\s*$/,
  /^\s*An integer\.\s*$/,
  /^\s*A true or false value\.\s*$/,
  /^\s*This setting is optional\.\s*$/,
  /^\s*This argument is optional\.\s*$/,
  /^\s*A file or directory\.\s*$/,
  /^\s*An existing file\.\s*$/,
  /^\s*A path on the file system\.\s*$/
]

 
const SGR = /\x1b\[[0-9;]*m/g

const isHelp = (plain: string) => /\nUSAGE\n/.test(plain) && /\nDESCRIPTION\n|\nCOMMANDS\n|\nOPTIONS\n|\nARGUMENTS\n/.test(plain)

export const tidyHelp = (text: string, commandPath: ReadonlyArray<string>, width = helpWidth()): string => {
  if (!isHelp(text.replace(SGR, ""))) return text
  if (commandPath.length <= 1) return rootHelp(text.replace(SGR, ""), VERSION, width)
  const out: Array<string> = []
  for (const raw of text.split("\n")) {
    // Matched without colour; a line that is rewritten loses its colour, the rest keep theirs.
    const line = raw.replace(SGR, "")
    if (BLURBS.some((b) => b.test(line))) {
      // A blurb is followed by a blank line; drop the pair.
      continue
    }
    const repeated = /^(\s*)This argument must be repeated at least (\d+) times?\.$/.exec(line)
    if (repeated) {
      out.push(`${repeated[1]}(one or more)`)
      continue
    }
    const usage = /^\$ (\S+)(.*)$/.exec(line)
    out.push(usage && commandPath.length > 0 ? `$ ${[...commandPath.slice(0, -1), usage[1]].join(" ")}${usage[2]}` : raw)
  }
  // Collapse the blank lines the dropped blurbs leave behind; then wrap at word boundaries.
  return wrapHelp(out.join("\n").replace(/\n{3,}/g, "\n\n"), width)
}
