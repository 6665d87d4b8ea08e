import { Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { serveRehearsal } from "../rehearsal/server.js"
import { BadInput } from "./badInput.js"

/** The longest a rehearsal answer may be held back: past it a client would time out anyway. */
const MAX_DELAY_MS = 600_000

export const rehearsalCommand = Command.make("rehearsal", {
  port: Options.integer("port").pipe(Options.withDefault(7391), Options.withDescription("port on 127.0.0.1")),
  failWith: Options.integer("fail-with").pipe(Options.optional, Options.withDescription("answer every request with this HTTP status (e.g. 529)")),
  delayMs: Options.integer("delay-ms").pipe(Options.optional, Options.withDescription("wait this long before each answer (a slow model)"))
}, ({ delayMs, failWith, port }) =>
  Effect.gen(function*() {
    if (Option.isSome(delayMs) && !(delayMs.value >= 0 && delayMs.value <= MAX_DELAY_MS)) {
      return yield* Effect.fail(new BadInput({ detail: `--delay-ms ${delayMs.value}: a wait from 0 to ${MAX_DELAY_MS} ms (10 minutes), e.g. --delay-ms 2000` }))
    }
    const served = yield* serveRehearsal({
      port,
      ...(Option.isSome(failWith) ? { failWith: failWith.value } : {}),
      ...(Option.isSome(delayMs) ? { delayMs: delayMs.value } : {})
    })
    yield* Console.log(`rehearsal model (not Claude) listening on http://127.0.0.1:${served.port} — route a host to it with [[route]]`)
    return yield* Effect.never
  }).pipe(Effect.scoped)).pipe(Command.withDescription(
    "Run the rehearsal model in the foreground: an Anthropic-Messages-compatible stand-in that calls bash in the box, " +
      "messages the user and answers, for demos and tests without a real model. Route api.anthropic.com to it with [[route]]."
  ))
