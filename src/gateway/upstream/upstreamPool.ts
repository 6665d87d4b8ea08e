import { Cause, Effect, Exit, FiberSet, Option } from "effect"
import * as http from "node:http"
import type * as net from "node:net"
import type { Refusal } from "../base/refusal.js"

/** A dial the pool could not make, carrying the refusal (and its status) to the request that waited for it. */
export class PooledRefusal extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.reason)
  }
}

type Connect = (options: unknown, done: (err: Error | null, socket?: net.Socket) => void) => undefined

/**
 * Keep-alive upstream connections, one agent per (protocol, host, port, route, rule): a request
 * reuses an idle verified connection instead of dialling, resolving, checking and shaking hands
 * again. A new connection is still made by `open` — the checked dial and the verified TLS — so
 * every socket in the pool passed the same checks a fresh one would. Closed with the gateway.
 */
export const makeUpstreamPool = Effect.gen(function*() {
  const agents = new Map<string, http.Agent>()
  // The agents' dials run as fibers of the pool's scope: closing the gateway interrupts a dial under way.
  const dials = yield* FiberSet.make<net.Socket, Refusal>()
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      for (const agent of agents.values()) agent.destroy()
      agents.clear()
    })
  )
  const agentFor = <R>(key: string, open: Effect.Effect<net.Socket, Refusal, R>) =>
    Effect.gen(function*() {
      const existing = agents.get(key)
      if (existing) return existing
      const run = yield* FiberSet.runtime(dials)<R>()
      const agent = new http.Agent({ keepAlive: true, maxFreeSockets: 16, scheduling: "lifo", timeout: 60_000 })
      const connect: Connect = (_options, done) => {
        run(open).addObserver((exit) => {
          if (Exit.isSuccess(exit)) return done(null, exit.value)
          const failure = Cause.failureOption(exit.cause)
          done(Option.isSome(failure) ? new PooledRefusal(failure.value) : new Error("the upstream connection was not made"))
        })
        return undefined
      }
      Object.assign(agent, { createConnection: connect })
      agents.set(key, agent)
      return agent
    })
  return { agentFor }
})

export type UpstreamPool = Effect.Effect.Success<typeof makeUpstreamPool>
