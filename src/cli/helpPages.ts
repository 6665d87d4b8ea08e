import type * as Descriptor from "@effect/cli/CommandDescriptor"
import { Console, Effect } from "effect"
import { tidyHelp } from "./help.js"
import { commandPaths } from "./usage.js"

/** The width the pages are laid out at: wider than any line, so a page at any width is this one wrapped. */
export const PAGE_WIDTH = 1000

/**
 * Every command's `--help` page as the program prints it — @effect/cli's page, tidied, laid out
 * at PAGE_WIDTH, its colours kept (bin/roster.js strips them off a terminal, as the program does)
 * — by running the program itself on `<command> --help` for each: what the build writes beside
 * the bundle, so `roster <command> --help` is answered without loading the program.
 */
export const helpPages = <E, R>(root: Descriptor.Command<unknown>, run: (argv: ReadonlyArray<string>) => Effect.Effect<void, E, R>) =>
  Effect.forEach(commandPaths(root), (words) =>
    Effect.gen(function*() {
      const printed: Array<string> = []
      const capture = Console.consoleWith((c) =>
        Effect.succeed<Console.Console>({
          ...c,
          log: (...args) => Effect.sync(() => void printed.push(args.map((a) => tidyHelp(String(a), ["roster", ...words], PAGE_WIDTH)).join(" ")))
        })
      )
      yield* run(["node", "roster", ...words, "--help"]).pipe(Console.withConsole(yield* capture))
      return [words.join(" "), printed.join("\n")] as const
    })).pipe(Effect.map((pages) => Object.fromEntries(pages)))
