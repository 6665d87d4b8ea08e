// `roster worker run` of an engine that exits at once, against a bare `docker run --rm` of the same
// image with the same hardening, alternating; and the CLI's peak memory during the run. Under runc
// (the rows kept comparable with earlier runs) and under gVisor (runsc), each against docker run
// of its own runtime. Needs the
// Docker engine (scripts/ensure-host.sh); builds the scripted-engine image it runs.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, it } from "vitest"
import { freePort } from "../test/support/deployment.js"
import { binFlags, CA_BUNDLE, dropUnfloored, officialNode, unflooredBin } from "./otherNode.mjs"
import { boxMemoryMiB, emit, percentile, quick, smoke, warmBoxes } from "./support.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const bin = path.join(root, "bin/roster.js")
const IMAGE = "roster-scripted:bench"

/** Wall time and peak RSS (GNU time) of one command. */
const measure = (cmd: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv) => {
  const t = process.hrtime.bigint()
  const r = spawnSync("/usr/bin/time", ["-f", "%M", cmd, ...args], { env, encoding: "utf8" })
  const ms = Number(process.hrtime.bigint() - t) / 1e6
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}: ${r.stderr}`)
  const kb = Number(r.stderr.trim().split("\n").at(-1))
  return { ms, rssMb: kb / 1024 }
}

describe("a run", () => {
  let env: NodeJS.ProcessEnv
  let network = ""
  let orgToml = ""
  /** org.toml with `[box] runtime` and `warm` set: the next run reads it. The cold rows keep warm boxes off. */
  const useRuntime = (runtime: "runc" | "runsc", warm: "off" | "recent" = "off") =>
    fs.writeFileSync(path.join(env.ROSTER_HOME ?? "", "config", "org.toml"), `${orgToml}[box]\nruntime = "${runtime}"\nwarm = "${warm}"\n`)
  /**
   * The deployment's warm box once the daemon has it ready (the premise of a warm run: made before it is
   * asked for): its preflight is in (a box taken sooner waits for the rest of it).
   */
  const warmBoxReady = () => {
    const until = Date.now() + 30_000
    for (;;) {
      const [box] = warmBoxes(path.join(env.ROSTER_HOME ?? "", "config"))
      const events = box ? path.join(env.ROSTER_HOME ?? "", "data", "runs", "alice", box.runId, "events.jsonl") : ""
      if (box && fs.existsSync(events) && fs.readFileSync(events, "utf8").includes(`"preflight"`)) return box.id
      if (Date.now() > until) throw new Error("no warm box was made in 30 s (see state/gateway.log)")
      spawnSync("sleep", ["0.1"])
    }
  }

  beforeAll(async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "roster-bench-run-"))
    // A stand-in key: the scripted engine calls no model, but a run needs a credential to shape its sentinels.
    env = { ...process.env, ROSTER_HOME: home, HOME: home, ANTHROPIC_API_KEY: "sk-ant-bench-not-real" }
    const build = spawnSync(bin, ["box", "build-scripted", "--tag", IMAGE], { env, encoding: "utf8" })
    if (build.status !== 0) throw new Error(`the scripted image could not be built (is Docker running? scripts/ensure-host.sh): ${build.stderr}`)
    spawnSync(bin, ["init"], { env })
    orgToml = `[engine]\nimage = "${IMAGE}"\n[gateway]\nport = ${await freePort()}\n`
    useRuntime("runc")
    const started = spawnSync(bin, ["server", "start"], { env, encoding: "utf8" })
    if (started.status !== 0) throw new Error(`the daemon did not start: ${started.stderr}`)
    // The same network a run's box joins, so the baseline pays the same attachment.
    spawnSync(bin, ["worker", "run", "alice", "!true"], { env })
    network = spawnSync("docker", ["network", "ls", "--format", "{{.Name}}", "--filter", "name=roster-locked-"], { encoding: "utf8" }).stdout.trim().split("\n")[0] ?? "none"
  }, 300_000)

  afterAll(() => {
    spawnSync(bin, ["server", "stop"], { env })
  })

  /** n alternating runs of roster and of docker run, both under `runtime`: their times and peak RSS. */
  const alternate = (runtime: "runc" | "runsc", n: number, warm: "off" | "recent" = "off") => {
    useRuntime(runtime, warm)
    // The first run under new settings starts its own box (a warm one made before was made from others).
    if (warm === "recent") spawnSync(bin, ["worker", "run", "alice", "!true"], { env })
    const roster: Array<number> = []
    const docker: Array<number> = []
    const rss: Array<number> = []
    const dockerRss: Array<number> = []
    for (let i = 0; i < n; i++) {
      if (warm === "recent") warmBoxReady()
      const r = measure(bin, ["worker", "run", "alice", "!true"], env)
      roster.push(r.ms)
      rss.push(r.rssMb)
      const d = measure("docker", [
        "run", "--rm", "--runtime", runtime, "--network", network, "--dns", "127.0.0.1", "--user", "65532:65532", "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges", "--pids-limit", "512", "--memory", "4g", "--tmpfs", "/tmp:rw,nosuid,nodev,size=1g,mode=1777",
        "--entrypoint", "/bin/true", IMAGE
      ], env)
      docker.push(d.ms)
      dockerRss.push(d.rssMb)
    }
    return { roster, docker, rss, dockerRss }
  }

  /** Warm runs under `runtime` against docker run of it: their p50 at most half of docker run's (the cold p50 beside it). */
  const warmRow = (runtime: "runc" | "runsc", n: number, coldP50: number, metric: string, goal: string) => {
    const warm = alternate(runtime, n, "recent")
    const p50 = percentile(warm.roster, 50)
    const base = percentile(warm.docker, 50)
    emit({
      metric, roster: p50, baseline: base, unit: "ms", compare: "ratio", goal, pass: p50 / base <= 0.5,
      spread: `min ${Math.min(...warm.roster).toFixed(0)} max ${Math.max(...warm.roster).toFixed(0)}, n=${n}; cold ${coldP50.toFixed(0)} ms`
    })
  }

  /**
   * The Node under the CLI of a warm run (handed over to the daemon, which runs on this Node either way):
   * Node 20 (a copy of bin/roster.js without its floor) against this Node, with NODE_EXTRA_CA_CERTS set as
   * many company machines set it, and this Node with it set against unset. Alternating, runc.
   */
  const cliNodeRows = (n: number) => {
    useRuntime("runc", "recent")
    spawnSync(bin, ["worker", "run", "alice", "!true"], { env })
    const flags = binFlags(root)
    const lifted = unflooredBin(root)
    const ways = {
      old: [officialNode("20.20.2"), [...flags, lifted]],
      now: [process.execPath, [...flags, bin]]
    } as const
    const ca = { ...env, NODE_EXTRA_CA_CERTS: CA_BUNDLE }
    const times = { oldCa: [] as Array<number>, nowCa: [] as Array<number>, now: [] as Array<number> }
    for (let i = 0; i < n; i++) {
      for (const [key, [node, args], e] of [["oldCa", ways.old, ca], ["nowCa", ways.now, ca], ["now", ways.now, env]] as const) {
        warmBoxReady()
        times[key].push(measure(node, [...args, "worker", "run", "alice", "!true"], e).ms)
      }
    }
    dropUnfloored(lifted)
    const row = (metric: string, xs: Array<number>, base: Array<number>) =>
      emit({
        metric, roster: percentile(xs, 50), baseline: percentile(base, 50), unit: "ms", compare: "ratio", goal: "reported", pass: true,
        reported: true, spread: `min ${Math.min(...xs).toFixed(0)} max ${Math.max(...xs).toFixed(0)}, n=${n}`
      })
    row(`warm worker run, the CLI on Node 20.20.2 against ${process.version}, NODE_EXTRA_CA_CERTS set`, times.oldCa, times.nowCa)
    row(`warm worker run on ${process.version}: NODE_EXTRA_CA_CERTS set against unset`, times.nowCa, times.now)
  }

  it("worker run of an engine that exits at once, against docker run --rm with the same hardening", () => {
    const n = smoke ? 1 : quick ? 3 : 9
    const { docker, roster, rss, dockerRss } = alternate("runc", n)
    const p50 = percentile(roster, 50)
    const base = percentile(docker, 50)
    emit({
      metric: "worker run, engine exits at once", roster: p50, baseline: base, unit: "ms", compare: "ratio", goal: "<= 1.5x docker run",
      pass: p50 / base <= 1.5, spread: `min ${Math.min(...roster).toFixed(0)} max ${Math.max(...roster).toFixed(0)}, n=${n}`
    })
    emit({
      metric: "CLI peak RSS during a run", roster: Math.max(...rss), baseline: Math.max(...dockerRss), unit: "MB", compare: "absolute",
      goal: "<= 100 MB", pass: Math.max(...rss) <= 100
    })
    warmRow("runc", n, p50, "worker run with a warm box, engine exits at once", "<= 0.5x docker run")
    // What one warm box of this engine holds while it waits (the engine's own count); real pi's is firstRequest.bench's row.
    const mib = boxMemoryMiB(warmBoxReady())
    emit({
      metric: "memory one warm box holds while it waits (scripted engine)", roster: mib, baseline: mib, unit: "MB", compare: "absolute",
      goal: "reported (warm_max multiplies it)", pass: Number.isFinite(mib)
    })
    cliNodeRows(n)
    useRuntime("runc")
    if (smoke) return
    const gvisor = alternate("runsc", n)
    const gp50 = percentile(gvisor.roster, 50)
    const gbase = percentile(gvisor.docker, 50)
    emit({
      metric: "worker run under gVisor (runsc), engine exits at once", roster: gp50, baseline: gbase, unit: "ms", compare: "ratio",
      goal: "<= 1.5x docker run --runtime runsc", pass: gp50 / gbase <= 1.5,
      spread: `min ${Math.min(...gvisor.roster).toFixed(0)} max ${Math.max(...gvisor.roster).toFixed(0)}, n=${n}; runsc costs ${(gp50 - p50).toFixed(0)} ms over runc`
    })
    warmRow("runsc", n, gp50, "worker run under gVisor with a warm box, engine exits at once", "<= 0.5x docker run --runtime runsc")
  }, 600_000)
})
