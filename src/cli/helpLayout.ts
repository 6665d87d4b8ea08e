/**
 * How roster's help reads on a terminal: every line wrapped at word boundaries to the width (a
 * table's description under its own column), and the root page as docker's or gh's — commands
 * grouped, one line each, examples at the end — with each command's full text on its own --help.
 */

/** The width help is wrapped to: the terminal's, else `COLUMNS`, else 80. */
export const helpWidth = (out: { readonly isTTY?: boolean; readonly columns?: number } = process.stdout): number => {
  if (out.isTTY && out.columns && out.columns > 20) return out.columns
  const env = Number(process.env.COLUMNS)
  return Number.isInteger(env) && env > 20 ? env : 80
}

/** Words laid out greedily: the first line after `first`, the rest after `hang`; a word longer than a line stands alone, whole. */
const wrapWords = (text: string, width: number, first: string, hang: string): Array<string> => {
  const lines: Array<string> = []
  let line = first
  let empty = true
  for (const word of text.split(/ +/).filter((w) => w !== "")) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line)
      line = hang + word
    } else {
      line = empty ? line + word : `${line} ${word}`
    }
    empty = false
  }
  lines.push(line)
  return lines
}

/** One line of help as lines of at most `width` (but for a single word longer than that). */
export const wrapLine = (line: string, width: number): Array<string> => {
  if (line.length <= width) return [line]
  const indent = /^ */.exec(line)?.[0] ?? ""
  // A table row (a command and its description, in columns): the description wraps under its column.
  const row = /^( +(?:- )?\S.*? {2,})(\S.*)$/.exec(line)
  if (row?.[1] && row[2]) {
    const column = row[1]
    if (column.length <= width / 2) return wrapWords(row[2], width, column, " ".repeat(column.length))
    return [column.trimEnd(), ...wrapWords(row[2], width, `${indent}    `, `${indent}    `)]
  }
  const hang = line.startsWith("$ ") ? "    " : indent
  return wrapWords(line.slice(indent.length), width, indent, hang)
}

export const wrapHelp = (text: string, width: number) => text.split("\n").flatMap((l) => wrapLine(l, width)).join("\n")

/** The root page's groups, in order; a command in none is listed under "Other" (a test keeps that empty). */
export const HELP_GROUPS: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
  ["Run a worker", ["worker run", "talk"]],
  ["Tasks", ["task add", "task list", "task show", "task cancel", "task retry"]],
  ["Workers", ["worker add", "worker list", "worker show", "worker edit", "memory list", "memory forget", "memory accept", "store list", "store restore"]],
  ["The daemon", ["server start", "server stop", "server status", "server unit", "web"]],
  ["Egress a person decides", ["approvals", "approve", "deny"]],
  ["Inspect", ["runs list", "runs show", "runs untaint", "usage", "policy check", "doctor"]],
  ["Setup", ["init", "connection add", "connection login", "connection list", "connection rm", "box build", "box check", "box build-scripted", "rehearsal"]]
]

const EXAMPLES = [
  "roster init",
  "roster connection add anthropic",
  "roster worker run alice \"fix the failing test in notes/\"",
  "roster server start && roster task add alice \"summarise this week's notes\"",
  "roster talk alice",
  "roster web"
]

/** A command's description cut to its first sentence, and a long sentence to its first clause. */
const summary = (description: string) => {
  const sentence = /^.*?[.!?](?=\s|$)/.exec(description)?.[0] ?? description
  if (sentence.length <= 90) return sentence
  const clause = /^.{20,90}?(?=[;:(—])/.exec(sentence)?.[0]
  return clause ? `${clause.trimEnd()} …` : sentence
}

/** The commands of @effect/cli's root page: each leaf's name and description. */
const listed = (plain: string) => {
  const out: Array<{ readonly name: string; readonly description: string }> = []
  for (const line of plain.split("\n")) {
    const m = /^ {2}- (.+?) {2,}(\S.*)$/.exec(line) ?? /^ {2}- (.+)$/.exec(line)
    if (!m?.[1]) continue
    const words = m[1].split(" ")
    const end = words.findIndex((w) => w.startsWith("[") || w.startsWith("<"))
    const name = (end < 0 ? words : words.slice(0, end)).join(" ").trim()
    out.push({ name, description: m[2] ?? "" })
  }
  // A group's own line ("worker", "task") is not a command one runs: its leaves are listed.
  return out.filter((c) => !out.some((o) => o.name.startsWith(`${c.name} `)))
}

/**
 * The root page, from @effect/cli's (its command list and description), grouped and wrapped.
 * The page at any width is the widest page wrapped ({@link wrapHelp}): what bin/roster.js prints
 * for `roster --help` without loading the program.
 */
export const rootHelp = (plain: string, version: string, width: number) => {
  const commands = listed(plain)
  const description = /\nDESCRIPTION\n\n(.+)\n/.exec(plain)?.[1] ?? ""
  const column = Math.max(...commands.map((c) => c.name.length)) + 4
  const grouped = new Set(HELP_GROUPS.flatMap(([, names]) => names))
  const other = commands.filter((c) => !grouped.has(c.name)).map((c) => c.name)
  const lines = [
    `roster ${version}`,
    "",
    description,
    "",
    "USAGE",
    "",
    "$ roster <command> [options]",
    "$ roster <command> --help          everything a command takes, with examples",
    ""
  ]
  for (const [title, names] of [...HELP_GROUPS, ["Other", other] as const]) {
    const here = names.map((n) => commands.find((c) => c.name === n)).filter((c) => c !== undefined)
    if (here.length === 0) continue
    lines.push(title.toUpperCase(), "", ...here.map((c) => `  ${c.name.padEnd(column - 2)}${summary(c.description)}`), "")
  }
  lines.push("EXAMPLES", "", ...EXAMPLES.map((e) => `  ${e}`), "")
  // Laid out unwrapped, then wrapped as a whole: the page at any width is the widest page wrapped.
  return wrapHelp(lines.join("\n"), width)
}
