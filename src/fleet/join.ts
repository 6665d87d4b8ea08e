import { FileSystem } from "@effect/platform"
import { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Context, Duration, Effect, Layer, Ref, Schedule, Stream } from "effect"
import { answerWithin } from "../contract/answerWithin.js"
import * as crypto from "node:crypto"
import * as os from "node:os"
import type { ClusterSection } from "../config/cluster.js"
import { ConfigError } from "../config/decode.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { Paths } from "../config/Paths.js"
import type { FleetBox, FleetNodeView, FleetStatus, NodeBoxes } from "../contract/fleet.js"
import { VERSION } from "../contract/version.js"
import { FleetNotify, fleetSqlLayer, whereOf } from "./connect.js"
import type { FleetMember } from "./FleetMember.js"
import { TASKS_CHANNEL } from "./channels.js"
import { configFingerprintIn } from "./fingerprint.js"
import { afterLanded, afterMissed, beatEvery, CUT_OFF, cutOffAfterMs, freshHealth, type Health } from "./lease.js"
import { boxRowElsewhere, giveBoxRow, takeBoxRow } from "./boxRows.js"
import { fenceLostNodes, fenceNode, type FencedNode, isLockTimeout } from "./loss.js"
import { migrate, SCHEMA_VERSION } from "./migrations.js"
import { beat, leaveNode, listNodes, type NodeBeat, type NodeRow, nodeState, nodeView, registerNode } from "./nodes.js"
import { freshPings, runnerCalls, withPings } from "./rpc/calls.js"
import { rpcKey } from "./rpc/key.js"
import { makeNudge } from "./rpc/nudge.js"
import { listenAddress, serveRunnerRpc } from "./rpc/server.js"
import { nodeNameOf } from "../config/nodeName.js"
import { claimSharedData } from "./sharedData.js"

export interface JoinOptions {
  readonly cluster: ClusterSection
  readonly concurrency: number
  /** The boxes this daemon runs now (its supervisor's count). */
  readonly boxes: Effect.Effect<number>
  /** Its live boxes with their engine stats, for the other nodes' Now pages. */
  readonly liveBoxes: Effect.Effect<ReadonlyArray<FleetBox>>
}

export { beatEvery, CUT_OFF } from "./lease.js"

const nodeName = (cluster: ClusterSection) =>
  Effect.suspend(() => {
    const name = nodeNameOf(cluster)
    return typeof name === "string"
      ? Effect.succeed(name)
      : Effect.fail(new ConfigError({
        file: "the environment",
        problems: [{ key: "ROSTER_NODE", problem: `${name.invalid} is not a node name (letters, digits, '.', '_' or '-', up to 63)` }],
        hint: "set ROSTER_NODE to this machine's name in the fleet, or unset it to use [cluster] node or the host name"
      }))
  })

/**
 * This daemon joins its fleet for as long as the scope lives: the database brought to this
 * roster's schema, the shared folder checked (and the fleet made by its first node), the node
 * registered, then a heartbeat in the background, which also fences any node gone silent. A
 * database that stops answering is logged once and retried at every beat; the node's boxes keep
 * running meanwhile. The scope's end marks the node left.
 */
