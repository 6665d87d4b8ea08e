import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { serveWeb } from "../web/server.js"

export const webCommand = Command.make("web", {
  port: Options.integer("port").pipe(Options.withDefault(7310), Options.withDescription("the port on 127.0.0.1 (loopback only: no box can reach it)"))
}, ({ port }) =>
  Effect.gen(function*() {
    const served = yield* serveWeb({ port })
    yield* Console.log(`roster web on http://127.0.0.1:${served.port}/ — open this to log in (it holds this deployment's login token; keep it to yourself):`)
    yield* Console.log(served.url)
    yield* Console.log("Ctrl-C stops it. The roster server (roster server start) runs the tasks it shows and queues.")
    return yield* Effect.never
  }).pipe(Effect.scoped)).pipe(Command.withDescription(
    "Watch and steer the roster in a browser: live boxes and the queue, each run's timeline (pi's turns and tool calls, the " +
      "gateway's requests, message_user), tasks, and the gateway's view. Served on 127.0.0.1 only, with a login token and " +
      "CSRF-checked forms. Example: roster web --port 7310"
  ))
