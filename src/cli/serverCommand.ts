import { Command, Options } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import { isIP } from "node:net"
import { Console, Effect, Option, Schedule, Schema } from "effect"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { Paths, layout } from "../config/Paths.js"
import { tailOfFile } from "../fs/tail.js"
import { runDaemon } from "../daemon/daemon.js"
import { GatewayProbe } from "../contract/GatewayProbe.js"
import { type GatewayState, readGatewayState } from "../contract/gatewayState.js"
import type { FleetStatus } from "../contract/fleet.js"
import { lockHolder } from "../daemon/lock.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { pidAlive } from "../contract/owner.js"
import { socketAnswers, viaDaemon } from "../api/controlClient.js"
import { serviceUnit } from "./serviceUnit.js"

export class ServerError extends Schema.TaggedError<ServerError>()("ServerError", { detail: Schema.String }) {
  override get message() {
    return this.detail
  }
}

const json = Options.boolean("json").pipe(Options.withDescription("print JSON for scripts"))

// A daemon started by another user (root, say) answers EPERM: it is running all the same; a zombie is not.
const alive = pidAlive

/**
 * The running daemon of this deployment, if any: the process holding its lock (or, for a daemon
 * of an older roster without one, the live pid of the state file), where it listens, and whether
 * its gateway answers naming our config.
 */
const current = Effect.gen(function*() {
  const holder = yield* lockHolder
  const recorded = yield* readGatewayState
  const state = recorded && (yield* alive(recorded.pid)) && (!holder || holder.pid === recorded.pid) ? recorded : undefined
  if (!holder && !state) return undefined
  const pid = holder?.pid ?? state?.pid ?? -1
  const health = state ? yield* (yield* GatewayProbe).health(state.port) : undefined
  const paths = yield* Paths
  return { pid, state, healthy: health?.ok === true && health.config_root === paths.config }
})

/**
 * `current`, once a daemon that is neither answering nor gone has had a few seconds to do one or
 * the other: one starting up, or one just killed (`kill -9` returns before the process is gone).
 */
const settled = current.pipe(
  Effect.flatMap((c) => (c && !c.healthy ? Effect.fail(c) : Effect.succeed(c))),
  Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo("5 seconds"))),
  Effect.catchAll((c) => Effect.succeed(c))
)

const listening = (s: GatewayState) => s.addrs.map((a) => `${a}:${s.port}`).join(", ")

const start = Command.make("start", {
  foreground: Options.boolean("foreground").pipe(Options.withDescription("stay in the foreground (logs to the terminal; Ctrl-C stops)")),
  addr: Options.text("addr").pipe(
    Options.optional,
    Options.withDescription(
      "ADDR[,ADDR]: where the gateway listens (loopback is always added, for the CLI); boxes reach it at the first that is not loopback. " +
        "Default: [gateway] listen in org.toml, else the locked network's bridge address. One boxes cannot reach is refused at start with the fix"
    )
  )
}, ({ addr, foreground }) =>
  Effect.gen(function*() {
    if (Option.isSome(addr)) {
      const bad = addr.value.split(",").map((a) => a.trim()).filter((a) => isIP(a) === 0)
      if (bad.length > 0) return yield* Effect.fail(new ServerError({ detail: `--addr ${addr.value}: ${bad.join(", ")} is not an IP address (e.g. --addr 172.30.0.1)` }))
      // For this start alone (the detached daemon inherits it): org.toml's [gateway] listen is left as it is.
      process.env.ROSTER_GATEWAY_LISTEN = addr.value
    }
    if (foreground) return yield* runDaemon().pipe(Effect.scoped)
    // Validate before detaching, so a bad org.toml is reported here and not only in a log.
    yield* (yield* OrgConfig).snapshot
    const running = yield* settled
    if (running?.healthy && running.state) {
      return yield* Console.log(`roster server already running (pid ${running.pid}) on ${listening(running.state)}`)
    }
    if (running) {
      return yield* Effect.fail(new ServerError({
        detail: `a roster daemon (pid ${running.pid}) holds this deployment but its gateway does not answer yet — see ${layout(yield* Paths).gatewayLog}, or stop it: roster server stop`
      }))
    }
    const paths = yield* Paths
    const files = layout(paths)
    const fs = yield* FileSystem.FileSystem
    yield* fs.makeDirectory(paths.state, { recursive: true })
    const script = process.argv[1] ?? ""
    // The daemon's output goes to its log; this process's handle on it closes once the child has its own.
    const pid = yield* Effect.gen(function*() {
      const log = yield* fs.open(files.gatewayLog, { flag: "a", mode: 0o600 })
      const child = spawn(process.execPath, [...process.execArgv, script, "server", "start", "--foreground"], {
        detached: true,
        stdio: ["ignore", log.fd, log.fd],
        env: process.env
      })
      child.unref()
      return child.pid ?? -1
    }).pipe(Effect.scoped)
    const up = yield* Effect.gen(function*() {
      const s = yield* readGatewayState
      if (!(yield* alive(pid))) return "died" as const
      if (s?.pid !== pid) return yield* Effect.fail("starting" as const)
      const health = yield* (yield* GatewayProbe).health(s.port)
      return health?.ok ? "up" as const : yield* Effect.fail("starting" as const)
    }).pipe(
      Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo("30 seconds"))),
      // Out of tries is the answer "timeout": said just below, with the log's last lines.
      Effect.orElseSucceed(() => "timeout" as const)
    )
    if (up !== "up") {
      const tail = yield* tailOfFile(files.gatewayLog, 8)
      return yield* Effect.fail(new ServerError({
        detail: `the roster server did not come up (${up === "died" ? "it exited" : "no answer in 30 s"}). Last lines of ${files.gatewayLog}:\n${tail}`
      }))
    }
    // Started is when a CLI can use it: the control API answers a moment after the gateway (after a
    // kill -9 its socket file is the dead daemon's until the new one replaces it). A supervisor
    // slow to come up (a fleet's database) still leaves a started gateway: said, not failed.
    const control = yield* socketAnswers(files.controlSocket).pipe(
      Effect.flatMap((ok) => (ok ? Effect.void : Effect.fail("not yet" as const))),
      Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("15 seconds"))),
      Effect.as(true),
      // Not answering within 15 s is said below (the supervisor still starting), never taken for answering.
      Effect.orElseSucceed(() => false)
    )
    const s = yield* readGatewayState
    yield* Console.log(`roster server started (pid ${pid}) on ${s ? listening(s) : "?"}`)
    if (!control) yield* Console.log(`its control API (${files.controlSocket}) is not answering yet: the supervisor is still starting — see the log`)
    yield* Console.log(`log: ${files.gatewayLog}`)
  })).pipe(Command.withDescription(
    "Start the daemon: the gateway every box talks through (default :7300 on loopback and the roster-locked bridge). " +
      "Detaches and prints where its log is; --foreground stays."
  ))