export const joinFleet = (opts: JoinOptions) =>
  Effect.gen(function*() {
    const { cluster } = opts
    const node = yield* nodeName(cluster)
    const sqlCtx = yield* Layer.build(fleetSqlLayer(cluster, { maxConnections: 10 }))
    const withSql = <A, E, R>(e: Effect.Effect<A, E, R>) => Effect.provide(e, sqlCtx)
    const started = yield* Clock.currentTimeMillis
    yield* withSql(migrate)
    yield* withSql(claimSharedData(cluster.shared_data, node, new Date(started).toISOString()))
    const key = yield* withSql(rpcKey)
    // Checked before the node is registered: a listen address a box could reach stops the start.
    const rpcAt = cluster.listen ? yield* listenAddress(cluster.listen) : undefined
    const orgConfig = yield* OrgConfig
    // Taken once: the beat and a rejoin (a method of the member, R = never) read through them.
    const fs = yield* FileSystem.FileSystem
    const fingerprintOf = configFingerprintIn(fs, yield* Paths)
    // What a beat says of the node is looked up beside it, never in its way: a beat that waited on a
    // busy engine (listing containers can take seconds under load) or on reading every config file
    // would let the node look lost. The box count is the last the engine gave within half a second;
    // the config's digest is read again every 10 s.
    // An org.toml edited into an error keeps the last digest: a bad edit is the config's problem, never a lost node.
    const lastDigest = yield* Ref.make<Readonly<Record<string, string>>>({})
    const fingerprint = yield* Effect.cachedWithTTL(
      orgConfig.snapshot.pipe(
        Effect.flatMap(fingerprintOf),
        Effect.tap((d) => Ref.set(lastDigest, d)),
        // A config that does not read now beats with the last fingerprint: what the fleet compares is never a failed read.
        Effect.orElse(() => Ref.get(lastDigest))
      ),
      "10 seconds"
    )
    const lastBoxes = yield* Ref.make(0)
    const boxes = opts.boxes.pipe(
      Effect.timeout("500 millis"),
      Effect.tap((n) => Ref.set(lastBoxes, n)),
      // An engine slow to answer gives the last count: a beat is never held up by a look that only informs.
      Effect.orElse(() => Ref.get(lastBoxes))
    )
    const instance = yield* Ref.make(newInstance())
    const beatNow = Effect.gen(function*() {
      return {
        name: node,
        instance: yield* Ref.get(instance),
        host: os.hostname(),
        pid: process.pid,
        version: VERSION,
        advertise: cluster.advertise ?? rpcAt?.at ?? null,
        startedAt: started,
        boxes: yield* boxes,
        concurrency: opts.concurrency,
        load: os.loadavg()[0] ?? 0,
        config: yield* fingerprint
      } satisfies NodeBeat
    })
    const register = (previous?: string) => Effect.gen(function*() {
      const fenced = yield* withSql(registerNode(yield* beatNow, yield* Clock.currentTimeMillis, cluster, previous)).pipe(
        // Whether a holder on this machine is still alive is read from /proc.
        Effect.provideService(FileSystem.FileSystem, fs)
      )
      if (fenced) yield* logFenced(fenced)
    })
    // Listening before the node is in the fleet: its advertised address answers from its first beat.
    const nudges = yield* makeNudge
    if (cluster.listen && rpcAt) yield* serveRunnerRpc({ listen: cluster.listen, node, key, instance: Ref.get(instance), nudgeApprovals: nudges.nudge, liveBoxes: opts.liveBoxes }, rpcAt)
    yield* Effect.acquireRelease(
      register(),
      () =>
        Ref.get(instance).pipe(
          Effect.flatMap((i) => withSql(leaveNode(node, i))),
          Effect.catchAllCause((c) => Effect.logWarning(`fleet: node ${node} could not be marked left`, c))
        )
    )
    const health = yield* Ref.make<Health>(freshHealth(yield* Clock.currentTimeMillis))
    const calls = runnerCalls(node, key, withSql(listNodes))
    const ping = yield* freshPings(calls.ping)
    yield* Effect.logInfo(`fleet: node ${node} joined (database ${whereOf(cluster)}, schema ${SCHEMA_VERSION}, shared data ${cluster.shared_data})`)
    const sweep = withSql(fenceLostNodes(cluster, node)).pipe(Effect.flatMap((fenced) => Effect.forEach(fenced, logFenced, { discard: true })))
    yield* heartbeatLoop(node, withSql, beatNow, health, sweep, cluster).pipe(Effect.repeat(Schedule.spaced(beatEvery(cluster))), Effect.forkScoped)
    const notify = Context.get(sqlCtx, FleetNotify)
    // Every node's task changes, for the supervisor's wake-ups: a lost LISTEN connection is made
    // again (the dispatch loop's own 2 s tick covers the gap).
    const changes = notify.listen(TASKS_CHANNEL).pipe(
      Stream.retry(Schedule.spaced("2 seconds")),
      Stream.catchAllCause((c) => Stream.drain(Stream.fromEffect(Effect.logWarning("fleet: the task wake-ups stopped; the queue is passed every 2 s", c))))
    )
    const rejoin = Effect.gen(function*() {
      const previous = yield* Ref.getAndSet(instance, newInstance())
      yield* register(previous)
      yield* Ref.update(health, (h) => ({ ...h, fenced: false }))
      yield* Effect.logWarning(`fleet: node ${node} joined the fleet again as a new instance; it takes work again`)
    }).pipe(Effect.catchAllCause((c) => Effect.logError(`fleet: node ${node} could not join the fleet again (tried again shortly)`, c)))
    const member: Context.Tag.Service<FleetMember> = {
      node,
      status: fleetStatus(opts, node, withSql, health, ping),
      changes,
      fenced: Ref.get(health).pipe(Effect.map((h) => h.fenced)),
      cutOff: Ref.get(health).pipe(Effect.map((h) => h.cutOff)),
      leaseInDoubt: Effect.zipWith(Ref.get(health), Clock.currentTimeMillis, (h, now) => now - h.lastOk >= cutOffAfterMs(cluster)),
      rejoin,
      ...boxRows(node, Ref.get(instance), withSql),
      nudgeApprovals: calls.nudgeApprovals,
      elsewhere: elsewhere(node, opts.cluster.node_timeout_s, withSql(listNodes), calls.boxesOf)
    }
    return { member, database: sqlCtx, instance: Ref.get(instance), nudges }
  })

