import Dockerode from "dockerode"
import { Effect, Exit, Scope } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as http from "node:http"
import { REHEARSAL_FOLLOW_UP, REHEARSAL_FOLLOW_UP_ASK, REHEARSAL_MESSAGE, REHEARSAL_REMEMBER_ASK, REHEARSAL_TERM_SEND_ASK, REHEARSAL_TERM_SENT } from "../../src/rehearsal/script.js"
import { type Received, serveRehearsal } from "../../src/rehearsal/server.js"
import { latestRunId } from "../support/runs.js"
import { collect, type Deployment, HOST_KEY, makeDeployment, ROSTER_BIN, talkTo } from "../support/deployment.js"
import { expectOnlyWarm, leftovers, runBoxesOf } from "../support/leftovers.js"

const PI_IMAGE = "roster-box:test"
const TEST_KEY = "sk-ant-e2e-REAL-vault-key-5a4b3c2d1e"
const checkout = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const docker = new Dockerode()
/** The deployment under test's config folder (its boxes' label: never another suite's on the same engine). */
let deploymentConfig = ""
/** The boxes of runs (a waiting warm box is not one: a user's deployment keeps one for each worker's next run). */
const boxes = () => runBoxesOf(deploymentConfig)

const lastRun = (d: Deployment) => {
  const dir = d.file("data", "runs", "alice")
  const id = latestRunId(dir)
  const runDir = path.join(dir, id)
  return {
    dir: runDir,
    record: JSON.parse(fs.readFileSync(path.join(runDir, "run.json"), "utf8")),
    events: fs.readFileSync(path.join(runDir, "stdout.jsonl"), "utf8").split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l))
  }
}

const allText = (dir: string) =>
  (fs.readdirSync(dir, { recursive: true }) as Array<string>).map((f) => path.join(dir, f))
    .filter((f) => fs.statSync(f).isFile()).map((f) => fs.readFileSync(f, "utf8")).join("\n")

