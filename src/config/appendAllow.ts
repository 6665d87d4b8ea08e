import { FileSystem } from "@effect/platform"
import { Effect } from "effect"
import { writeAtomic } from "../fs/atomic.js"
import { layout, Paths } from "./Paths.js"
import { isNotFound } from "../fs/notFound.js"

/** The lines `roster approve --always` adds: one worker, one host:port, and who approved it when. */
export const allowLines = (worker: string, host: string, port: number, by: string, at: string) => [
  `# approved by ${by.replace(/[\r\n]/g, " ")} on ${at} (roster approve --always)`,
  "[[allow]]",
  `hosts = [${JSON.stringify(host)}]`,
  `ports = [${port}]`,
  `scope = [${JSON.stringify(`org/${worker}`)}]`
]

/** Appends `lines` to org.toml (written whole beside it, then renamed: a reader never sees half of it). */
export const appendToOrgToml = Effect.fn("config.appendToOrgToml")(function*(lines: ReadonlyArray<string>) {
  const fs = yield* FileSystem.FileSystem
  const file = layout(yield* Paths).orgToml
  // None yet starts one; one that cannot be read is never written over (everything it says would be lost).
  const current = yield* fs.readFileString(file).pipe(Effect.catchIf(isNotFound, () => Effect.succeed("")))
  const gap = current === "" || current.endsWith("\n\n") ? "" : current.endsWith("\n") ? "\n" : "\n\n"
  yield* writeAtomic(file, `${current}${gap}${lines.join("\n")}\n`)
})
