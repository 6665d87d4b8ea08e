import { Clock, Effect, Ref, Schema } from "effect"
import { FleetBox, type FleetNodeView, type NodeBoxes } from "../../contract/fleet.js"
import type { NodeRow } from "../nodes.js"
import { rpcCall, RpcUnanswered } from "./client.js"

/** How long a call waits for another node: the fleet's machines share a network, not an ocean. */
const CALL_MS = 1_000

const NodeAnswer = Schema.parseJson(Schema.Struct({ node: Schema.String, instance: Schema.String, version: Schema.String }))
const decodeAnswer = Schema.decodeUnknownOption(NodeAnswer)

/** The calls this node makes on the others' runner RPCs, signed with the fleet's key. */
export const runnerCalls = <E>(self: string, key: Buffer, nodes: Effect.Effect<ReadonlyArray<NodeRow>, E>) => {
  /** A node's runner RPC, asked who it is: answered as that node (and how fast), or why not. */
  const ping = (row: NodeRow): Effect.Effect<FleetNodeView["rpc"]> => {
    const at = row.advertise
    if (at === null) return Effect.succeed(undefined)
    return Effect.gen(function*() {
      const started = yield* Clock.currentTimeMillis
      const answer = yield* rpcCall(at, key, self, { method: "GET", path: "/v1/node" }, CALL_MS)
      const ms = (yield* Clock.currentTimeMillis) - started
      if (answer.status !== 200) return { ok: false, detail: `answered ${answer.status}: ${answer.body.slice(0, 200)}` }
      const who = decodeAnswer(answer.body)
      if (who._tag === "None") return { ok: false, detail: "answered, but not as a roster node" }
      if (who.value.node !== row.name) return { ok: false, detail: `answers as node ${who.value.node}: two nodes advertise one address` }
      return { ok: true, ms }
    }).pipe(Effect.catchTag("RpcUnanswered", (e) => Effect.succeed({ ok: false, detail: e.detail })))
  }

  const nudgeApprovals = (node: string) =>
    Effect.gen(function*() {
      const row = (yield* nodes).find((r) => r.name === node)
      if (!row?.advertise) return
      const answer = yield* rpcCall(row.advertise, key, self, { method: "POST", path: "/v1/approvals/nudge" }, CALL_MS)
      if (answer.status !== 204) return yield* new RpcUnanswered({ at: row.advertise, detail: `answered ${answer.status}` })
    }).pipe(Effect.catchAll((e) =>
      Effect.logWarning(
        `fleet: node ${node} was not told of the decision at once (${e instanceof RpcUnanswered ? e.message : String(e)}): it finds it at its next look, within a second`
      )
    ))

  /** A node's live boxes, or why not (one without a runner RPC, one that does not answer). */
  const boxesOf = (row: NodeRow): Effect.Effect<NodeBoxes> => {
    const at = row.advertise
    if (at === null) return Effect.succeed({ node: row.name, detail: "it has no runner RPC ([cluster] listen): its boxes are listed on its own Now page" })
    return rpcCall(at, key, self, { method: "GET", path: "/v1/boxes" }, CALL_MS * 3).pipe(
      Effect.flatMap((answer) =>
        answer.status === 200
          ? decodeBoxes(answer.body).pipe(Effect.mapError(() => new RpcUnanswered({ at, detail: "answered, but not with boxes" })))
          : Effect.fail(new RpcUnanswered({ at, detail: `answered ${answer.status}` }))),
      Effect.map((a): NodeBoxes => ({ node: row.name, boxes: a.boxes })),
      Effect.catchTag("RpcUnanswered", (e) => Effect.succeed({ node: row.name, detail: e.message }))
    )
  }

  return { ping, nudgeApprovals, boxesOf }
}

const decodeBoxes = Schema.decodeUnknown(Schema.parseJson(Schema.Struct({ boxes: Schema.Array(FleetBox) })))

/** Each node's view with its runner RPC's answer, asked of the live ones at once (a silent one costs its timeout once). */
export const withPings = (rows: ReadonlyArray<NodeRow>, views: ReadonlyArray<FleetNodeView>, ping: (row: NodeRow) => Effect.Effect<FleetNodeView["rpc"]>) =>
  Effect.forEach(rows, (r, i) => (views[i]?.state === "up" ? ping(r) : Effect.succeed(undefined)), { concurrency: "unbounded" }).pipe(
    Effect.map((rpc) => views.map((v, i) => (rpc[i] ? { ...v, rpc: rpc[i] } : v)))
  )

/** How long an answer stands for `server status`: the web's Now page asks every 2 s, and a silent node costs a look its timeout. */
const PING_FRESH_MS = 5_000

/** `ping`, answered from the last call while it is fresh (per node and address). */
export const freshPings = (ping: (row: NodeRow) => Effect.Effect<FleetNodeView["rpc"]>) =>
  Effect.map(Ref.make(new Map<string, { readonly at: number; readonly rpc: FleetNodeView["rpc"] }>()), (seen) => (row: NodeRow) =>
    Effect.gen(function*() {
      const key = `${row.name} ${row.advertise ?? ""}`
      const now = yield* Clock.currentTimeMillis
      const last = (yield* Ref.get(seen)).get(key)
      if (last && now - last.at < PING_FRESH_MS) return last.rpc
      const rpc = yield* ping(row)
      yield* Ref.update(seen, (m) => new Map(m).set(key, { at: now, rpc }))
      return rpc
    }))
