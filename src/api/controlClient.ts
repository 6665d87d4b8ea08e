import { FileSystem, HttpApiClient } from "@effect/platform"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Layer, Option } from "effect"
import type * as http from "node:http"
import * as net from "node:net"
import { ControlApi } from "./ControlApi.js"
import { Paths, layout } from "../config/Paths.js"

const clientFor = (socket: string) =>
  HttpApiClient.make(ControlApi, { baseUrl: "http://roster.localhost" }).pipe(
    Effect.provide(NodeHttpClient.layerWithoutAgent.pipe(
      // node's Agent passes its options to every connection it opens: socketPath makes them unix-socket ones.
      Layer.provide(NodeHttpClient.makeAgentLayer({ socketPath: socket } as http.AgentOptions))
    ))
  )

export type ControlClient = Effect.Effect.Success<ReturnType<typeof clientFor>>

/**
 * Runs `f` against the daemon's control API; None when no daemon answers (no socket, or a
 * stale one left by a killed daemon), so the caller can fall back to the files themselves.
 * The daemon's own refusals (a bad task, no such task) pass through as errors.
 */
export const viaDaemon = <A, E, R>(f: (client: ControlClient) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const socket = layout(yield* Paths).controlSocket
    // A socket that cannot be looked at is no daemon to hand to: the CLI does the work itself, as with none running.
    if (!(yield* (yield* FileSystem.FileSystem).exists(socket).pipe(Effect.orElseSucceed(() => false)))) return Option.none<A>()
    const client = yield* clientFor(socket)
    return yield* f(client).pipe(
      Effect.map(Option.some),
      Effect.catchIf(
        (e): e is E => typeof e === "object" && e !== null && "_tag" in e && e._tag === "RequestError",
        () => Effect.succeed(Option.none<A>())
      )
    )
  })

/** Does something answer on this socket? (A stale file left by a killed daemon does not.) */
export const socketAnswers = (socket: string) =>
  Effect.async<boolean>((resume) => {
    const c = net.connect({ path: socket })
    c.once("connect", () => {
      c.destroy()
      resume(Effect.succeed(true))
    })
    c.once("error", () => resume(Effect.succeed(false)))
  })
