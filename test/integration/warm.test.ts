import Dockerode from "dockerode"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { auditedOnce } from "../support/audit.js"
import { collect, type Deployment, makeDeployment, ROSTER_BIN, talkTo, TEST_IMAGE } from "../support/deployment.js"
import { makeOutsideHost, type OutsideHost } from "../support/netns.js"
import { latestRunId } from "../support/runs.js"
import { ACT, SHOWN_LINES, SHOWN_PROMPT } from "../support/boxScripts.js"

const docker = new Dockerode()

/** CONNECT through the gateway from inside a box, with the token of its HTTP_PROXY: prints the answer. */
const CONNECT = `T=\${HTTP_PROXY#http://}; T=\${T%%:*}; P=\${HTTP_PROXY##*:}; ` +
  `A=$(printf '%s:x' "$T" | base64 | tr -d '\\n'); ` +
  `connect() { (printf 'CONNECT %s HTTP/1.1\\r\\nProxy-Authorization: Basic %s\\r\\n\\r\\n' "$1" "$A"; sleep 1) | nc -w 3 host.docker.internal "$P"; }; `

/** When a run id says its run started (its stamp, to the second). */
const stampOf = (runId: string) => Date.parse(`${runId.slice(0, 10)}T${runId.slice(11, 19).replaceAll("-", ":")}Z`)

