import { Console, Effect, Logger } from "effect"
import { plainLogLine } from "../report/plainLog.js"

/**
 * Work the daemon does for a CLI that handed it over, speaking as the CLI would: its console's
 * lines and its log lines (on stderr, as the CLI's own logger prints them) go to the CLI through
 * `o` (its stdout) and `e` (its stderr), in order.
 */
export const inCliVoice = (o: (text: string) => void, e: (text: string) => void) => <A, E, R>(effect: Effect.Effect<A, E, R>) => {
  const line = (...args: ReadonlyArray<unknown>) => `${args.map(String).join(" ")}\n`
  return Console.consoleWith((c) =>
    Console.withConsole(effect, {
      ...c,
      log: (...args) => Effect.sync(() => o(line(...args))),
      info: (...args) => Effect.sync(() => o(line(...args))),
      error: (...args) => Effect.sync(() => e(line(...args))),
      warn: (...args) => Effect.sync(() => e(line(...args)))
    })
  ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, Logger.make((entry) => e(`${plainLogLine(entry)}\n`)))))
}