const newInstance = () => crypto.randomBytes(8).toString("hex")

/** How long a box row's statement waits for the database: a session waits and tries again, a claim goes on. */
const ROW_WAIT = "3 seconds"

/** This node's side of one box per worker fleet-wide (see boxRows.ts). */
const boxRows = (node: string, instance: Effect.Effect<string>, withSql: WithSql) => ({
  takeBox: (worker: string, key: string) =>
    instance.pipe(
      Effect.flatMap((i) => withSql(takeBoxRow(worker, node, i, key))),
      answerWithin(ROW_WAIT, () => new Error(`the database did not answer within ${ROW_WAIT}`))
    ),
  // Given back in the background, tried again while the database does not answer: a row left would
  // keep the worker's tasks waiting until this instance is fenced or leaves.
  giveBox: (worker: string, key: string) =>
    withSql(giveBoxRow(worker, key)).pipe(
      answerWithin(ROW_WAIT, () => new Error(`the database did not answer within ${ROW_WAIT}`)),
      Effect.retry(Schedule.exponential("1 second").pipe(Schedule.union(Schedule.spaced("10 seconds")), Schedule.upTo("30 minutes"))),
      Effect.catchAllCause((c) => Effect.logWarning(`fleet: ${worker}'s box row (${key}) could not be given back; it goes when this node leaves or is fenced`, c)),
      Effect.forkDaemon,
      Effect.asVoid
    ),
  // A database that does not answer says no box: the claim it checks went through the same database.
  boxElsewhere: (worker: string) =>
    withSql(boxRowElsewhere(worker)).pipe(
      answerWithin(ROW_WAIT, () => new Error(`the database did not answer within ${ROW_WAIT}`)),
      Effect.catchAllCause((c) => Effect.logWarning(`fleet: whether ${worker} has a box elsewhere could not be read`, c).pipe(Effect.as(false)))
    )
})

const logFenced = (f: FencedNode) =>
  Effect.logWarning(
    `fleet: node ${f.node} is lost (silent past [cluster] node_timeout_s): its attempts are fenced` +
      (f.tasks.length === 0 ? "; it was running no task" : `; its tasks: ${f.tasks.map((t) => `${t.taskId} (${t.worker}) ${t.status}`).join(", ")}`)
  )

type WithSql = <A, E, R>(e: Effect.Effect<A, E, R>) => Effect.Effect<A, E, Exclude<R, SqlClient | FleetNotify>>

/**
 * One heartbeat, logging only the changes: the database lost (once), this node cut off (it stops
 * its boxes), back, fenced by the fleet, or its name taken over. A beat gets one interval to land:
 * a connection whose packets are dropped never answers, and the node must notice in time to stop
 * acting before its lease can expire. After a beat that landed, the sweep for silent nodes — once
 * this node has itself reached the database for a whole timeout: after an outage every node's
 * last beat is old, and the first one back must give the others the time to beat again rather
 * than declare them all lost.
 */
const heartbeatLoop = (
  node: string,
  withSql: WithSql,
  beatNow: Effect.Effect<NodeBeat>,
  health: Ref.Ref<Health>,
  sweep: Effect.Effect<void, unknown>,
  cluster: ClusterSection
) =>
  Effect.gen(function*() {
    const b = yield* beatNow
    const stoodDown = (yield* Ref.get(health)).cutOff
    const beaten = yield* withSql(beat(b, yield* Clock.currentTimeMillis, cluster, stoodDown)).pipe(
      answerWithin(beatEvery(cluster), () => new Error(`no answer within ${Duration.format(beatEvery(cluster))}`))
    )
    // A lapsed lease: the node fences its own instance first — its tasks back to the queue, every later write of
    // it refused — and only then, fenced, kills its boxes (their ends would otherwise be written as the tasks' own).
    const result = beaten === "lapsed" ? yield* fenceSelf(node, b.instance, withSql, cluster) : beaten
    if (result === "waiting") return
    const now = yield* Clock.currentTimeMillis
    const was = yield* Ref.getAndUpdate(health, (h) => afterLanded(h, result, now))
    if (was.cutOff) yield* Effect.logWarning(`fleet: the database answers again; node ${node} takes work again (its stopped tasks carry on)`)
    else if (!was.reachable) yield* Effect.logInfo(`fleet: the database answers again; node ${node} is back in the fleet`)
    if (result === "fenced" && !was.fenced) {
      yield* Effect.logError(
        `fleet: node ${node} was declared lost while it was silent and fenced by the fleet: nothing its boxes do can land, ` +
          "and its tasks went to other nodes — its boxes are killed, then it joins again"
      )
    }
    if (result === "lapsed" && !was.fenced) {
      yield* Effect.logError(
        `fleet: node ${node} was silent past its lease ([cluster] node_timeout_s = ${cluster.node_timeout_s} s by the database's clock; ` +
          "this process frozen or starved): the fleet counts it lost, so it fenced its own instance (its tasks back to the queue) — " +
          "its boxes are killed, then it joins again as a new instance"
      )
    }
    if (result === "taken") yield* Effect.logError(`fleet: node ${node}'s name was taken over by another daemon while this one was silent: stop one of them`)
    const settled = was.reachable && now - was.since >= cluster.node_timeout_s * 1000
    if (result === "ok" && settled) yield* sweep.pipe(Effect.catchAllCause((c) => Effect.logWarning("fleet: a sweep for lost nodes failed", c)))
  }).pipe(Effect.catchAllCause((cause) =>
    Effect.gen(function*() {
      const detail = cause.toString().split("\n")[0] ?? "no answer"
      const now = yield* Clock.currentTimeMillis
      const was = yield* Ref.getAndUpdate(health, (h) => afterMissed(h, detail, now, cluster))
      const is = yield* Ref.get(health)
      if (was.reachable) {
        yield* Effect.logWarning(`fleet: the database does not answer (${detail}): node ${node} retries at every heartbeat, ` +
          `and stops its boxes if none lands for ${cutOffAfterMs(cluster) / 1000} s`)
      }
      if (is.cutOff && !was.cutOff) yield* Effect.logError(`fleet: ${CUT_OFF}`)
    })
  ))

