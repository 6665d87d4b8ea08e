import Dockerode from "dockerode"
import { Effect, Exit, Scope } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { REHEARSAL_FOLLOW_UP, REHEARSAL_FOLLOW_UP_ASK, REHEARSAL_MESSAGE } from "../../src/rehearsal/script.js"
import { type Received, serveRehearsal } from "../../src/rehearsal/server.js"
import { latestRunId } from "../support/runs.js"
import { collect, type Deployment, HOST_KEY, makeDeployment, ROSTER_BIN } from "../support/deployment.js"

const PI_IMAGE = "roster-box:test"
const TEST_KEY = "sk-ant-e2e-REAL-vault-key-5a4b3c2d1e"
const checkout = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const docker = new Dockerode()
/** The boxes of the deployment under test (never another suite's on the same engine). */
let deploymentLabel = "roster.deployment"
const boxes = () => docker.listContainers({ all: true, filters: { label: ["roster.run-id", deploymentLabel] } })

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
    deploymentLabel = `roster.deployment=${d.file("config")}`
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
    expect(await boxes()).toEqual([])
    return inspected
  }

  it("roster box check reports the image's Node and pi", async () => {
    const r = await d.roster(["box", "check", "--tag", PI_IMAGE])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/node v22\.\d+\.\d+, pi 1\.6\.\d+ \(label 1\.6\.\d+\), \/tmp writable/)
  })

  it("runs pi to exit 0: a bash tool call in the box, message_user, the real key only in transit", async () => {
    const inspected = await expectWholePath()
    expect(inspected).toContain("/opt/roster/engine/run-pi")
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
    const next = await until(followUps[0] ?? "")
    expect(next).toMatchObject({ status: "done", prompt: REHEARSAL_FOLLOW_UP, origin: { by: "self", run_id: runId, task_id: id } })
    expect(await boxes()).toEqual([])
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
    expect(await boxes()).toEqual([])
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
    expect(fs.readFileSync(path.join(run.dir, "turns.jsonl"), "utf8").trim().split("\n")).toHaveLength(2)
    expect(await boxes()).toEqual([])
    expect(fs.readdirSync(d.file("state", "identity"))).toEqual([])
  })

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
    expect(await boxes()).toEqual([])
    expect(fs.readdirSync(d.file("state", "identity"))).toEqual([])
  })

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
