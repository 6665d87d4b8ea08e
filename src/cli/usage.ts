import * as Descriptor from "@effect/cli/CommandDescriptor"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Usage from "@effect/cli/Usage"

// @effect/cli's public getSubcommands flattens a level to its parents; the tree itself is these nodes.
interface Node {
  readonly _tag: string
  readonly name?: string
  readonly parent?: Node
  readonly children?: ReadonlyArray<Node>
  readonly command?: Node
}

const nameOf = (n: Node): string =>
  n._tag === "Map" && n.command ? nameOf(n.command) : n._tag === "Subcommands" && n.parent ? nameOf(n.parent) : n.name ?? ""

const childrenOf = (n: Node): ReadonlyArray<Node> =>
  n._tag === "Map" && n.command ? childrenOf(n.command) : n._tag === "Subcommands" ? n.children ?? [] : []

/**
 * The usage line of the deepest command the words name (`roster worker run ...`), so a usage
 * error shows what the command takes, not only what was wrong.
 */
/** Every command below the root, as the words that name it (`["worker"]`, `["worker", "run"]`, …). */
export const commandPaths = (root: Descriptor.Command<unknown>): ReadonlyArray<ReadonlyArray<string>> => {
  const out: Array<ReadonlyArray<string>> = []
  const walk = (node: Node, words: ReadonlyArray<string>) => {
    for (const child of childrenOf(node)) {
      const here = [...words, nameOf(child)]
      out.push(here)
      walk(child, here)
    }
  }
  walk(root as unknown as Node, [])
  return out
}

/** The deepest command the words name, and its path from `roster`. */
export const commandAt = (root: Descriptor.Command<unknown>, words: ReadonlyArray<string>) => {
  let node = root as unknown as Node
  const path = ["roster"]
  for (const word of words) {
    const next = childrenOf(node).find((c) => nameOf(c) === word)
    if (!next) break
    node = next
    path.push(word)
  }
  return { node, path }
}

export const usageLine = (root: Descriptor.Command<unknown>, words: ReadonlyArray<string>) => {
  const { node, path } = commandAt(root, words)
  const text = HelpDoc.toAnsiText(Usage.getHelp(Descriptor.getUsage(node as unknown as Descriptor.Command<unknown>)))
   
  const plain = text.replace(/\x1b\[[0-9;]*m/g, "").trim().split(/\s+/).slice(1).join(" ")
  return { path: path.join(" "), line: `usage: ${path.join(" ")} ${plain}`.trimEnd() }
}

/**
 * The first word that names no subcommand of the group before it (`roster connection login`:
 * "login" of "roster connection"), with that group's real subcommands; none when every word up to
 * the first option names a command, or the deepest one named takes arguments rather than subcommands.
 */
export const unknownSubcommand = (root: Descriptor.Command<unknown>, words: ReadonlyArray<string>) => {
  const { node, path } = commandAt(root, words)
  const next = words[path.length - 1]
  const children = childrenOf(node).map(nameOf)
  if (next === undefined || next.startsWith("-") || children.length === 0) return undefined
  return { group: path.join(" "), word: next, children }
}
