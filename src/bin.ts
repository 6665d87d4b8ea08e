import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Console, Effect, Exit, Logger, LogLevel } from "effect"
import * as CliConfig from "@effect/cli/CliConfig"
import * as ValidationError from "@effect/cli/ValidationError"
import { cli, roster } from "./cli/Cli.js"
import { ExitCode } from "./cli/exit.js"
import { plainConsole, visible } from "./cli/terminal.js"
import { tidyHelp } from "./cli/help.js"
import { helpPages } from "./cli/helpPages.js"
import { FileSystem } from "@effect/platform"
import { TerminalReporter } from "./cli/terminalReporter.js"
import { commandAt, unknownSubcommand, usageLine } from "./cli/usage.js"
import { Hurry } from "./run/Hurry.js"
import { makeRosterLive } from "./RosterLive.js"
import { layerSpanTimes } from "./report/spanTimes.js"
import { errorMessage, plainLogLine } from "./report/plainLog.js"

// runMain turns SIGINT/SIGTERM into interruption (finalizers kill the box, drop the token);
// remember which one so the process exits 130/143 as a shell expects.
let signalled: NodeJS.Signals | undefined
process.once("SIGINT", () => (signalled = "SIGINT"))
process.once("SIGTERM", () => (signalled = "SIGTERM"))

const plainLogger = Logger.make((entry) => globalThis.console.error(plainLogLine(entry)))

/**
 * ROSTER_HELP_DUMP=<file> (the build, scripts/bundle.mjs): every command's help page written to the
 * file as JSON instead of running a command — what bin/roster.js answers `<command> --help` from.
 */
const dumpHelp = (file: string) =>
  helpPages(roster.descriptor, cli).pipe(
    Effect.flatMap((pages) => Effect.flatMap(FileSystem.FileSystem, (fs) => fs.writeFileString(file, `${JSON.stringify(pages)}\n`)))
  )

/**
 * `roster connection frob --help` when there is no `connection frob`: @effect/cli would print the
 * root page and exit 0, so a script or a person would take it for a real command. Said, with the
 * group's real subcommands, exit 2.
 */
const refuseUnknownHelp = (argv: ReadonlyArray<string>) => {
  const words = argv.slice(2)
  if (!words.some((w) => w === "--help" || w === "-h")) return undefined
  const unknown = unknownSubcommand(roster.descriptor, words.slice(0, words.findIndex((w) => w.startsWith("-"))))
  return unknown === undefined ? undefined : Console.error(
    `roster: unknown command "${visible(`${unknown.group} ${unknown.word}`)}" — ${unknown.group} has: ${unknown.children.join(", ")}\nmore: ${unknown.group} --help`
  ).pipe(Effect.zipRight(Effect.fail(new ExitCode({ code: 2 }))))
}

const main = (process.env.ROSTER_HELP_DUMP ? dumpHelp(process.env.ROSTER_HELP_DUMP) : refuseUnknownHelp(process.argv) ?? cli(process.argv)).pipe(
  Effect.catchAll((e) =>
    e instanceof ExitCode
      ? Effect.fail(e)
      // @effect/cli has printed what was wrong: add the command's usage and where its help is.
      : ValidationError.isValidationError(e)
      ? Effect.sync(() => usageLine(roster.descriptor, process.argv.slice(2))).pipe(
        Effect.flatMap((u) => Console.error(`${u.line}\nmore: ${u.path} --help`)),
        Effect.zipRight(Effect.fail(new ExitCode({ code: 2 })))
      )
      : Console.error(`roster: ${visible(errorMessage(e))}`).pipe(Effect.zipRight(Effect.fail(new ExitCode({ code: 1 }))))
  ),
  Effect.provide(Logger.replace(Logger.defaultLogger, plainLogger)),
  (effect) =>
    Console.consoleWith((c) =>
      Console.withConsole(effect, plainConsole(c, (text) => tidyHelp(text, commandAt(roster.descriptor, process.argv.slice(2)).path)))
    ),
  Logger.withMinimumLogLevel(LogLevel.Info),
  // Help shows roster's own words: no type blurbs ("A user-defined piece of text."), and the
  // built-in options (--completions, --log-level, --wizard) are in the README, not on every page.
  Effect.provide(CliConfig.layer({ showBuiltIns: false })),
  Effect.provide(makeRosterLive({
    // Progress and notes are drawn for a person here; the library only reports them.
    reporter: TerminalReporter,
    // A second Ctrl-C cuts long clean-up short (Hurry); the first interrupts the run.
    hurry: Hurry.layerSignals
  })),
  // ROSTER_TRACE=<file>: how long each named step took, one JSON line each, written at exit
  // (docs/PERFORMANCE.md reads a run's steps this way).
  process.env.ROSTER_TRACE ? Effect.provide(layerSpanTimes(process.env.ROSTER_TRACE)) : (effect) => effect
)

NodeRuntime.runMain(main, {
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => {
    if (Exit.isSuccess(exit)) return onExit(0)
    if (Cause.isInterruptedOnly(exit.cause)) return onExit(signalled === "SIGTERM" ? 143 : 130)
    const failure = Cause.failureOption(exit.cause)
    if (failure._tag === "Some" && failure.value instanceof ExitCode) return onExit(failure.value.code)
    globalThis.console.error(`roster: unexpected failure\n${Cause.pretty(exit.cause)}`)
    onExit(70)
  }
})