const stop = Command.make("stop", {
  failRunning: Options.boolean("fail-running").pipe(Options.withDescription(
    "fail the running tasks instead of putting them back to carry on after the next start (this stop only)"
  ))
}, ({ failRunning }) =>
  Effect.gen(function*() {
    const running = yield* current
    if (!running) return yield* Console.log("roster server is not running")
    const pid = running.pid
    // Read by the stopping daemon as its runs end; the next daemon removes it as it starts.
    if (failRunning) yield* (yield* FileSystem.FileSystem).writeFileString(layout(yield* Paths).stopFailsRunning, `${pid}\n`, { mode: 0o600 })
    process.kill(pid, "SIGTERM")
    const gone = yield* alive(pid).pipe(Effect.flatMap((up) => (up ? Effect.fail("alive") : Effect.succeed(true))),
      Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("10 seconds"))),
      // Still alive after 10 s is said below, with the kill -9 that ends it.
      Effect.orElseSucceed(() => false)
    )
    if (!gone) {
      return yield* Effect.fail(new ServerError({ detail: `the roster server (pid ${pid}) did not stop in 10 s — kill it: kill -9 ${pid}` }))
    }
    yield* Console.log(`roster server stopped (pid ${pid})`)
  })).pipe(Command.withDescription(
    "Stop the daemon of this deployment. Its running tasks' boxes are stopped and the tasks go back to the queue: after the next " +
      "start each carries on as a continuation of its interrupted run ([supervisor] on_interrupt; --fail-running fails them instead)."
  ))

/** The fleet as `server status` prints it: one line a node, then what differs from this node's config. */
export const fleetLines = (f: FleetStatus): ReadonlyArray<string> => {
  const up = f.nodes.filter((n) => n.state === "up").length
  const head = `fleet: node ${f.node}, ${up} of ${f.nodes.length} node${f.nodes.length === 1 ? "" : "s"} up (database ${f.database}, schema ${f.schema})`
  if (f.cut_off !== undefined) return [head, `  ${f.cut_off}`, `  the database does not answer (${f.detail ?? "no answer"})`]
  if (!f.reachable) {
    return [head, `  the database does not answer (${f.detail ?? "no answer"}): this node retries at every heartbeat, and stops its boxes before its lease could expire`]
  }
  const width = Math.max(...f.nodes.map((n) => n.name.length), 1)
  const rows = f.nodes.map((n) =>
    `  ${n.name.padEnd(width)}  ${(n.state === "up" ? "up" : n.state.toUpperCase()).padEnd(4)}  beat ${n.heartbeat_age_s}s ago  ` +
    `${n.boxes}/${n.concurrency} boxes  load ${n.load}  clock ${n.skew_ms >= 0 ? "+" : ""}${n.skew_ms} ms` +
    `${n.name === f.node ? "  (this node)" : ""}${n.version === f.nodes.find((x) => x.name === f.node)?.version ? "" : `  version ${n.version}`}` +
    (n.fenced_by ? `  fenced by ${n.fenced_by}: its tasks went back to the queue` : "") +
    rpcPart(n)
  )
  const drift = f.nodes.filter((n) => n.config_differs.length > 0 && n.state !== "left").map((n) =>
    `  ${n.name}'s config differs from this node's: ${n.config_differs.join(", ")} — every node holds the same files (only [cluster] node and [gateway] port differ)`
  )
  return [head, ...rows, ...drift]
}

