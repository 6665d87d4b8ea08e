import Dockerode from "dockerode"
import * as fs from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn } from "node:child_process"
import { controlPost } from "../support/control.js"
import { type Deployment, makeDeployment, ROSTER_BIN } from "../support/deployment.js"
import { runBoxesOf } from "../support/leftovers.js"
import { engineGate } from "../support/engineGate.js"
import { latestRunId } from "../support/runs.js"

const docker = new Dockerode()

interface Task {
  readonly task_id: string
  readonly status: string
  readonly worker: string
  readonly run_ids: ReadonlyArray<string>
  readonly started_at: string | null
  readonly finished_at: string | null
  readonly ended_by: string | null
  readonly adopted?: boolean
  readonly interrupted?: { readonly run_id: string; readonly by: string }
  readonly final_text?: string | null
  readonly continues?: { readonly task_id: string | null; readonly run_id: string | null }
}

describe("the supervisor in the real daemon, on a real Docker engine", () => {
  let d: Deployment
  /** The boxes of runs (a warm box waiting for its worker's next run is not one: a user's deployment keeps one after each run). */
  const boxesOf = () => runBoxesOf(d.file("config"))
  /** The tokens of runs (a waiting warm box's unbound token is not one). */
  const identityFiles = () =>
    // A token file, never the temp file one is written through (a daemon may be minting one as the test looks).
    (fs.existsSync(d.file("state", "identity")) ? fs.readdirSync(d.file("state", "identity")).filter((f) => f.endsWith(".json")) : []).filter((f) => {
      try {
        return (JSON.parse(fs.readFileSync(d.file("state", "identity", f), "utf8")) as { warm?: boolean }).warm !== true
      } catch {
        return true
      }
    })
  const daemonPid = () => (JSON.parse(fs.readFileSync(d.file("state", "gateway.json"), "utf8")) as { pid: number }).pid

  const roster = async (args: ReadonlyArray<string>) => {
    const r = await d.roster(args)
    expect(r.code, `roster ${args.join(" ")}: ${r.stderr}`).toBe(0)
    return r.stdout
  }
  const add = async (...args: ReadonlyArray<string>) => {
    const out = await roster(["task", "add", ...args])
    const id = /^task (t-[0-9a-f]{8}) queued$/m.exec(out)?.[1]
    expect(id, out).toBeDefined()
    return id ?? ""
  }
  const show = async (id: string) => JSON.parse(await roster(["task", "show", id, "--json"])) as Task
  /** Polls a task until `done` holds for it; the last record either way, so a miss fails an assertion. */
  const until = async (id: string, done: (t: Task) => boolean, ms = 60_000) => {
    const deadline = Date.now() + ms
    let t = await show(id)
    while (!done(t) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250))
      t = await show(id)
    }
    return t
  }
  const waitForBoxes = async (n: number, ms = 30_000) => {
    const deadline = Date.now() + ms
    let live = await boxesOf()
    while (live.length !== n && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100))
      live = await boxesOf()
    }
    return live
  }

  beforeAll(async () => {
    d = await makeDeployment("[supervisor]\nconcurrency = 1\n")
    for (const w of ["bob", "carol"]) await roster(["worker", "add", w])
  })

  afterAll(async () => {
    await d?.stop()
  })

  it("runs three tasks one at a time, in the order they were queued, each a task run", async () => {
    const ids = [await add("alice", "!sleep 1; echo first"), await add("bob", "!sleep 1; echo second"), await add("carol", "!echo third")]
    const tasks = await Promise.all(ids.map((id) => until(id, (t) => t.status === "done")))
    expect(tasks.map((t) => t.status)).toEqual(["done", "done", "done"])
    for (let i = 1; i < tasks.length; i++) {
      expect(Date.parse(tasks[i]?.started_at ?? "")).toBeGreaterThanOrEqual(Date.parse(tasks[i - 1]?.finished_at ?? ""))
    }
    const run = JSON.parse(fs.readFileSync(d.file("data", "runs", "bob", tasks[1]?.run_ids[0] ?? "", "run.json"), "utf8"))
    expect(run).toMatchObject({ kind: "task", task_id: ids[1], ended_by: "exit", exit_code: 0 })
    expect(fs.readFileSync(d.file("data", "runs", "bob", tasks[1]?.run_ids[0] ?? "", "stdout.jsonl"), "utf8")).toContain("second")
    const list = await roster(["task", "list", "--status", "done"])
    expect(list.trim().split("\n").map((l) => l.split(/\s+/)[0])).toEqual(ids)
  })

  it("roster task cancel of a running task kills its box: no container, no token, the task cancelled", async () => {
    const id = await add("alice", "!echo working; sleep 600")
    expect(await waitForBoxes(1)).toHaveLength(1)
    expect(await roster(["task", "cancel", id])).toContain(`task ${id} cancelled`)
    expect(await boxesOf()).toEqual([])
    expect(identityFiles()).toEqual([])
    expect(await show(id)).toMatchObject({ status: "cancelled", ended_by: "cancelled" })
  })

  it("after kill -9 of the daemon mid-task, the restarted daemon adopts the box and the task ends done", async () => {
    const id = await add("alice", `!echo '{"type":"before"}'; sleep 6; echo '{"type":"after"}'`)
    expect(await waitForBoxes(1)).toHaveLength(1)
    await new Promise((r) => setTimeout(r, 500))
    process.kill(daemonPid(), "SIGKILL")
    // The box outlives its dead daemon only until the next one starts.
    expect(await boxesOf()).toHaveLength(1)
    expect((await show(id)).status).toBe("running")
    await roster(["server", "start"])
    const t = await until(id, (x) => x.status !== "running")
    expect(t).toMatchObject({ status: "done", ended_by: "exit", adopted: true })
    const runDir = d.file("data", "runs", "alice", t.run_ids[0] ?? "")
    expect(JSON.parse(fs.readFileSync(`${runDir}/run.json`, "utf8"))).toMatchObject({ ended_by: "exit", exit_code: 0, adopted: true })
    // What the box printed while no daemon was attached is in its transcript all the same.
    const transcript = fs.readFileSync(`${runDir}/stdout.jsonl`, "utf8")
    expect(transcript).toContain(`{"type":"before"}`)
    expect(transcript).toContain(`{"type":"after"}`)
    expect(identityFiles()).toEqual([])
    expect(await boxesOf()).toEqual([])
    const status = JSON.parse(await roster(["server", "status", "--json"])) as { supervisor: { adopted: number } }
    expect(status.supervisor.adopted).toBe(1)
  })

  it("roster server stop, then kill -9 with the box gone (a reboot): the running task goes back to the queue and carries on after the start, once, its --after task behind it", async () => {
    // The first run marks the worker's store and hangs; the run that carries on finds the mark and ends.
    const once = (mark: string) => `!if [ -f /pihome/store/${mark} ]; then echo carried-on; else touch /pihome/store/${mark}; echo started; sleep 600; fi`
    for (const [worker, how] of [["bob", "stop"], ["carol", "restart"]] as const) {
      const id = await add(worker, once(`interrupted-${how}`))
      const behind = await add("alice", "--after", id, "!echo behind")
      const [box] = await waitForBoxes(1)
      await new Promise((r) => setTimeout(r, 500))
      if (how === "stop") await roster(["server", "stop"])
      else {
        process.kill(daemonPid(), "SIGKILL")
        await docker.getContainer(box!.Id).remove({ force: true })
      }
      if (how === "stop") {
        // The stop itself put it back: queued, interrupted, to continue its run.
        const stopped = await show(id)
        expect(stopped).toMatchObject({ status: "queued", interrupted: { run_id: stopped.run_ids[0], by: "stop" }, continues: { task_id: id, run_id: stopped.run_ids[0] } })
        expect((await show(behind)).status).toBe("queued")
      }
      await roster(["server", "start"])
      const t = await until(id, (x) => x.status === "done")
      expect(t).toMatchObject({ status: "done", interrupted: { by: how } })
      expect(t.run_ids).toHaveLength(2)
      expect(fs.readFileSync(d.file("data", "runs", worker, t.run_ids[1] ?? "", "stdout.jsonl"), "utf8")).toContain("carried-on")
      const context = JSON.parse(fs.readFileSync(d.file("data", "runs", worker, t.run_ids[1] ?? "", "context.json"), "utf8")) as { input_prompt: string }
      expect(context.input_prompt).toContain(`Your previous run of this task (${t.run_ids[0]}) was interrupted at`)
      expect(context.input_prompt).toContain(`This run continues task ${id} (run ${t.run_ids[0]})`)
      expect(await until(behind, (x) => x.status === "done")).toMatchObject({ status: "done" })
      expect(await boxesOf()).toEqual([])
    }
  })

  it("a failed model call is tried again after its backoff (1 s, real time), carrying on from the failed run; then done, each attempt on the record", async () => {
    d.writeOrg("[supervisor]\nconcurrency = 1\nretry_backoff_s = 1\n")
    try {
      const failedCall = `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"529 overloaded (stand-in)"}}`
      const answer = `{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"answered"}],"stopReason":"stop"}}`
      const id = await add("bob", "--retries", "1", `!if [ -f /pihome/store/tried ]; then echo '${answer}'; else touch /pihome/store/tried; echo '${failedCall}'; fi`)
      const t = await until(id, (x) => x.status === "done" || x.status === "failed")
      expect(t).toMatchObject({ status: "done", final_text: "answered" })
      const attempts = (t as unknown as { attempts: ReadonlyArray<{ run_id: string; reason: string | null; at: string }> }).attempts
      expect(attempts.map((a) => a.reason === null)).toEqual([false, true])
      expect(attempts[0]?.reason).toContain("529 overloaded (stand-in)")
      const run2 = JSON.parse(fs.readFileSync(d.file("data", "runs", "bob", t.run_ids[1] ?? "", "run.json"), "utf8")) as { started_at: string }
      // The second attempt waited its backoff after the first ended.
      expect(Date.parse(run2.started_at) - Date.parse(attempts[0]!.at)).toBeGreaterThanOrEqual(900)
    } finally {
      d.writeOrg("[supervisor]\nconcurrency = 1\n")
    }
  })

  it("20 adds of one key at once, 10 through the CLI and 10 through the control API: one task, every add given it", async () => {
    const key = `same-${Date.now()}`
    const viaCli = Array.from({ length: 10 }, () => d.roster(["task", "add", "carol", "--key", key, "--at", "+1h", "--json", "keyed work"]))
    const viaApi = Array.from({ length: 10 }, () => controlPost<{ task_id: string; existed?: boolean }>(d, "/tasks", { worker: "carol", prompt: "keyed work", key, at: "+1h" }))
    const cli = await Promise.all(viaCli)
    for (const r of cli) expect(r.code, r.stderr).toBe(0)
    const all = [...cli.map((r) => JSON.parse(r.stdout) as { task_id: string; existed?: boolean }), ...(await Promise.all(viaApi))]
    expect(new Set(all.map((t) => t.task_id)).size).toBe(1)
    expect(all.filter((t) => t.existed !== true)).toHaveLength(1)
    const listed = (JSON.parse(await roster(["task", "list", "--worker", "carol", "--json"])) as Array<{ task_id: string; key?: string }>).filter((t) => t.key === key)
    expect(listed.map((t) => t.task_id)).toEqual([all[0]!.task_id])
    // The human line says it was there already.
    expect(await roster(["task", "add", "carol", "--key", key, "keyed work"])).toBe(`task ${all[0]!.task_id} exists (key ${key})\n`)
    // A time out of bounds, through the daemon: refused with the bound (it was an internal error dump).
    const far = await d.roster(["task", "add", "carol", "--at", "+99999999999999d", "far off"])
    expect(far.code, far.stderr).toBe(1)
    expect(far.stderr).toContain("at most 365 days ahead")
    expect(far.stderr).not.toMatch(/RangeError|internal error/i)
    await roster(["task", "cancel", all[0]!.task_id])
  })

  it("kill -9 of a roster worker run: its box is gone and its token removed within 15 s", async () => {
    // The CLI runs the box itself (not handed to the daemon, whose run ends with the CLI's connection:
    // box.test): the box is the CLI's, so the daemon's reaper is what finds it orphaned.
    const child = spawn(ROSTER_BIN, ["worker", "run", "alice", "!sleep 600"], { env: { ...d.env, ROSTER_HANDOFF: "0" }, stdio: ["ignore", "pipe", "pipe"] })
    expect(await waitForBoxes(1)).toHaveLength(1)
    expect(identityFiles()).toHaveLength(1)
    const killed = Date.now()
    child.kill("SIGKILL")
    const gone = await waitForBoxes(0, 15_000)
    expect(gone).toEqual([])
    while (identityFiles().length > 0 && Date.now() - killed < 15_000) await new Promise((r) => setTimeout(r, 100))
    expect(identityFiles()).toEqual([])
    expect(Date.now() - killed).toBeLessThan(15_000)
    // The token goes first (a reaped run must stop being served at once); its record is finished just after.
    const recordFile = d.file("data", "runs", "alice", latestRunId(d.file("data", "runs", "alice")), "run.json")
    let record = JSON.parse(fs.readFileSync(recordFile, "utf8"))
    while (record.ended_by === null && Date.now() - killed < 15_000) {
      await new Promise((r) => setTimeout(r, 100))
      record = JSON.parse(fs.readFileSync(recordFile, "utf8"))
    }
    expect(record).toMatchObject({ kind: "box", ended_by: "orphaned" })
  })

  it("with the daemon down, roster task add still queues the task durably and says so; the next start runs it", async () => {
    await d.stop()
    const r = await d.roster(["task", "add", "bob", "!echo queued while down"])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toContain("the roster server is not running")
    const id = /^task (t-[0-9a-f]{8}) queued$/m.exec(r.stdout)?.[1] ?? ""
    expect((await show(id)).status).toBe("queued")
    await roster(["server", "start"])
    expect((await until(id, (t) => t.status === "done")).status).toBe("done")
    // The control socket is the owner's alone.
    expect(fs.statSync(d.file("state", "control.sock")).mode & 0o777).toBe(0o600)
  })

  it("a corrupt record and a traversal name in data/tasks/records: listed failed (record unreadable), shown, said once in the daemon's log, never run", async () => {
    const records = d.file("data", "tasks", "records")
    const good = JSON.parse(fs.readFileSync(`${records}/${fs.readdirSync(records).find((n) => n.endsWith(".json"))}`, "utf8"))
    fs.writeFileSync(`${records}/t-0badf00d.json`, "{ this is not json")
    fs.writeFileSync(`${records}/t-0badf00e.json`, JSON.stringify({ ...good, task_id: "t-0badf00e", status: "queued", worker: "../../../escaped" }))
    const listed = JSON.parse(await roster(["task", "list", "--json"])) as ReadonlyArray<Task & { reason: string }>
    for (const id of ["t-0badf00d", "t-0badf00e"]) {
      expect(listed.find((t) => t.task_id === id), id).toMatchObject({ status: "failed", reason: expect.stringMatching(/^record unreadable: /) })
      expect(await show(id), id).toMatchObject({ status: "failed" })
    }
    // Three dispatch passes later: said once each, nothing written for the traversal name.
    await new Promise((r) => setTimeout(r, 6_500))
    const log = fs.readFileSync(d.file("state", "gateway.log"), "utf8")
    expect(log.split("\n").filter((l) => l.includes("task t-0badf00e: record unreadable"))).toHaveLength(1)
    expect(fs.existsSync(d.file("escaped.jsonl"))).toBe(false)
    expect(fs.readdirSync(d.file("data", "tasks", "unreadable")).filter((n) => n.endsWith(".json")).sort()).toEqual(["t-0badf00d.json", "t-0badf00e.json"])
  })

  it("SIGKILL of roster worker run at each step before its box exists: the daemon finishes the run orphaned and removes its token", async () => {
    const steps: ReadonlyArray<readonly [string, RegExp]> = [
      ["the lockdown (network inspect)", /^GET \S*\/networks\//],
      ["the image (inspect)", /^GET \S*\/images\/\S+\/json/],
      ["the container create (token minted)", /^POST \S*\/containers\/create/]
    ]
    for (const [step, hold] of steps) {
      const before = new Set(fs.existsSync(d.file("data", "runs", "alice")) ? fs.readdirSync(d.file("data", "runs", "alice")) : [])
      const gate = await engineGate(hold)
      try {
        const child = spawn(ROSTER_BIN, ["worker", "run", "alice", "!echo never"], { env: { ...d.env, DOCKER_HOST: gate.dockerHost }, stdio: "ignore" })
        const exited = new Promise((r) => child.once("exit", r))
        await Promise.race([gate.held, exited.then(() => { throw new Error(`${step}: the run ended before it reached the step`) })])
        // The run's folder has its record; a warm box made meanwhile has a folder without one.
        const runId = [...fs.readdirSync(d.file("data", "runs", "alice"))].find((id) => !before.has(id) && fs.existsSync(d.file("data", "runs", "alice", id, "run.json"))) ?? ""
        expect(runId, step).toMatch(/^\d{4}-/)
        child.kill("SIGKILL")
        await exited
        const recordFile = d.file("data", "runs", "alice", runId, "run.json")
        expect(JSON.parse(fs.readFileSync(recordFile, "utf8")).finished_at, `${step}: left unfinished by the kill`).toBeNull()
        const deadline = Date.now() + 15_000
        let record = JSON.parse(fs.readFileSync(recordFile, "utf8"))
        const tokensOf = () => identityFiles().filter((f) => fs.readFileSync(d.file("state", "identity", f), "utf8").includes(runId))
        while ((record.finished_at === null || tokensOf().length > 0) && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 200))
          record = JSON.parse(fs.readFileSync(recordFile, "utf8"))
        }
        expect(record, step).toMatchObject({ ended_by: "orphaned", error: expect.stringContaining("died before the run's box was started") })
        expect(tokensOf(), step).toEqual([])
        expect((await docker.listContainers({ all: true, filters: { label: [`roster.run-id=${runId}`] } })), step).toEqual([])
      } finally {
        gate.close()
      }
    }
  })
})