/**
 * Fences this node's own instance, its lease lapsed: "lapsed" once fenced (by it, or by another node
 * meanwhile); "waiting" while a landing of it still holds its row (the next beat tries again — that
 * landing is refused all the same, its lease being over).
 */
const fenceSelf = (node: string, instance: string, withSql: WithSql, cluster: ClusterSection) =>
  withSql(fenceNode({ name: node, instance }, cluster, node, 0)).pipe(
    Effect.flatMap((fenced) => (fenced ? logFenced(fenced) : Effect.void)),
    Effect.as("lapsed" as const),
    Effect.catchIf(isLockTimeout, () =>
      Effect.logInfo(`fleet: node ${node}'s lease lapsed, and a landing of it still holds its row: it fences itself at the next beat`).pipe(
        Effect.as("waiting" as const)
      ))
  )

/** The fleet as the database has it, each node compared with this one's config. */
const fleetStatus = (
  opts: JoinOptions,
  node: string,
  withSql: WithSql,
  health: Ref.Ref<Health>,
  ping: (row: NodeRow) => Effect.Effect<FleetNodeView["rpc"]>
): Effect.Effect<FleetStatus> =>
  Effect.gen(function*() {
    // A database whose packets are dropped never answers: the status says so rather than wait for it.
    const rows = yield* withSql(listNodes).pipe(answerWithin("3 seconds", () => new Error("no answer within 3 s")))
    const self = rows.find((r) => r.name === node)
    const h = yield* Ref.get(health)
    const nodes = yield* withPings(rows, rows.map((r) => nodeView(r, opts.cluster.node_timeout_s, node, self?.config)), ping)
    return {
      node,
      database: whereOf(opts.cluster),
      reachable: h.reachable,
      detail: h.detail,
      ...(h.cutOff ? { cut_off: CUT_OFF } : {}),
      schema: SCHEMA_VERSION,
      nodes
    }
  }).pipe(Effect.catchAllCause((cause) =>
    Ref.get(health).pipe(Effect.map((h) => ({
      node,
      database: whereOf(opts.cluster),
      reachable: false,
      detail: cause.toString().split("\n")[0] ?? "no answer",
      ...(h.cutOff ? { cut_off: CUT_OFF } : {}),
      schema: SCHEMA_VERSION,
      nodes: []
    })))
  ))

/**
 * Every other live node's boxes, each asked at once. The database not answering: none (the
 * heartbeat says the outage once; this is asked every 2 s by a Now page).
 */
const elsewhere = <E>(
  self: string,
  timeoutS: number,
  nodes: Effect.Effect<ReadonlyArray<NodeRow>, E>,
  boxesOf: (row: NodeRow) => Effect.Effect<NodeBoxes>
): Effect.Effect<ReadonlyArray<NodeBoxes>> =>
  nodes.pipe(
    Effect.map((rows) => rows.filter((r) => r.name !== self && nodeState(r, timeoutS) === "up")),
    Effect.flatMap((rows) => Effect.forEach(rows, boxesOf, { concurrency: "unbounded" })),
    Effect.catchAll((e) => Effect.logDebug("fleet: the other nodes' boxes could not be listed (the database did not answer)", e).pipe(Effect.as([])))
  )
