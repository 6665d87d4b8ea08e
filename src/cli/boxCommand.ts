import { Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { buildBoxImage, imageIsCurrent, imageLabels, runCaptured } from "../image/build/build.js"
import { buildScriptedImage, BuildError, SCRIPTED_TAG } from "../image/buildScripted.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { BoxBackend } from "../backend/BoxBackend.js"

const tagOption = Options.text("tag").pipe(
  Options.optional,
  Options.withDescription("the image tag (default: [engine] image in org.toml, else roster-box:1)")
)

const configuredTag = (tag: Option.Option<string>) =>
  Option.isSome(tag)
    ? Effect.succeed(tag.value)
    // Outside a deployment (or with an org.toml that does not read, which every other command says) the default tag.
    : Effect.flatMap(OrgConfig, (c) => c.snapshot).pipe(Effect.map((o) => o.engine.image), Effect.orElseSucceed(() => "roster-box:1"))

const build = Command.make("build", {
  tag: tagOption,
  offline: Options.boolean("offline").pipe(Options.withDescription("build without a registry (debootstrap + npm); chosen automatically when no registry answers")),
  ifChanged: Options.boolean("if-changed").pipe(Options.withDescription("skip the build when the image already carries this checkout's engine"))
}, ({ ifChanged, offline, tag }) =>
  Effect.gen(function*() {
    const target = yield* configuredTag(tag)
    yield* (yield* BoxBackend).ping
    if (ifChanged && (yield* imageIsCurrent(target))) return yield* Console.log(`${target} is up to date (no rebuild)`)
    yield* buildBoxImage(target, offline)
    yield* Console.log(`built ${target} — check it: roster box check`)
  })).pipe(Command.withDescription(
    "Build the box image with pi in it: box/Dockerfile where a registry answers, else (or with --offline) from Debian's " +
      "packages and the npm registry. Tags the image org.toml names."
  ))

// A deployment's [box] runtime; outside one, what a new deployment gets.
const configuredRuntime = Effect.flatMap(OrgConfig, (c) => c.snapshot).pipe(
  Effect.map((o) => o.box),
  // As the comment above says: outside a deployment (or with an org.toml that does not read), a new one's runtime.
  Effect.orElseSucceed(() => ({ runtime: "auto" as const })),
  Effect.flatMap((policy) => Effect.flatMap(BoxBackend, (b) => b.runtime(policy)))
)

const check = Command.make("check", { tag: tagOption }, ({ tag }) =>
  Effect.gen(function*() {
    const target = yield* configuredTag(tag)
    const labels = yield* imageLabels(target)
    if (!labels) return yield* Effect.fail(new BuildError({ detail: `${target} is not present — build it: roster box build` }))
    const runtime = yield* configuredRuntime
    // As the box user, with /tmp mounted as a box's is and under the box's runtime: pi and its tools write there.
    const r = yield* runCaptured(target, ["sh", "-c",
      "echo \"node $(node --version)\"; echo \"pi $(/opt/roster/engine/run-pi --version)\"; " +
      "if f=$(mktemp /tmp/roster-check.XXXXXX) && rm -f \"$f\"; then echo 'tmp writable'; else echo 'tmp NOT writable'; fi; " +
      "if ls -ld /tmp >/dev/null 2>&1; then echo 'ls works'; else echo \"ls fails: $(ls -ld /tmp 2>&1)\"; fi"], runtime)
    const node = /node (v\S+)/.exec(r.stdout)?.[1]
    const pi = /pi (\d\S*)/.exec(r.stdout)?.[1]
    if (r.exitCode !== 0 || !node || !pi) {
      return yield* Effect.fail(new BuildError({ detail: `${target} does not run pi (exit ${r.exitCode}):\n${r.stdout.trim()}` }))
    }
    if (!r.stdout.includes("tmp writable")) {
      return yield* Effect.fail(new BuildError({
        detail: `${target}: /tmp is not writable by the box user (uid 65532) — pi and its tools need it; rebuild the image: roster box build`
      }))
    }
    // Debian 12's gVisor refuses a statx flag coreutils passes: the image's shim (box/engine/statx-shim.c) drops it.
    if (!r.stdout.includes("ls works")) {
      return yield* Effect.fail(new BuildError({
        detail: `${target}: ls fails in a box under ${runtime} (${/ls fails: (.*)/.exec(r.stdout)?.[1] ?? "no answer"}) — the agent's ls and stat would too; ` +
          "rebuild the image with a C compiler installed, which builds its statx shim: apt-get install gcc && roster box build"
      }))
    }
    yield* Console.log(`${target}: node ${node}, pi ${pi}${labels["org.roster.pi-version"] ? ` (label ${labels["org.roster.pi-version"]})` : ""}, /tmp writable, ` +
      `runtime ${runtime}${runtime === "runsc" ? " (gVisor)" : ""}`)
  })).pipe(Command.withDescription("Run pi --version in the box image, as a box runs ([box] runtime), and report the Node and pi versions."))

const buildScripted = Command.make("build-scripted", {
  tag: Options.text("tag").pipe(Options.withDefault(SCRIPTED_TAG), Options.withDescription("the image tag to build"))
}, ({ tag }) =>
  Effect.gen(function*() {
    yield* buildScriptedImage(tag)
    yield* Console.log(`built ${tag} (scripted engine). Use it with [engine] image = "${tag}" in org.toml`)
  })).pipe(Command.withDescription(
    "Build the scripted-engine box image: a busybox stand-in for pi with no model, for tests. " +
      "It runs a prompt whose first line starts with '!' as a shell script."
  ))

export const boxCommand = Command.make("box").pipe(
  Command.withDescription("Box images: build the pi image, check it, or build the scripted stand-in for tests."),
  Command.withSubcommands([build, check, buildScripted])
)