describe("real pi in a real box, through the real gateway, against the rehearsal model", () => {
  let d: Deployment
  let scope: Scope.CloseableScope
  let model: { port: number; received: Array<Received> }
  let failing: { port: number; received: Array<Received> }
  let slow: { port: number; received: Array<Received> }

  const org = (upstreamPort: number, extra = "") => [
    "[[grant]]", `name = "anthropic"`, `hosts = ["api.anthropic.com"]`, `scope = ["org/*"]`, `credential = "anthropic"`,
    "[[route]]", `host = "api.anthropic.com"`, `upstream = "http://127.0.0.1:${upstreamPort}"`, extra
  ].join("\n")

  beforeAll(async () => {
    scope = Effect.runSync(Scope.make())
    // A little thinking time keeps each box alive long enough to be inspected while it runs.
    model = await Effect.runPromise(serveRehearsal({ port: 0, delayMs: 800 }).pipe(Scope.extend(scope)))
    failing = await Effect.runPromise(serveRehearsal({ port: 0, failWith: 500 }).pipe(Scope.extend(scope)))
    slow = await Effect.runPromise(serveRehearsal({ port: 0, delayMs: 60_000 }).pipe(Scope.extend(scope)))
    d = await makeDeployment(org(model.port), PI_IMAGE)
    deploymentConfig = d.file("config")
    fs.writeFileSync(d.file("config", "workers", "alice", "worker.toml"), `model = "anthropic/claude-sonnet-4-5"\n`)
    const added = await collect(spawn(ROSTER_BIN, ["connection", "add", "anthropic", "--from-env", "E2E_KEY"], {
      env: { ...d.env, E2E_KEY: TEST_KEY }, stdio: ["ignore", "pipe", "pipe"]
    }))
    expect(added.code, added.stderr).toBe(0)
  })

  afterAll(async () => {
    await d?.stop()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  const runAndInspect = async (prompt: string) => {
    const child = d.spawn(["worker", "run", "alice", prompt])
    const done = collect(child)
    let inspected = ""
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline && inspected === "") {
      const running = await boxes()
      if (running[0]) {
        const info = await docker.getContainer(running[0].Id).inspect().catch(() => undefined)
        if (info) inspected = JSON.stringify(info)
      }
      await new Promise((r) => setTimeout(r, 50))
    }
    return { result: await done, inspected }
  }

  const expectWholePath = async () => {
    model.received.length = 0
    const { inspected, result } = await runAndInspect("What system is your box running?")
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain(`message from alice: ${REHEARSAL_MESSAGE}`)
    expect(result.stdout).toMatch(/ended by exit \(exit code 0\)/)
    const run = lastRun(d)
    expect(run.record).toMatchObject({ ended_by: "exit", exit_code: 0, error: null, stop_reason: "stop", messages: [REHEARSAL_MESSAGE] })
    // pi's bash tool ran in the box: the output is the box's, as its unprivileged user.
    const call = run.events.find((e) => e.type === "tool_execution_start" && e.toolName === "bash")
    expect(call?.args?.command).toContain("/etc/os-release")
    const output = run.events.find((e) => e.type === "tool_execution_end" && e.toolName === "bash")
    const text = JSON.stringify(output?.result)
    expect(text).toContain("PRETTY_NAME=")
    expect(text).toMatch(/box: uid=65532 host=[0-9a-f]{12}/)
    expect(run.record.final_text).toContain("uid=65532")
    expect(text).toContain("direct egress: refused")
    expect(text).not.toContain("CONNECTED")
    // The model got the real key, injected in transit; the box never had it.
    const calls = model.received.filter((r) => r.path.startsWith("/v1/messages"))
    expect(calls.length).toBeGreaterThanOrEqual(3)
    expect(calls.every((r) => r.apiKey === TEST_KEY)).toBe(true)
    expect(inspected).toContain("roster-box-")
    expect(inspected).not.toContain(TEST_KEY)
    expect(inspected).not.toContain(HOST_KEY)
    const files = allText(run.dir)
    expect(files).not.toContain(TEST_KEY)
    expect(files).not.toContain(HOST_KEY)
    expect(files).toContain("roster-sentinel-no-real-credential-in-box")
    // Every model call was audited as injected, and the message_user call as an action of this run.
    const show = await d.roster(["runs", "show", run.record.run_id, "--json"])
    const requests = JSON.parse(show.stdout).gateway_requests as Array<{ path: string; injected: boolean; status: number }>
    expect(requests.filter((r) => r.path === "/v1/messages").every((r) => r.injected && r.status === 200)).toBe(true)
    expect(requests.some((r) => r.path === "/v1/actions/message_user" && r.status === 200)).toBe(true)
    await expectOnlyWarm(d)
    return inspected
  }

  it("roster box check reports the image's Node and pi", async () => {
    const r = await d.roster(["box", "check", "--tag", PI_IMAGE])
    expect(r.code, r.stderr).toBe(0)
    // The runtime roster picks where the engine has gVisor registered (CI registers it).
    expect(r.stdout).toMatch(/node v24\.\d+\.\d+, pi 1\.6\.\d+ \(label 1\.6\.\d+\), \/tmp writable, runtime runsc \(gVisor\)$/m)
  })

  it("runs pi to exit 0 under gVisor (the runtime roster picks): a bash tool call in the box, message_user, the real key only in transit", async () => {
    const inspected = await expectWholePath()
    expect(inspected).toContain("/opt/roster/engine/run-pi")
    expect(JSON.parse(inspected).HostConfig.Runtime).toBe("runsc")
    expect(lastRun(d).record.runtime).toBe("runsc")
  })

  // runc pinned: the one runtime comparison of this suite (the host's kernel, [box] runtime = "runc").
  it("under runc (pinned): box check and the same whole path, the key only in transit", async () => {
    d.writeOrg(org(model.port), undefined, "runc")
    try {
      const check = await d.roster(["box", "check", "--tag", PI_IMAGE])
      expect(check.code, check.stderr).toBe(0)
      expect(check.stdout).toMatch(/node v24\.\d+\.\d+, pi 1\.6\.\d+ .*, \/tmp writable, runtime runc$/m)
      const inspected = await expectWholePath()
      expect(JSON.parse(inspected).HostConfig.Runtime).toBe("runc")
      expect(lastRun(d).record.runtime).toBe("runc")
    } finally {
      d.writeOrg(org(model.port))
    }
  })

  it("a queued task runs pi unattended; its set_tasks call queues a follow-up the daemon then runs too", async () => {
    const task = async (id: string) => JSON.parse((await d.roster(["task", "show", id, "--json"])).stdout) as Record<string, unknown>
    const until = async (id: string) => {
      const deadline = Date.now() + 120_000
      let t = await task(id)
      while (["queued", "running"].includes(String(t.status)) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 500))
        t = await task(id)
      }
      return t
    }
    const added = await d.roster(["task", "add", "alice", `look at your box, then ${REHEARSAL_FOLLOW_UP_ASK}`])
    expect(added.code, added.stderr).toBe(0)
    const id = /^task (t-[0-9a-f]{8}) queued$/m.exec(added.stdout)?.[1] ?? ""
    const first = await until(id)
    expect(first).toMatchObject({ status: "done", ended_by: "exit", exit_code: 0 })
    const followUps = first.queued_tasks as Array<string>
    expect(followUps).toHaveLength(1)
    const runId = (first.run_ids as Array<string>)[0] ?? ""
    const run = JSON.parse(fs.readFileSync(d.file("data", "runs", "alice", runId, "run.json"), "utf8"))
    expect(run).toMatchObject({ kind: "task", task_id: id, queued_tasks: followUps })
    expect(run.final_text).toContain(`task=${id}`)
    const next = await until(followUps[0] ?? "")
    expect(next).toMatchObject({ status: "done", prompt: REHEARSAL_FOLLOW_UP, origin: { by: "self", run_id: runId, task_id: id } })
    await expectOnlyWarm(d)
  })

  it("a model error ends as a failed run with the error recorded, not as success", async () => {
    d.writeOrg(org(failing.port))
    try {
      const r = await d.roster(["worker", "run", "alice", "hello"])
      expect(r.code).toBe(1)
      expect(r.stderr).toContain("the model call failed")
      const run = lastRun(d)
      expect(run.record.ended_by).toBe("exit")
      expect(run.record.exit_code).toBe(0)
      expect(run.record.stop_reason).toBe("error")
      expect(run.record.error).toContain("the model call failed")
      expect(failing.received.every((x) => x.apiKey === TEST_KEY)).toBe(true)
    } finally {
      d.writeOrg(org(model.port))
    }
  })

  it("a spend budget stops real pi: crossed mid-answer, then refused before the next call starts; no retry, the box gone", async () => {
    expect((await d.roster(["worker", "add", "bea"])).code).toBe(0)
    // The rehearsal's first answer (a bash tool call) costs about $0.001 at Sonnet prices: well over this.
    fs.writeFileSync(d.file("config", "workers", "bea", "worker.toml"), `model = "anthropic/claude-sonnet-4-5"\n[budget]\nworker_daily_usd = 0.0001\n`)
    const runOf = (r: { stdout: string }) => {
      const id = /box (\S+) ended by/.exec(r.stdout)?.[1] ?? ""
      const dir = d.file("data", "runs", "bea", id)
      return {
        id,
        record: JSON.parse(fs.readFileSync(path.join(dir, "run.json"), "utf8")),
        events: fs.readFileSync(path.join(dir, "stdout.jsonl"), "utf8").split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l))
      }
    }
    const modelCalls = async (runId: string) =>
      (JSON.parse((await d.roster(["runs", "show", runId, "--json"])).stdout).gateway_requests as Array<{ path: string; status: number }>)
        .filter((r) => r.path === "/v1/messages")

    const during = await d.roster(["worker", "run", "bea", "What system is your box running?"])
    expect(during.code, during.stderr).toBe(3)
    expect(during.stdout).toContain("ended by budget")
    const first = runOf(during)
    expect(first.record).toMatchObject({ ended_by: "budget", stopped: { by: "budget" } })
    expect(first.record.error).toContain("out of budget: worker_daily_usd")
    expect(first.record.usage.answers).toBe(1)
    expect(first.record.tainted).toContainEqual(expect.objectContaining({ reason: "budget" }))
    // pi saw the cut answer's error, did not retry it, and ran no tool of the cut answer.
    const ended = first.events.filter((e) => e.type === "message_end" && e.message?.role === "assistant")
    expect(ended.at(-1)?.message?.errorMessage).toContain("out of budget")
    expect(first.events.some((e) => e.type === "auto_retry_start")).toBe(false)
    expect(first.events.some((e) => e.type === "tool_execution_start")).toBe(false)
    expect(await modelCalls(first.id)).toEqual([expect.objectContaining({ status: 200 })])

    const before = await d.roster(["worker", "run", "bea", "What system is your box running?"])
    expect(before.code, before.stderr).toBe(3)
    const second = runOf(before)
    expect(second.record).toMatchObject({ ended_by: "budget" })
    expect(second.record.usage).toBeUndefined()
    expect(await modelCalls(second.id)).toEqual([expect.objectContaining({ status: 402 })])
    expect(second.events.some((e) => e.type === "auto_retry_start")).toBe(false)
    const usage = JSON.parse((await d.roster(["usage", "--worker", "bea", "--json"])).stdout)
    expect(usage.workers.bea).toMatchObject({ runs: 1, answers: 1 })
    await expectOnlyWarm(d)
  }, 120_000)

  /** `roster talk alice` in a tmux terminal of its own: keys in, the screen out. */
  const terminal = () => {
    const session = `roster-talk-${process.pid}-${Date.now()}`
    const tmux = (...args: Array<string>) => execFileSync("tmux", args, { encoding: "utf8" })
    const screen = () => tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", session)
    /** Waits until the screen shows `text` at least `times` times. */
    const waitFor = async (text: string, ms = 90_000, times = 1) => {
      const deadline = Date.now() + ms
      while (Date.now() < deadline) {
        if (screen().split(text).length - 1 >= times) return
        await new Promise((r) => setTimeout(r, 200))
      }
      throw new Error(`the terminal never showed ${JSON.stringify(text)}${times > 1 ? ` ${times} times` : ""}:\n${screen()}`)
    }
    const env = Object.entries({ ROSTER_HOME: d.env.ROSTER_HOME, HOME: d.env.HOME, ANTHROPIC_API_KEY: HOST_KEY })
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(" ")
    tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "50", `env ${env} ${ROSTER_BIN} talk alice; echo "EXIT=$?"; sleep 120`)
    return { tmux, screen, waitFor, session, close: () => tmux("kill-session", "-t", session) }
  }

  it("roster talk in a terminal: two turns, the second remembering the first; Ctrl-D ends it; no box remains", async () => {
    const { close, screen, session, tmux, waitFor } = terminal()
    try {
      await waitFor("you> ")
      tmux("send-keys", "-t", session, "What system is your box running?", "Enter")
      await waitFor("alice> Rehearsal answer: I looked at my box")
      tmux("send-keys", "-t", session, "What did I ask first?", "Enter")
      await waitFor('earlier in this conversation you said "What system is your box running?"')
      tmux("send-keys", "-t", session, "C-d")
      await waitFor("EXIT=0")
      expect(screen()).toContain("ended: closed")
    } finally {
      close()
    }
    const run = lastRun(d)
    expect(run.record).toMatchObject({ kind: "session", ended_by: "closed", exit_code: 0 })
    // The session was the daemon's (handed over, as `worker run` is): the terminal only kept the conversation.
    expect(run.record.owner?.pid).toBe(JSON.parse((await d.roster(["server", "status", "--json"])).stdout).pid)
    expect(fs.readFileSync(path.join(run.dir, "turns.jsonl"), "utf8").trim().split("\n")).toHaveLength(2)
    await expectOnlyWarm(d)
  })

  it("roster talk: term_send is the worker's word to its person — printed as `alice: …` before the turn's answer, kept with the run's messages; a one-shot run has no such tool", async () => {
    const { close, screen, session, tmux, waitFor } = terminal()
    try {
      await waitFor("you> ")
      tmux("send-keys", "-t", session, `Please ${REHEARSAL_TERM_SEND_ASK}, then look at your box.`, "Enter")
      await waitFor("alice> Rehearsal answer: I looked at my box")
      const shown = screen()
      expect(shown).toContain(`alice: ${REHEARSAL_TERM_SENT}`)
      expect(shown.indexOf(`alice: ${REHEARSAL_TERM_SENT}`)).toBeLessThan(shown.indexOf("alice> Rehearsal answer"))
      tmux("send-keys", "-t", session, "C-d")
      await waitFor("EXIT=0")
    } finally {
      close()
    }
    const run = lastRun(d)
    const kept = fs.readFileSync(path.join(run.dir, "messages.jsonl"), "utf8")
    expect(kept).toContain(REHEARSAL_TERM_SENT)
    // A one-shot run has no terminal: the tool is not in its box.
    const oneShot = await d.roster(["worker", "run", "alice", `Please ${REHEARSAL_TERM_SEND_ASK}.`])
    expect(oneShot.code, oneShot.stderr).toBe(0)
    expect(oneShot.stdout).not.toContain(REHEARSAL_TERM_SENT)
  }, 120_000)

  it("--reply-to talk:<run-id>: a task's answer arrives in a live roster talk as a turn of its own, once", async () => {
    expect((await d.roster(["worker", "add", "dora"])).code).toBe(0)
    fs.writeFileSync(d.file("config", "workers", "dora", "worker.toml"), `model = "anthropic/claude-sonnet-4-5"\n`)
    const { close, screen, session, tmux, waitFor } = terminal()
    try {
      await waitFor("you> ")
      tmux("send-keys", "-t", session, "Wait for dora's answer.", "Enter")
      await waitFor("alice> Rehearsal answer: I looked at my box")
      const talkRun = latestRunId(d.file("data", "runs", "alice"))
      const r = await d.roster(["task", "add", "dora", "--reply-to", `talk:${talkRun}`, "What system is your box running?"])
      expect(r.code, r.stderr).toBe(0)
      const id = /^task (t-[0-9a-f]{8}) queued$/m.exec(r.stdout)?.[1] ?? ""
      await waitFor(`task ${id} (dora, done) answered: delivered here as a message`, 120_000)
      await waitFor(`Now you say "[the answer of task ${id} (dora, done)`, 60_000)
      tmux("send-keys", "-t", session, "C-d")
      await waitFor("EXIT=0")
      expect(screen().split(`task ${id} (dora, done) answered`).length - 1).toBe(1)
      const t = JSON.parse((await d.roster(["task", "show", id, "--json"])).stdout)
      expect(t.delivery).toMatchObject({ target: `talk:${talkRun}`, ok: true })
      const turns = fs.readFileSync(d.file("data", "runs", "alice", talkRun, "turns.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l))
      expect(turns.map((x) => x.role)).toEqual(["person", "task-reply"])
      expect(turns[0].phase).toBe("start")
      expect(turns[0].input).toContain("This is a conversation in a terminal (roster talk)")
    } finally {
      close()
    }
  }, 240_000)

  it("roster talk: Ctrl-C during a turn aborts that turn, a second Ctrl-C ends the session", async () => {
    d.writeOrg(org(slow.port))
    const { close, session, tmux, waitFor } = terminal()
    try {
      await waitFor("you> ")
      tmux("send-keys", "-t", session, "Take a minute over this.", "Enter")
      const deadline = Date.now() + 30_000
      while (slow.received.filter((r) => r.path.startsWith("/v1/messages")).length === 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100))
      }
      tmux("send-keys", "-t", session, "C-c")
      await waitFor("(aborting this turn")
      // pi aborts the turn: the prompt comes back long before the slow model would answer.
      await waitFor("you> ", 20_000, 2)
      tmux("send-keys", "-t", session, "C-c")
      await waitFor("EXIT=130", 20_000)
    } finally {
      close()
      d.writeOrg(org(model.port))
    }
    const run = lastRun(d)
    expect(run.record).toMatchObject({ kind: "session", ended_by: "signal" })
    await expectOnlyWarm(d)
  })

  it("roster talk handed to the daemon: a CLI killed with -9 drops its connection, and the daemon ends the session and its box", async () => {
    const { child: cli, printed, exited } = talkTo("alice", d.env)
    cli.stdin?.write("What system is your box running?\n")
    const until = async (what: string, ok: () => Promise<boolean> | boolean, ms = 60_000) => {
      const deadline = Date.now() + ms
      while (!(await ok())) {
        if (Date.now() > deadline) return expect.fail(`${what} within ${ms / 1000} s; the CLI printed: ${printed()}`)
        await new Promise((r) => setTimeout(r, 200))
      }
    }
    await until("an answer", () => printed().includes("alice> Rehearsal answer"))
    expect(await boxes()).toHaveLength(1)
    cli.kill("SIGKILL")
    await exited
    await until("the box gone", async () => (await boxes()).length === 0, 30_000)
    await until("the run finished", () => lastRun(d).record.finished_at !== null, 30_000)
    expect(lastRun(d).record).toMatchObject({ kind: "session", ended_by: "signal" })
    await expectOnlyWarm(d)
  })

  it("roster talk handed to the daemon: server stop ends the session, its box gone, and the CLI says why and exits 1", async () => {
    const { child: cli, printed, exited } = talkTo("alice", d.env)
    cli.stdin?.write("What system is your box running?\n")
    const deadline = Date.now() + 60_000
    while (!printed().includes("alice> Rehearsal answer") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200))
    expect(printed()).toContain("alice> Rehearsal answer")
    try {
      expect((await d.roster(["server", "stop"])).code).toBe(0)
      const ended = await exited
      expect(ended.code).toBe(1)
      expect(ended.stderr).toContain("roster: the daemon stopped while it ran this session (its box was killed): talk again once it is back (roster server start)")
      await expectOnlyWarm(d)
      expect(lastRun(d).record).toMatchObject({ kind: "session", ended_by: "signal" })
    } finally {
      expect((await d.roster(["server", "start"])).code).toBe(0)
    }
  })

  /** The worker's tasks and memory as the CLI shows them (JSON), and a task waited for until it ends. */
  const taskOf = async (id: string) => JSON.parse((await d.roster(["task", "show", id, "--json"])).stdout) as Record<string, unknown>
  const untilEnded = async (id: string, ms = 120_000) => {
    const deadline = Date.now() + ms
    let t = await taskOf(id)
    // Ended, and its answer delivered when it has somewhere to go (the delivery is claimed, then its outcome written).
    const settled = (x: Record<string, unknown>) =>
      !["queued", "running", "held"].includes(String(x.status)) &&
      (x.reply_to === undefined || x.reply_to === null || x.reply_to === "none" || (x.delivery !== undefined && !(x.delivery as { pending?: boolean }).pending))
    while (!settled(t) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 400))
      t = await taskOf(id)
    }
    return t
  }
  const queued = async (...args: Array<string>) => {
    const r = await d.roster(["task", "add", ...args])
    expect(r.code, r.stderr).toBe(0)
    return /^task (t-[0-9a-f]{8}) queued$/m.exec(r.stdout)?.[1] ?? ""
  }
  const memoryOf = async (worker: string) =>
    JSON.parse((await d.roster(["memory", "list", worker, "--json"])).stdout) as Array<{ id: string; text: string; pending: boolean; run_id: string | null }>

  it("a worker remembers: run 1 calls remember, run 2 (a fresh box) answers from its briefing", async () => {
    const first = await d.roster(["worker", "run", "alice", `${REHEARSAL_REMEMBER_ASK}the deploy key lives in vault entry ops.`])
    expect(first.code, first.stderr).toBe(0)
    const run1 = lastRun(d)
    expect(run1.record.final_text).toMatch(/the tool said: remembered as m-[0-9a-f]{8}/)
    const [entry] = await memoryOf("alice")
    expect(entry).toMatchObject({ text: "the deploy key lives in vault entry ops", pending: false, run_id: run1.record.run_id })
    // The memory is host-side: nothing of it in the run's folder or the box.
    expect(fs.existsSync(d.file("data", "memory", "alice.jsonl"))).toBe(true)
    const second = await d.roster(["worker", "run", "alice", "What do you remember about the deploy key?"])
    expect(second.code, second.stderr).toBe(0)
    const run2 = lastRun(d)
    expect(run2.record.run_id).not.toBe(run1.record.run_id)
    expect(run2.record.final_text).toContain("the deploy key lives in vault entry ops")
    const context = JSON.parse(fs.readFileSync(d.file("data", "contexts", "alice", `${run2.record.run_id}.json`), "utf8"))
    expect(context).toMatchObject({ surface: "direct-box", origin: { _tag: "person", via: "cli" }, memory_briefed: [entry?.id] })
    // The route key (pi's session id) comes from the stable system prompt: memory did not move it.
    const key = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, "context.json"), "utf8")).cache.route_key
    expect(key(run2.dir)).toBe(key(run1.dir))
  }, 120_000)

  it("a full briefing says how many entries were left out; memory forget drops one from the next briefing", async () => {
    const file = d.file("data", "memory", "carl.jsonl")
    expect((await d.roster(["worker", "add", "carl"])).code).toBe(0)
    fs.writeFileSync(d.file("config", "workers", "carl", "worker.toml"), `model = "anthropic/claude-sonnet-4-5"\n`)
    fs.mkdirSync(path.dirname(file), { recursive: true })
    // 60 entries of ~180 characters: more than the default 8,000 a briefing carries.
    fs.writeFileSync(file, Array.from({ length: 60 }, (_, i) => JSON.stringify({
      _tag: "add", id: `m-${String(i).padStart(8, "0")}`, text: `fact ${i}: ${"detail ".repeat(20)}`, scope: "worker", run_id: null,
      time: new Date(Date.parse("2026-11-01T00:00:00.000Z") + i * 60_000).toISOString(), pending: false
    })).join("\n") + "\n")
    const newest = (await memoryOf("carl"))[0]?.id ?? ""
    const recall = async () => {
      const r = await d.roster(["worker", "run", "carl", "What do you remember?"])
      expect(r.code, r.stderr).toBe(0)
      return String(JSON.parse(fs.readFileSync(d.file("data", "runs", "carl", latestRunId(d.file("data", "runs", "carl")), "run.json"), "utf8")).final_text)
    }
    const before = await recall()
    expect(before).toContain(newest)
    expect(before).toMatch(/\(\d+ older entries left out: they did not fit in the briefing's 8000 characters\.\)/)
    const forgot = await d.roster(["memory", "forget", "carl", newest])
    expect(forgot.code, forgot.stderr).toBe(0)
    expect(forgot.stdout).toContain(`carl forgot ${newest}`)
    const after = await recall()
    expect(after).not.toContain(newest)
    expect((await memoryOf("carl")).map((e) => e.id)).not.toContain(newest)
  }, 120_000)

  it("a task and its --continue follow-up: the second recalls a word said only in the first run's conversation", async () => {
    const first = await queued("alice", "The secret word is PELICAN. Look at your box.")
    expect(await untilEnded(first)).toMatchObject({ status: "done" })
    const next = await queued("alice", "--continue", first, "What was the secret word?")
    const done = await untilEnded(next)
    expect(done).toMatchObject({ status: "done", continues: { task_id: first } })
    expect(String(done.final_text)).toContain("The secret word is PELICAN.")
    // Only the first run's conversation had the word: the follow-up's own prompt and briefing do not.
    expect((await taskOf(first)).continued_by).toEqual([next])
    const runId = (done.run_ids as Array<string>)[0] ?? ""
    const sent = JSON.parse(fs.readFileSync(d.file("data", "runs", "alice", runId, "context.json"), "utf8")).input_prompt as string
    expect(sent).not.toContain("PELICAN")
    expect(sent).toContain(`This run continues task ${first}`)
    // Another worker cannot carry it on.
    const refused = await d.roster(["task", "add", "carl", "--continue", first, "carry on"])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain(`that task is alice's`)
  }, 180_000)

  it("--reply-to task:<id>: the answer lands on the other task's record; a failed task's reply says how it failed", async () => {
    const target = await queued("carl", "Collect what others send you.")
    await d.roster(["task", "cancel", target])
    const asker = await queued("alice", "--reply-to", `task:${target}`, "What system is your box running?")
    const done = await untilEnded(asker)
    expect(done).toMatchObject({ status: "done", delivery: { target: `task:${target}`, ok: true } })
    const replies = (await taskOf(target)).replies as Array<Record<string, unknown>>
    expect(replies).toEqual([expect.objectContaining({ from_task: asker, worker: "alice", status: "done", text: done.final_text })])
    d.writeOrg(org(failing.port))
    try {
      const failed = await queued("alice", "--reply-to", `task:${target}`, "hello")
      expect(await untilEnded(failed)).toMatchObject({ status: "failed", delivery: { ok: true } })
      const last = ((await taskOf(target)).replies as Array<Record<string, unknown>>).at(-1)
      expect(last).toMatchObject({ from_task: failed, status: "failed" })
      expect(String(last?.text)).toContain(`task ${failed} of alice failed: the model call failed`)
    } finally {
      d.writeOrg(org(model.port))
    }
  }, 180_000)

  it("a tainted run's remember stays pending until roster memory accept", async () => {
    const child = d.spawn(["worker", "run", "alice", `${REHEARSAL_REMEMBER_ASK}a note from a tainted run.`])
    const done = collect(child)
    // The run's box asks the gateway for a host no rule allows (here with the run's own token): the run is tainted.
    const deadline = Date.now() + 30_000
    // The token is served once its box runs; the run's is the one bound to a run (a warm box's waits unbound).
    const runToken = async () => (await leftovers(d.file("config"), d.file("state"))).runTokens[0]?.file.replace(/\.json$/, "")
    while (((await boxes()).length === 0 || (await runToken()) === undefined) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    const token = (await runToken()) ?? ""
    const refused = await new Promise<number>((resolve) => {
      const req = http.request({ host: "127.0.0.1", port: d.port, method: "CONNECT", path: "blocked.example.test:443", headers: { "proxy-authorization": `Basic ${Buffer.from(`${token}:x`).toString("base64")}` } })
      req.once("connect", (res, socket) => {
        socket.destroy()
        resolve(res.statusCode ?? 0)
      })
      req.once("error", () => resolve(0))
      req.end()
    })
    expect(refused).toBe(403)
    const r = await done
    expect(r.code, r.stderr).toBe(0)
    const run = lastRun(d)
    expect(run.record.tainted).toContainEqual(expect.objectContaining({ reason: "egress_refused", host: "blocked.example.test" }))
    const entry = (await memoryOf("alice")).find((e) => e.text === "a note from a tainted run")
    expect(entry).toMatchObject({ pending: true, run_id: run.record.run_id })
    const listed = await d.roster(["memory", "list", "alice"])
    expect(listed.stdout).toContain(`${entry?.id}`)
    expect(listed.stdout).toContain("PENDING")
    // Not briefed while pending.
    const recall = await d.roster(["worker", "run", "alice", "What do you remember?"])
    expect(lastRun(d).record.final_text).not.toContain("a note from a tainted run")
    expect(recall.code).toBe(0)
    const accepted = await d.roster(["memory", "accept", "alice", entry?.id ?? ""])
    expect(accepted.code, accepted.stderr).toBe(0)
    expect((await memoryOf("alice")).find((e) => e.id === entry?.id)?.pending).toBe(false)
    await d.roster(["worker", "run", "alice", "What do you remember?"])
    expect(lastRun(d).record.final_text).toContain("a note from a tainted run")
  }, 180_000)

  it("the mounted engine ([engine] dir = this checkout) runs the same path", async () => {
    d.writeOrg(org(model.port), `[engine]\nimage = "${PI_IMAGE}"\ndir = "${checkout}"`)
    try {
      const inspected = await expectWholePath()
      // pi ran from the read-only checkout, not from the image's engine.
      expect(inspected).toContain(`${checkout}:/opt/roster/checkout:ro`)
      expect(inspected).toContain("/opt/roster/checkout/box/extensions/message_user.ts")
    } finally {
      d.writeOrg(org(model.port))
    }
  })
})
