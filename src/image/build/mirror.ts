import { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"

/**
 * The Debian mirror this machine's apt already uses for `suite` (deb822 .sources files, then
 * one-line .list files): never hard-coded, so a machine behind its own mirror builds from it.
 */
export const aptMirror = (suite: string, root = "/etc/apt") =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const files: Array<string> = []
    const dir = path.join(root, "sources.list.d")
    if (yield* fs.exists(dir)) for (const f of (yield* fs.readDirectory(dir)).sort()) if (f.endsWith(".sources") || f.endsWith(".list")) files.push(path.join(dir, f))
    if (yield* fs.exists(path.join(root, "sources.list"))) files.unshift(path.join(root, "sources.list"))
    for (const file of files) {
      const found = mirrorIn(file, yield* fs.readFileString(file), suite)
      if (found !== undefined) return found
    }
    return undefined
  })

/** The mirror one apt source file names for `suite`'s main component, if any. */
const mirrorIn = (file: string, text: string, suite: string): string | undefined => {
  if (file.endsWith(".sources")) {
    for (const stanza of text.split(/\n\s*\n/)) {
      const field = (name: string) =>
        stanza.split("\n").filter((l) => !l.trimStart().startsWith("#"))
          .find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`))?.slice(name.length + 1).trim().split(/\s+/) ?? []
      if (field("Enabled")[0] === "no" || !field("Types").includes("deb")) continue
      if (field("Suites").includes(suite) && field("Components").includes("main")) return field("URIs")[0]
    }
  } else {
    for (const line of text.split("\n")) {
      const m = /^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)$/.exec(line)
      if (m && m[2] === suite && (m[3] ?? "").split(/\s+/).includes("main")) return m[1]
    }
  }
  return undefined
}
