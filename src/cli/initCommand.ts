import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { initDeployment } from "../deployment/init.js"

const worker = Options.text("worker").pipe(
  Options.withDefault("alice"),
  Options.withDescription("name of the first worker to create (a-z, 0-9, -)")
)

export const initCommand = Command.make("init", { worker }, ({ worker }) =>
  Effect.gen(function*() {
    const made = yield* initDeployment({ worker })
    yield* Console.log(
      made.orgToml.created
        ? `created  ${made.orgToml.file}${made.orgToml.lockdown ? " (egress_lockdown on: run as root)" : ""}`
        : `kept     ${made.orgToml.file} (already there)`
    )
    if (made.worker) {
      yield* Console.log(made.worker.created ? `created  worker ${worker}: ${made.worker.identity}` : `kept     worker ${worker} (already there)`)
    }
    yield* Console.log(
      `\nnext:\n  roster server start                    # the gateway every box talks through\n` +
        `  roster box build                       # the box image (once)\n` +
        `  roster worker run ${worker} "say hello"`
    )
  })).pipe(Command.withDescription(
    "Create roster's config, data and state folders, a commented org.toml with safe defaults, a first worker and the " +
      "deployment's CA. Never overwrites. Example: roster init --worker alice"
  ))
