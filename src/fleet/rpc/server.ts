import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Clock, Effect, FiberSet } from "effect"
import * as dns from "node:dns/promises"
import * as http from "node:http"
import * as os from "node:os"
import type { FleetBox } from "../../contract/fleet.js"
import { VERSION } from "../../contract/version.js"
import { RunnerRpcListenError } from "../errors.js"
import { interfaceOf, listenProblem, peerProblem, splitHostPort } from "./peers.js"
import { verifyRequest } from "./sign.js"

/** The most a call's body may be: a call names a thing, it never carries one. */
const BODY_MAX = 4096

/** A refused peer is said once a minute at most: a box knocking in a loop must not fill the log. */
const REFUSAL_LOG_EVERY_MS = 60_000

export type ListenAddress = Effect.Effect.Success<ReturnType<typeof listenAddress>>

export interface RunnerRpcOptions {
  /** `[cluster] listen`: host:port. */
  readonly listen: string
  readonly node: string
  readonly key: Buffer
  readonly instance: Effect.Effect<string>
  /** A decision was made on the fleet's board for a request this node holds: look now. */
  readonly nudgeApprovals: Effect.Effect<void>
  /** This node's live boxes, with their engine stats: another node's Now page shows them. */
  readonly liveBoxes: Effect.Effect<ReadonlyArray<FleetBox>>
}

/** The address of an interface by its name (`eth0`): its first IPv4, else its first IPv6 — one org.toml serves every node. */
const addressOfInterface = (name: string) => {
  const infos = (os.networkInterfaces()[name] ?? []).filter((i) => !i.internal || name === "lo")
  return (infos.find((i) => i.family === "IPv4") ?? infos[0])?.address
}

/**
 * The address `listen` names — an IP, a name of this machine, or an interface (`eth0:7310`) —
 * checked: this machine's, on no container bridge, not every address.
 */
export const listenAddress = (listen: string) =>
  Effect.gen(function*() {
    const { host, port } = splitHostPort(listen)
    const address = addressOfInterface(host) ?? (yield* Effect.tryPromise({
      try: () => dns.lookup(host).then((r) => r.address),
      catch: () => new RunnerRpcListenError({ listen, detail: `names ${host}, which is neither an interface nor a name that resolves here` })
    }))
    const problem = listenProblem(address, os.networkInterfaces())
    if (problem !== undefined) return yield* new RunnerRpcListenError({ listen, detail: `(${address}) ${problem}` })
    return { address, port, iface: interfaceOf(address, os.networkInterfaces()) ?? "", at: `${address.includes(":") ? `[${address}]` : address}:${port}` }
  })

/**
 * The node's runner RPC: what another node asks or tells this one directly rather than through
 * the database — are you there (`GET /v1/node`), what runs on you now (`GET /v1/boxes`: the
 * engine's, never in the database), and look at the board now (`POST /v1/approvals/nudge`).
 * Three walls keep a box out: it listens only on an address of this machine that is no container
 * bridge's; a connection from the network of any other interface (a box's bridge) is closed
 * before a byte is read, lockdown or not; every call is signed with the fleet's key, which lives
 * in the database a box cannot reach.
 */
export const serveRunnerRpc = Effect.fn("fleet.rpc.serve")(function*(opts: RunnerRpcOptions, where: ListenAddress) {
  const run = yield* FiberSet.makeRuntime<never>()
  const clock = yield* Effect.clock
  const lastSaid = new Map<string, number>()
  const guarded = () => {
    const server = http.createServer({ headersTimeout: 5_000, requestTimeout: 10_000 })
    server.on("connection", (socket) => {
      const peer = socket.remoteAddress ?? ""
      const problem = peerProblem(peer, where.iface, os.networkInterfaces())
      if (problem === undefined) return
      socket.destroy()
      const now = clock.unsafeCurrentTimeMillis()
      if (now - (lastSaid.get(peer) ?? 0) < REFUSAL_LOG_EVERY_MS) return
      lastSaid.set(peer, now)
      run(Effect.logWarning(`fleet: the runner RPC closed a connection from ${peer}: ${problem} (a box's network is never let in)`))
    })
    return server
  }
  const server = yield* NodeHttpServer.make(guarded, { port: where.port, host: where.address }).pipe(
    Effect.mapError((e) => new RunnerRpcListenError({ listen: opts.listen, detail: `cannot be listened on (${String(e.cause)})` }))
  )
  yield* server.serve(answer(opts))
  yield* Effect.logInfo(`fleet: node ${opts.node}'s runner RPC listens on ${where.at}`)
})

const json = (status: number, body: unknown) => HttpServerResponse.unsafeJson(body, { status })

/** One call: its signature checked over its body, then routed. */
const answer = (opts: RunnerRpcOptions) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    // A body of known length only: a chunked one could be any size before the signature is checked.
    if (request.headers["transfer-encoding"] !== undefined) return json(411, { error: "a call's body has a Content-Length" })
    if (Number(request.headers["content-length"] ?? 0) > BODY_MAX) return json(413, { error: "a call's body is at most 4 KiB" })
    const body = yield* request.text
    const path = new URL(request.url, "http://rpc").pathname
    const signed = verifyRequest(opts.key, { method: request.method, path, headers: request.headers, body }, yield* Clock.currentTimeMillis)
    if ("refused" in signed) return json(401, { error: `refused: ${signed.refused}` })
    if (request.method === "GET" && path === "/v1/node") {
      return json(200, { node: opts.node, instance: yield* opts.instance, version: VERSION, time_ms: yield* Clock.currentTimeMillis })
    }
    if (request.method === "GET" && path === "/v1/boxes") return json(200, { node: opts.node, boxes: yield* opts.liveBoxes })
    if (request.method === "POST" && path === "/v1/approvals/nudge") {
      yield* Effect.logInfo(`fleet: node ${signed.node} decided a request held here; looking at the board now`)
      yield* opts.nudgeApprovals
      return HttpServerResponse.empty({ status: 204 })
    }
    return json(404, { error: `no such call: ${request.method} ${path}` })
  }).pipe(Effect.catchAllCause((cause) =>
    Effect.logError("fleet: a runner RPC call failed", cause).pipe(Effect.as(json(500, { error: "internal error (see the node's log)" })))
  ))
