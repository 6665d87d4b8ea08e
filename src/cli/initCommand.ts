import { Command, Options } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import { Console, Effect } from "effect"
import { validateWorkerName } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { orgTemplate } from "../config/template.js"
import { writeAtomic } from "../fs/atomic.js"
import { addWorker } from "../worker/workers.js"

const worker = Options.text("worker").pipe(
  Options.withDefault("alice"),
  Options.withDescription("name of the first worker to create (a-z, 0-9, -)")
)

export const initCommand = Command.make("init", { worker }, ({ worker }) =>
  Effect.gen(function*() {
    yield* validateWorkerName(worker)
    const fs = yield* FileSystem.FileSystem
    const paths = yield* Paths
    const files = layout(paths)
    for (const dir of [paths.config, paths.data, paths.state]) yield* fs.makeDirectory(dir, { recursive: true })
    yield* fs.makeDirectory(files.vaultDir, { recursive: true, mode: 0o700 })
    yield* fs.chmod(files.vaultDir, 0o700)
    if (yield* fs.exists(files.orgToml)) {
      yield* Console.log(`kept     ${files.orgToml} (already there)`)
    } else {
      // Only root can install the iptables pinning; as root it is on from the start.
      const root = process.getuid?.() === 0
      yield* writeAtomic(files.orgToml, orgTemplate({ root }))
      yield* Console.log(`created  ${files.orgToml}${root ? " (egress_lockdown on: run as root)" : ""}`)
    }
    if (yield* fs.exists(files.identityMd(worker))) {
      yield* Console.log(`kept     worker ${worker} (already there)`)
    } else {
      yield* addWorker(worker)
      yield* Console.log(`created  worker ${worker}: ${files.identityMd(worker)}`)
    }
    yield* Console.log(
      `\nnext:\n  roster server start                    # the gateway every box talks through\n` +
        `  roster box build                       # the box image (once)\n` +
        `  roster worker run ${worker} "say hello"`
    )
  })).pipe(Command.withDescription(
    "Create roster's config, data and state folders, a commented org.toml with safe defaults, and a first worker. Never overwrites."
  ))