/** A node's runner RPC as this node just found it; nothing for a node without one, or not asked (not up). */
const rpcPart = (n: FleetStatus["nodes"][number]) =>
  !n.advertise || !n.rpc ? "" : n.rpc.ok ? `  rpc ${n.advertise} ${n.rpc.ms ?? 0} ms` : `  rpc ${n.advertise} NOT ANSWERING (${n.rpc.detail ?? "no answer"})`

const minutes = (s: number) => (Math.abs(s) < 90 ? `${s}s` : `${Math.round(s / 60)}m`)

const status = Command.make("status", { json }, ({ json }) =>
  Effect.gen(function*() {
    const running = yield* current
    const supervisor = running ? yield* viaDaemon((c) => c.server.status()) : Option.none()
    if (json) {
      return yield* Console.log(JSON.stringify(
        running
          ? { running: true, healthy: running.healthy, pid: running.pid, ...running.state, ...(Option.isSome(supervisor) ? { supervisor: supervisor.value } : {}) }
          : { running: false }
      ))
    }
    if (!running) return yield* Console.log("roster server is not running — start it: roster server start")
    const s = running.state
    if (!s) {
      return yield* Console.log(`roster server STARTING OR STUCK (pid ${running.pid}): it holds the deployment's lock but has no gateway yet — see ${layout(yield* Paths).gatewayLog}`)
    }
    yield* Console.log(`roster server ${running.healthy ? "running" : "NOT ANSWERING"} (pid ${s.pid}, version ${s.version})`)
    yield* Console.log(`listening: ${listening(s)}`)
    yield* Console.log(`config: ${s.config_root}`)
    if (s.log) yield* Console.log(`log: ${s.log}`)
    if (Option.isNone(supervisor)) return yield* Console.log("supervisor: not answering on its control socket — see the log")
    const v = supervisor.value
    yield* Console.log(`queue: ${Object.entries(v.queue).map(([k, n]) => `${n} ${k}`).join(", ")}`)
    if (v.held_reason) yield* Console.log(`held: ${v.held_reason}`)
    const warm = v.warm ?? 0
    yield* Console.log(`boxes: ${v.boxes.length === 0 ? "none" : v.boxes.length}${warm > 0 ? ` (${warm} warm: ready for the next run of their worker)` : ""}`)
    for (const b of v.boxes) {
      yield* Console.log(
        `  ${b.run_id}  ${b.worker}  ${b.task_id ? `task ${b.task_id}` : b.kind}  ${b.held_by}  age ${minutes(b.age_s)}` +
          (b.remaining_s === null ? "" : `  ceiling in ${minutes(b.remaining_s)}`)
      )
    }
    yield* Console.log(`since start: ${v.adopted} adopted, ${v.reaped} reaped`)
    for (const c of v.chat ?? []) {
      yield* Console.log(`chat ${c.provider} (${c.connection}): ${c.state}${c.detail ? ` — ${c.detail}` : ""}; ${c.turns} turns, ${c.ignored} ignored, ${c.limited} rate-limited`)
      for (const ch of c.channels) yield* Console.log(`  ${ch.id} → ${ch.worker}${ch.session ? `  session ${ch.session}` : ""}`)
    }
    if (v.fleet) for (const line of fleetLines(v.fleet)) yield* Console.log(line)
  })).pipe(Command.withDescription(
    "Is the daemon running and healthy; its queue (counts by status), live boxes, boxes adopted or reaped since it started, each [[chat]] listener " +
      "(connected or why not, its channels and their sessions), and under [cluster] the fleet's nodes (heartbeat, boxes, load, clock skew, config that differs, " +
      "and whether each live node's runner RPC answered just now)."
  ))

const unit = Command.make("unit", {
  user: Options.boolean("user").pipe(Options.withDescription("a user unit (~/.config/systemd/user), started with your session, not after docker.service"))
}, ({ user }) =>
  Effect.gen(function*() {
    const paths = yield* Paths
    const keep = ["ROSTER_HOME", "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "DOCKER_HOST", "PATH"]
    const env = Object.fromEntries(keep.flatMap((k) => (process.env[k] ? [[k, process.env[k] ?? ""]] : [])))
    yield* Console.log(serviceUnit({
      node: process.execPath,
      nodeArgs: process.execArgv,
      bin: path.resolve(process.argv[1] ?? "roster"),
      configRoot: paths.config,
      env,
      user
    }))
  })).pipe(Command.withDescription(
    "Print a systemd unit that runs this deployment's daemon (restart on failure, ready once the gateway answers). " +
      "Example: roster server unit --user > ~/.config/systemd/user/roster.service && systemctl --user enable --now roster"
  ))

export const serverCommand = Command.make("server").pipe(
  Command.withDescription("The roster daemon: the gateway every box talks through, the supervisor that runs queued tasks and reaps orphaned boxes, and its control API."),
  Command.withSubcommands([start, stop, status, unit])
)