const until = async <A>(what: string, probe: () => Promise<A | undefined> | A | undefined, ms = 30_000): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const found = await probe()
    if (found !== undefined) return found
    if (Date.now() > deadline) throw new Error(`waited ${ms / 1000} s for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

describe("warm boxes (real engine, real gateway, the scripted engine in rpc mode)", () => {
  let d: Deployment
  let outside: OutsideHost
  let deployment: string

  const boxesOf = async (kind?: string, worker?: string) =>
    (await docker.listContainers({
      all: true,
      filters: { label: [`roster.deployment=${deployment}`, ...(kind ? [`roster.kind=${kind}`] : []), ...(worker ? [`roster.worker=${worker}`] : [])] }
    })).filter((c) => c.State === "running")
  /** Alice's warm box, once the daemon has made it: its run id and container. */
  const warmBox = () =>
    until("a warm box", async () => {
      const [c] = await boxesOf("warm", "alice")
      return c ? { id: c.Id, runId: c.Labels["roster.run-id"] ?? "" } : undefined
    })
  const runDir = (runId: string) => d.file("data", "runs", "alice", runId)
  const record = (runId: string) => JSON.parse(fs.readFileSync(path.join(runDir(runId), "run.json"), "utf8"))
  const tokens = () =>
    // A token file, never the temp file one is written through (a daemon may be minting one as the test looks).
    (fs.existsSync(d.file("state", "identity")) ? fs.readdirSync(d.file("state", "identity")).filter((f) => f.endsWith(".json")) : [])
  const workerRun = (prompt: string) => collect(spawn(ROSTER_BIN, ["worker", "run", "alice", prompt], { env: d.env, stdio: ["ignore", "pipe", "pipe"] }))
  const allow = (extra = "") => `[box]\nwarm = "recent"\n${extra}\n[[allow]]\nhosts = ["198.51.100.7"]\nports = [9099]\nscope = ["org/*"]\n`
  /** org.toml rewritten, and time for the daemon to see it (it looks at most twice a second). */
  const useOrg = async (text: string) => {
    d.writeOrg(text)
    await new Promise((r) => setTimeout(r, 1_000))
  }

  // The deployment's own name for the test image, so a test can rebuild it under that name.
  const image = `roster-scripted:warm-${process.pid}`

  beforeAll(async () => {
    outside = await makeOutsideHost()
    execFileSync("docker", ["tag", TEST_IMAGE, image])
    // The runtime roster picks (gVisor, which CI registers): the warm path users get.
    d = await makeDeployment(allow(), image)
    deployment = d.file("config")
  })

  afterAll(async () => {
    await d?.stop()
    outside?.close()
    try {
      execFileSync("docker", ["rmi", image], { stdio: "ignore" })
    } catch {
      // gone already
    }
  })

  it("a run leaves its worker a warm box whose token opens nothing but its preflight report (403, audited); its preflight is in before any run takes it", async () => {
    const first = await workerRun("!exit 0")
    expect(first.code, first.stderr).toBe(0)
    const warm = await warmBox()
    expect(record(latestRunId(d.file("data", "runs", "alice"))).warm).toBe(false)
    // Made under gVisor, as the run it waits for would be.
    expect((await docker.getContainer(warm.id).inspect()).HostConfig.Runtime).toBe("runsc")
    // Its token is bound to no run, and says so.
    const held = tokens().map((f) => JSON.parse(fs.readFileSync(d.file("state", "identity", f), "utf8")))
    expect(held).toEqual([expect.objectContaining({ run_id: warm.runId, warm: true })])
    // The box reported its preflight while it waited: the gateway's decision is in its run's events already.
    await until("the warm box's preflight", () => {
      const file = path.join(runDir(warm.runId), "events.jsonl")
      return fs.existsSync(file) && fs.readFileSync(file, "utf8").includes(`"kind":"preflight","result":{"ok":true`) ? true : undefined
    })
    expect(fs.existsSync(path.join(runDir(warm.runId), "run.json"))).toBe(false)
    // The daemon's status counts it, in words as in --json.
    const status = await d.roster(["server", "status"])
    expect(status.stdout).toContain("boxes: 1 (1 warm: ready for the next run of their worker)")
    // Anything else under its token is refused: egress and box actions alike.
    const exec = await docker.getContainer(warm.id).exec({
      Cmd: ["sh", "-c", `${CONNECT}${ACT}connect 198.51.100.7:9099; echo ---; act remember '{"text":"x"}'`],
      AttachStdout: true, AttachStderr: true
    })
    const out = await new Promise<string>((resolve, reject) => {
      void exec.start({}).then((stream) => {
        let text = ""
        stream.on("data", (c: Buffer) => (text += c.toString("latin1")))
        stream.on("end", () => resolve(text))
        stream.on("error", reject)
      }, reject)
    })
    const [egress, action] = out.split("---")
    expect(egress).toContain("HTTP/1.1 403")
    expect(egress).not.toContain(outside.greeting)
    expect(action).toMatch(/HTTP\/1\.[01] 403/)
    const audited = await auditedOnce(d.file("state", "audit"), (lines) => lines.filter((l) => l.status === 403 && l.host === "198.51.100.7").length >= 1)
    expect(audited.filter((l) => l.host === "198.51.100.7" && l.status === 403)).toHaveLength(1)
  })

  it("the next worker run takes it under a run id of its own (when it started, not when the box was made): the box and its folder renamed to it, its first request served under it, the box's env names it", async () => {
    const warm = await warmBox()
    const r = await workerRun(`!${CONNECT}connect 198.51.100.7:9099; echo; echo "run=$ROSTER_RUN_ID"`)
    expect(r.code, r.stderr).toBe(0)
    const runId = latestRunId(d.file("data", "runs", "alice"))
    expect(runId).not.toBe(warm.runId)
    expect(r.stdout).toContain(`box ${runId} ended by exit (exit code 0)`)
    const rec = record(runId)
    expect(rec).toMatchObject({ run_id: runId, kind: "box", warm: true, warm_box: warm.runId, ended_by: "exit", exit_code: 0, preflight: { ok: true } })
    // Its id says when it started (ids are sortable by start), and the box's own folder is the run's now.
    expect(Date.parse(rec.started_at) - stampOf(runId)).toBeGreaterThanOrEqual(0)
    expect(Date.parse(rec.started_at) - stampOf(runId)).toBeLessThan(2_000)
    expect(stampOf(runId)).toBeGreaterThanOrEqual(stampOf(warm.runId))
    expect(fs.existsSync(runDir(warm.runId))).toBe(false)
    // Its ceiling starts at the claim, not when the box was made.
    expect(Date.parse(rec.deadline) - Date.parse(rec.started_at)).toBeGreaterThan(29 * 60_000)
    expect(Date.parse(rec.deadline) - Date.parse(rec.started_at)).toBeLessThan(31 * 60_000)
    const transcript = fs.readFileSync(path.join(runDir(runId), "stdout.jsonl"), "utf8")
    expect(transcript).toContain("HTTP/1.1 200 Connection Established")
    expect(transcript).toContain(outside.greeting)
    expect(transcript).toContain(`run=${runId}`)
    const audited = await auditedOnce(d.file("state", "audit"), (lines) => lines.some((l) => l.run_id === runId && l.status === 200))
    expect(audited.filter((l) => l.run_id === runId && l.host === "198.51.100.7").map((l) => l.status)).toEqual([200])
    // And it is gone with its run: the next warm box is another, under a new run id and token.
    const next = await warmBox()
    expect(next.runId).not.toBe(warm.runId)
    expect(tokens()).toHaveLength(1)
  })

  it("a run with its own --ceiling starts its own box (warm: false): the warm box, made for the org's ceiling, is recycled, not taken", async () => {
    // A run of alice leaves her one (when the tests before have not).
    if ((await boxesOf("warm")).length === 0) expect((await workerRun("!true")).code).toBe(0)
    const warm = await warmBox()
    const r = await collect(spawn(ROSTER_BIN, ["worker", "run", "alice", "--ceiling", "7", "!echo run=$ROSTER_RUN_ID ceiling=$ROSTER_CEILING_MIN"], { env: d.env, stdio: ["ignore", "pipe", "pipe"] }))
    expect(r.code, r.stderr).toBe(0)
    const runId = latestRunId(d.file("data", "runs", "alice"))
    expect(runId).not.toBe(warm.runId)
    expect(record(runId)).toMatchObject({ warm: false, ceiling_min: 7, exit_code: 0 })
    expect(fs.readFileSync(path.join(runDir(runId), "stdout.jsonl"), "utf8")).toContain(`run=${runId} ceiling=7`)
    // The warm box is gone with its token and folder; the next one is another.
    await until("the warm box's folder removed", () => (fs.existsSync(runDir(warm.runId)) ? undefined : true))
    expect((await warmBox()).runId).not.toBe(warm.runId)
  })

  it("two worker runs of one worker at once: one takes the warm box, the other waits (saying so) until it has ended, then runs", async () => {
    const warm = await warmBox()
    const before = new Set(fs.readdirSync(d.file("data", "runs", "alice")))
    const [one, two] = await Promise.all([workerRun("!sleep 1; echo one"), workerRun("!sleep 1; echo two")])
    expect(one.code, one.stderr).toBe(0)
    expect(two.code, two.stderr).toBe(0)
    // The runs' folders (a warm box made since has one too, with no record yet).
    const ran = fs.readdirSync(d.file("data", "runs", "alice")).filter((id) => !before.has(id) && fs.existsSync(path.join(runDir(id), "run.json")))
      .map((id) => record(id) as { run_id: string; warm: boolean; started_at: string; finished_at: string })
      .sort((a, b) => Date.parse(a.started_at) - Date.parse(b.started_at))
    expect(ran).toHaveLength(2)
    expect(ran[0]).toMatchObject({ warm: true })
    expect(fs.existsSync(runDir(warm.runId))).toBe(false)
    // Never two boxes of alice at once: the second started after the first had ended.
    expect(Date.parse(ran[1]!.started_at)).toBeGreaterThanOrEqual(Date.parse(ran[0]!.finished_at))
    const waited = [one, two].filter((r) => r.stderr.includes("alice has a box running (one box per worker): this run starts when it ends"))
    expect(waited).toHaveLength(1)
    await warmBox()
  })

  it("a warm box made before identity.md changed is recycled, not taken: the run starts its own (warm: false) and prints byte for byte what a warm run prints", async () => {
    const prompt = SHOWN_PROMPT
    const stale = await warmBox()
    const identity = d.file("config", "workers", "alice", "identity.md")
    fs.appendFileSync(identity, "\nYou keep your notes short.\n")
    const cold = await workerRun(prompt)
    const coldId = latestRunId(d.file("data", "runs", "alice"))
    expect(coldId).not.toBe(stale.runId)
    expect(record(coldId)).toMatchObject({ warm: false, exit_code: 5 })
    // The stale box is gone, its folder with it (no run ever had it).
    expect((await boxesOf()).map((c) => c.Labels["roster.run-id"])).not.toContain(stale.runId)
    await until("the stale box's folder's removal (last of its recycling)", () => (!fs.existsSync(runDir(stale.runId)) ? true : undefined), 5_000)
    await warmBox()
    const warm = await workerRun(prompt)
    const warmId = latestRunId(d.file("data", "runs", "alice"))
    expect(record(warmId)).toMatchObject({ warm: true, exit_code: 5 })
    const same = (s: string, runId: string) => s.replaceAll(runId, "RUN")
    expect(warm.code).toBe(5)
    expect(cold.code).toBe(5)
    expect(same(warm.stdout, warmId)).toBe(same(cold.stdout, coldId))
    expect(same(warm.stderr, warmId)).toBe(same(cold.stderr, coldId))
    expect(warm.stdout).toContain(SHOWN_LINES)
    expect(warm.stdout).toContain("message from alice: a note\n")
    expect(warm.stderr).toContain("to stderr")
  })

  it("a warm box made from an image since rebuilt under the same name is recycled, not taken: the run starts its own box of the new image", async () => {
    const stale = await warmBox()
    // The same name, another image: a build on top of it that changes nothing but a label.
    execFileSync("docker", ["build", "-q", "-t", image, "-"], { input: `FROM ${TEST_IMAGE}\nLABEL roster.test.rebuilt="${Date.now()}"\n`, env: { ...process.env, DOCKER_BUILDKIT: "0" } })
    const rebuilt = (await docker.getImage(image).inspect()).Id
    const run = await workerRun("!exit 0")
    expect(run.code, run.stderr).toBe(0)
    const id = latestRunId(d.file("data", "runs", "alice"))
    expect(id).not.toBe(stale.runId)
    expect(record(id).warm).toBe(false)
    expect((await boxesOf()).map((c) => c.Labels["roster.run-id"])).not.toContain(stale.runId)
    // The next warm box is of the new image.
    const fresh = await warmBox()
    expect((await docker.getContainer(fresh.id).inspect()).Image).toBe(rebuilt)
  })

  it("a queued task takes its worker's warm box: the task's run is the box's, renamed to the task's run, kind task, its token bound to the task", async () => {
    const warm = await warmBox()
    const added = await d.roster(["task", "add", "alice", `!${ACT}act remember '{"text":"from the task"}'`, "--json"])
    expect(added.code, added.stderr).toBe(0)
    const taskId = (JSON.parse(added.stdout) as { task_id: string }).task_id
    const task = await until("the task's end", async () => {
      const shown = JSON.parse((await d.roster(["task", "show", taskId, "--json"])).stdout) as { status: string; run_ids: Array<string> }
      return shown.status === "done" || shown.status === "failed" ? shown : undefined
    })
    expect(task).toMatchObject({ status: "done", run_ids: [expect.any(String)] })
    const runId = task.run_ids[0]!
    expect(runId).not.toBe(warm.runId)
    expect(record(runId)).toMatchObject({ kind: "task", task_id: taskId, warm: true, warm_box: warm.runId, ended_by: "exit", exit_code: 0 })
    expect(fs.existsSync(runDir(warm.runId))).toBe(false)
    // The gateway took the task from the bound token: the memory entry it wrote names the task's run.
    expect(fs.readFileSync(path.join(runDir(runId), "stdout.jsonl"), "utf8")).toMatch(/HTTP\/1\.[01] 200/)
    const memory = JSON.parse((await d.roster(["memory", "list", "alice", "--json"])).stdout) as Array<{ text: string; run_id?: string }>
    expect(memory.find((m) => m.text === "from the task")).toMatchObject({ run_id: runId })
  })

  it("a daemon killed -9 while a task runs in a taken warm box: the next daemon adopts the box (not reaps it), and the task ends done, once", async () => {
    const warm = await warmBox()
    const pid = (JSON.parse((await d.roster(["server", "status", "--json"])).stdout) as { pid: number }).pid
    const added = await d.roster(["task", "add", "alice", `!echo '{"type":"before"}'; sleep 6; echo '{"type":"after"}'`, "--json"])
    expect(added.code, added.stderr).toBe(0)
    const taskId = (JSON.parse(added.stdout) as { task_id: string }).task_id
    const show = async () => JSON.parse((await d.roster(["task", "show", taskId, "--json"])).stdout) as { status: string; run_ids: Array<string>; adopted?: boolean; ended_by?: string }
    const running = await until("the task in the warm box", async () => {
      const t = await show()
      return t.status === "running" && t.run_ids.length === 1 && fs.existsSync(path.join(runDir(t.run_ids[0]!), "run.json")) && record(t.run_ids[0]!).warm === true ? t : undefined
    })
    const runId = running.run_ids[0]!
    expect(record(runId).warm_box).toBe(warm.runId)
    await new Promise((r) => setTimeout(r, 500))
    process.kill(pid, "SIGKILL")
    const started = await d.roster(["server", "start"])
    expect(started.code, started.stderr).toBe(0)
    const ended = await until("the adopted task's end", async () => {
      const t = await show()
      return t.status !== "running" ? t : undefined
    }, 30_000)
    expect(ended).toMatchObject({ status: "done", ended_by: "exit", adopted: true, run_ids: [runId] })
    expect(record(runId)).toMatchObject({ ended_by: "exit", exit_code: 0, adopted: true, warm: true })
    const transcript = fs.readFileSync(path.join(runDir(runId), "stdout.jsonl"), "utf8")
    expect(transcript).toContain(`{"type":"after"}`)
    // Its box and token are gone (alice's next warm box holds its own).
    await until("its box gone", async () => ((await boxesOf()).some((c) => c.Names.some((n) => n.endsWith(runId))) ? undefined : true), 15_000)
    expect(tokens().map((f) => JSON.parse(fs.readFileSync(d.file("state", "identity", f), "utf8")).run_id)).not.toContain(runId)
    const status = JSON.parse((await d.roster(["server", "status", "--json"])).stdout) as { supervisor: { adopted: number } }
    expect(status.supervisor.adopted).toBe(1)
  })

  it("a warm box takes no [supervisor] concurrency slot: with one slot and alice's warm box waiting, a task of bob's runs at once", async () => {
    // The task's pass must see the one slot.
    await useOrg(`${allow()}[supervisor]\nconcurrency = 1\n`)
    try {
      if ((await boxesOf("warm")).length === 0) expect((await workerRun("!true")).code).toBe(0)
      const warm = await warmBox()
      if (!fs.existsSync(d.file("config", "workers", "bob"))) expect((await d.roster(["worker", "add", "bob"])).code).toBe(0)
      const added = await d.roster(["task", "add", "bob", "!echo from bob", "--json"])
      expect(added.code, added.stderr).toBe(0)
      const taskId = (JSON.parse(added.stdout) as { task_id: string }).task_id
      // Its end, or where it stood after 15 s: a slot held by the warm box would leave it queued.
      const deadline = Date.now() + 15_000
      let shown = { status: "queued", reason: null as string | null }
      while (Date.now() < deadline && (shown.status === "queued" || shown.status === "running")) {
        await new Promise((r) => setTimeout(r, 200))
        shown = JSON.parse((await d.roster(["task", "show", taskId, "--json"])).stdout) as typeof shown
      }
      expect(shown, "bob's task did not run while alice's warm box held the only slot").toMatchObject({ status: "done" })
      // Alice's box waited all along, untaken.
      expect((await boxesOf("warm")).map((c) => c.Id)).toContain(warm.id)
    } finally {
      // Bob's task left him a warm box: with room for one, alice's next run takes its place (the tests after count alice's alone).
      await useOrg(allow("warm_max = 1"))
      expect((await workerRun("!true")).code).toBe(0)
      await until("bob's warm box recycled for alice's", async () => {
        const boxes = await boxesOf("warm")
        return boxes.length === 1 && boxes[0]?.Labels["roster.worker"] === "alice" ? true : undefined
      })
      d.writeOrg(allow())
    }
  })

  it("a store restore is not refused for a warm box: the box (with the old store mounted) goes, and the next run starts its own", async () => {
    expect((await workerRun("!echo one > /pihome/store/note.txt")).code).toBe(0)
    const warm = await warmBox()
    const listed = JSON.parse((await d.roster(["store", "list", "alice", "--json"])).stdout) as Array<{ id: string }>
    expect(listed.length).toBeGreaterThan(0)
    const restored = await d.roster(["store", "restore", "alice", listed[0]?.id ?? ""])
    expect(restored.code, restored.stderr).toBe(0)
    expect((await boxesOf()).map((c) => c.Labels["roster.run-id"])).not.toContain(warm.runId)
    const next = await workerRun("!cat /pihome/store/note.txt")
    expect(next.code, next.stderr).toBe(0)
    const id = latestRunId(d.file("data", "runs", "alice"))
    expect(id).not.toBe(warm.runId)
    expect(record(id).warm).toBe(false)
    await warmBox()
  })

  it("a warm box no run takes within warm_idle_min is recycled: no box, no token, no folder", async () => {
    // The box made after this run must be made from the new one.
    await useOrg(allow("warm_idle_min = 0.05"))
    try {
      // The org changed: the warm box there is not the one this run would make, so the run starts its own; the next is made under 3 s of idle.
      expect((await workerRun("!exit 0")).code).toBe(0)
      const warm = await warmBox()
      await until("the idle warm box's recycling", async () => ((await boxesOf()).length === 0 ? true : undefined), 20_000)
      await until("its token's removal", () => (tokens().length === 0 ? true : undefined), 5_000)
      // Its folder goes last of all (after the box and the token): looked for until then.
      await until("its folder's removal", () => (!fs.existsSync(runDir(warm.runId)) ? true : undefined), 5_000)
    } finally {
      d.writeOrg(allow())
    }
  })

  it("roster talk handed to the daemon, sent SIGTERM: the CLI asks the daemon to end the session and exits 143 only once its box and token are gone and its record is finished", async () => {
    const { child: cli, printed, exited } = talkTo("alice", d.env)
    cli.stdin?.write("hello\n")
    await until("the scripted engine's answer", () => (printed().includes("alice> scripted engine") ? true : undefined), 30_000)
    const runId = latestRunId(d.file("data", "runs", "alice"))
    expect(record(runId)).toMatchObject({ kind: "session", finished_at: null })
    cli.kill("SIGTERM")
    const ended = await Promise.race([exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 30_000))])
    if (ended === undefined) cli.kill("SIGKILL")
    expect(ended, "the CLI still ran 30 s after its SIGTERM").toBeDefined()
    if (ended === undefined) return
    // Looked at the moment the CLI is gone, not waited for: the CLI's exit is the person's word that nothing is left.
    const [boxes, held] = [await boxesOf(), tokens().map((f) => JSON.parse(fs.readFileSync(d.file("state", "identity", f), "utf8")).run_id)]
    expect(ended.code, ended.stderr).toBe(143)
    expect(boxes.filter((c) => c.Labels["roster.run-id"] === runId)).toEqual([])
    expect(held).not.toContain(runId)
    expect(record(runId)).toMatchObject({ kind: "session", ended_by: "signal", finished_at: expect.any(String) })
  })

  it("a daemon killed -9 at each step of a warm box's hand-over: after its next start, the run is finished with its record, or nothing of it is left — no folder, token or box", async () => {
    const daemonPid = async () => (JSON.parse((await d.roster(["server", "status", "--json"])).stdout) as { pid: number }).pid
    const gone = (pid: number) => {
      try {
        process.kill(pid, 0)
        return undefined
      } catch {
        return true
      }
    }
    const recordOf = (runId: string) => path.join(runDir(runId), "run.json")
    /** The deployment's running warm boxes, by the run id they were made under (their label). */
    const liveWarm = async () => new Set((await boxesOf("warm")).map((c) => c.Labels["roster.run-id"] ?? ""))
    for (const step of ["warm.handOver.marked", "warm.handOver.renamed", "warm.handOver.moved", "warm.claim.recorded", "warm.claim.bound"]) {
      // A daemon that dies at `step`: stopped, then started with the failpoint set.
      expect((await d.roster(["server", "stop"])).code).toBe(0)
      const armed = await collect(spawn(ROSTER_BIN, ["server", "start"], { env: { ...d.env, ROSTER_FAILPOINT: step }, stdio: ["ignore", "pipe", "pipe"] }))
      expect(armed.code, armed.stderr).toBe(0)
      const pid = await daemonPid()
      const warm = await warmBox()
      await until(`${step}: the warm box's preflight`, () => {
        const file = path.join(runDir(warm.runId), "events.jsonl")
        return fs.existsSync(file) && fs.readFileSync(file, "utf8").includes(`"kind":"preflight","result":{"ok":true`) ? true : undefined
      })
      const before = new Set(fs.readdirSync(d.file("data", "runs", "alice")))
      const cut = await workerRun("!echo handed over")
      expect(cut.code, `${step}: ${cut.stdout}`).not.toBe(0)
      await until(`${step}: the daemon's death`, () => gone(pid))
      // The id the hand-over was for, from the mark it wrote first in the folder it moves (under either id by now).
      const handedTo = step.startsWith("warm.handOver.")
        ? [warm.runId, ...fs.readdirSync(d.file("data", "runs", "alice")).filter((f) => !before.has(f))]
          .map((f) => path.join(runDir(f), "warm-handover.json")).filter((m) => fs.existsSync(m))
          .map((m) => (JSON.parse(fs.readFileSync(m, "utf8")) as { to: string }).to)
        : []
      if (step.startsWith("warm.handOver.")) expect(handedTo, `${step}: the hand-over's mark`).toHaveLength(1)
      const started = await d.roster(["server", "start"])
      expect(started.code, started.stderr).toBe(0)
      // The run the hand-over was for, if its folder got its id.
      const fresh = () => fs.readdirSync(d.file("data", "runs", "alice")).filter((f) => !before.has(f))
      await until(`${step}: the box of the cut hand-over gone, and every folder either a record or a live warm box's`, async () => {
        const live = await liveWarm()
        if (live.has(warm.runId)) return undefined
        if ((await boxesOf()).some((c) => c.Names.some((n) => n.endsWith(warm.runId)))) return undefined
        const strays = fs.readdirSync(d.file("data", "runs", "alice")).filter((f) => !fs.existsSync(recordOf(f)) && !live.has(f))
        return strays.length === 0 ? true : undefined
      }, 30_000)
      expect(fs.existsSync(runDir(warm.runId)), step).toBe(false)
      // Either nothing of the run, or the run with its record finished.
      const runs = fresh().filter((f) => fs.existsSync(recordOf(f)))
      // Cut before the record (marked, moved): nothing; after it (the claim's steps): the run. The engine's rename ends
      // while the run goes on (its record may be in by then or not): either, never more than the one run (and never a
      // folder without its record: the strays check above).
      const allowed = step.startsWith("warm.claim.") ? [1] : step === "warm.handOver.renamed" ? [0, 1] : [0]
      expect(allowed, `${step}: ${runs.length} runs`).toContain(runs.length)
      // Whatever went by the run's id (the box, renamed or not yet) is gone with the rest; a run on the record is that one.
      if (step.startsWith("warm.handOver.")) {
        const named = async () => (await docker.listContainers({ all: true, filters: { label: [`roster.deployment=${deployment}`] } }))
          .filter((c) => c.Names.some((n) => n.endsWith(handedTo[0]!))).map((c) => `${c.Names.join(",")} ${c.State}`)
        await until(`${step}: no box by the run's id`, async () => ((await named()).length === 0 ? true : undefined), 20_000)
        expect(await named(), step).toEqual([])
        expect(runs.filter((r) => r !== handedTo[0]), step).toEqual([])
      }
      for (const run of runs) {
        await until(`${step}: the cut run finished`, () => (record(run).finished_at !== null ? true : undefined), 15_000)
        expect(record(run).ended_by, step).toBe("orphaned")
      }
      // No token of the cut box or its run (the new daemon's warm boxes hold their own).
      const cutIds = new Set([warm.runId, ...runs])
      await until(`${step}: no token of the cut hand-over`, () =>
        tokens().map((f) => JSON.parse(fs.readFileSync(d.file("state", "identity", f), "utf8")).run_id as string).some((id) => cutIds.has(id)) ? undefined : true, 15_000)
    }
  })

  it("a daemon killed with -9 leaves its warm box to the next, which removes it, its token and its folder; server stop leaves no box, token or network", async () => {
    expect((await workerRun("!exit 0")).code).toBe(0)
    const warm = await warmBox()
    const status = JSON.parse((await d.roster(["server", "status", "--json"])).stdout) as { pid: number; supervisor: { warm: number } }
    // Alice's, and bob's when the daemon's start made him one too (he ran within warm_idle_min).
    expect(status.supervisor.warm).toBeGreaterThanOrEqual(1)
    process.kill(status.pid, "SIGKILL")
    await until("the killed daemon's end", () => {
      try {
        process.kill(status.pid, 0)
        return undefined
      } catch {
        return true
      }
    })
    const started = await d.roster(["server", "start"])
    expect(started.code, started.stderr).toBe(0)
    await until("the orphaned warm box's removal", async () =>
      (await boxesOf()).some((c) => c.Labels["roster.run-id"] === warm.runId) ? undefined : true, 20_000)
    await until("its folder's removal", () => (!fs.existsSync(runDir(warm.runId)) ? true : undefined), 10_000)
    expect(tokens().map((f) => JSON.parse(fs.readFileSync(d.file("state", "identity", f), "utf8")).run_id)).not.toContain(warm.runId)
    // alice ran within [box] warm_idle_min: the new daemon makes her a warm box at its start, before any run.
    const atStart = await warmBox()
    expect(atStart.runId).not.toBe(warm.runId)
    // Then a stop: nothing of it is left, and the deployment's network is gone.
    const stopped = await d.roster(["server", "stop"])
    expect(stopped.code, stopped.stderr).toBe(0)
    expect(await boxesOf()).toEqual([])
    expect(tokens()).toEqual([])
    const networks = execFileSync("docker", ["network", "ls", "--filter", `label=roster.deployment=${deployment}`, "--format", "{{.Name}}"], { encoding: "utf8" })
    expect(networks.trim()).toBe("")
    const again = await d.roster(["server", "start"])
    expect(again.code, again.stderr).toBe(0)
  })
})
