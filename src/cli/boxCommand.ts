import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { buildScriptedImage, SCRIPTED_TAG } from "../box/buildScripted.js"

const buildScripted = Command.make("build-scripted", {
  tag: Options.text("tag").pipe(Options.withDefault(SCRIPTED_TAG), Options.withDescription("the image tag to build"))
}, ({ tag }) =>
  Effect.gen(function*() {
    yield* buildScriptedImage(tag)
    yield* Console.log(`built ${tag} (scripted engine). Use it with [engine] image = "${tag}" in org.toml`)
  })).pipe(Command.withDescription(
    "Build the scripted-engine box image: a busybox stand-in for pi with no model, for tests and rehearsals. " +
      "It runs a prompt whose first line starts with '!' as a shell script."
  ))

export const boxCommand = Command.make("box").pipe(
  Command.withDescription("Box images."),
  Command.withSubcommands([buildScripted])
)
