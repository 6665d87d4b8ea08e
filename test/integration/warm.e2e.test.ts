import { Effect, Exit, Scope } from "effect"
import Dockerode from "dockerode"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { REHEARSAL_MESSAGE } from "../../src/rehearsal/script.js"
import { type Received, serveRehearsal } from "../../src/rehearsal/server.js"
import { execFileSync, spawn } from "node:child_process"
import * as os from "node:os"
import { collect, type Deployment, makeDeployment, ROSTER_BIN } from "../support/deployment.js"
import { BOT_USER, type SlackStandIn, startSlackStandIn } from "../support/slackStandIn.js"
import { latestRunId } from "../support/runs.js"
import { warmBoxOf } from "../support/warmBoxes.js"

const PI_IMAGE = "roster-box:test"
const docker = new Dockerode()

/** What a transcript says, event by event, without what only rpc mode prints (its answers to commands). */
const shape = (runDir: string) =>
  fs.readFileSync(path.join(runDir, "stdout.jsonl"), "utf8").split("\n").filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { type: string; message?: { role?: string } })
    .filter((e) => e.type !== "response" && e.type !== "session" && !e.type.startsWith("roster_"))
    .map((e) => (e.message?.role ? `${e.type}:${e.message.role}` : e.type))

describe("a warm box with real pi in the real box image, through the real gateway, against the rehearsal model", () => {
  let d: Deployment
  let orgText = ""
  let scope: Scope.CloseableScope
  let model: { port: number; received: Array<Received> }
  let slack: SlackStandIn
  const BOT = "xoxb-warm-e2e-bot-token-0f1e2d3c4b5a"

  beforeAll(async () => {
    scope = Effect.runSync(Scope.make())
    model = await Effect.runPromise(serveRehearsal({ port: 0 }).pipe(Scope.extend(scope)))
    slack = await startSlackStandIn({ bot: BOT, app: "xapp-warm-e2e-app-token-9a8b7c6d5e4f" })
    orgText = [
      "[box]", `warm = "recent"`,
      "[[grant]]", `name = "anthropic"`, `hosts = ["api.anthropic.com"]`, `scope = ["org/*"]`, `credential = "anthropic"`,
      "[[route]]", `host = "api.anthropic.com"`, `upstream = "http://127.0.0.1:${model.port}"`,
      // bob's channel (the Slack stand-in): a session ends 6 s after its last turn, so the next message starts another.
      "[[chat]]", `provider = "slack"`, `connection = "slack"`, `api_url = "${slack.apiUrl}"`,
      "[[chat.channel]]", `id = "C0WARM"`, `worker = "bob"`, `allow_users = ["U0ANNA"]`, "idle_min = 0.1"
    ].join("\n")
    d = await makeDeployment(orgText, PI_IMAGE)
    expect((await d.roster(["worker", "add", "bob"])).code).toBe(0)
    for (const w of ["alice", "bob"]) fs.writeFileSync(d.file("config", "workers", w, "worker.toml"), `model = "anthropic/claude-sonnet-4-5"\n`)
    const stored = await collect(spawn(ROSTER_BIN, ["connection", "add", "slack", "--from-env", "BOT", "--app-from-env", "APP"], {
      env: { ...d.env, BOT, APP: "xapp-warm-e2e-app-token-9a8b7c6d5e4f" }, stdio: ["ignore", "pipe", "pipe"]
    }))
    expect(stored.code, stored.stderr).toBe(0)
    // Added after the daemon started: its listener connects on its next attempt.
    const connected = async () =>
      ((JSON.parse((await d.roster(["server", "status", "--json"])).stdout).supervisor?.chat ?? []) as Array<{ state: string }>)
        .some((c) => c.state === "connected")
    const deadline = Date.now() + 60_000
    while (!(await connected()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500))
    expect(await connected()).toBe(true)
  }, 120_000)

  afterAll(async () => {
    await d?.stop()
    await slack?.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  /** The run id of the deployment's warm box of `worker`, once there is one. */
  const warmOf = (worker: string) => warmBoxOf(docker, d.file("config"), worker, 60_000)

  it("a chat channel's next session takes the warm box its last one left: answered in its thread, its record warm: true", async () => {
    const answered = async (thread: string) => {
      const deadline = Date.now() + 120_000
      for (;;) {
        const post = slack.posts.find((p) => p.thread_ts === thread && p.text.startsWith("Rehearsal answer"))
        if (post) return post
        if (Date.now() > deadline) return expect.fail(`no answer in thread ${thread}; posts: ${slack.posts.map((p) => p.text.slice(0, 80)).join(" | ")}`)
        await new Promise((r) => setTimeout(r, 250))
      }
    }
    const sessionOf = (thread: string) =>
      /is here \(session (\S+?)\)/.exec(slack.posts.find((p) => p.thread_ts === thread && p.text.includes("is here"))?.text ?? "")?.[1] ?? ""
    const first = slack.say({ channel: "C0WARM", user: "U0ANNA", text: `<@${BOT_USER}> What system is your box running?` })
    expect((await answered(first)).text).toMatch(/uid=65532/)
    // The session ends when idle; its worker's next box is made of its shape (a Slack session's, with slack_send).
    const warmId = await warmOf("bob")
    expect(warmId).not.toBe("")
    const second = slack.say({ channel: "C0WARM", user: "U0ANNA", text: `<@${BOT_USER}> What system is your box running?` })
    expect((await answered(second)).text).toMatch(/uid=65532/)
    // The session took the box under its own run id: the box and its folder were renamed to it.
    const secondId = sessionOf(second)
    expect(secondId).not.toBe(warmId)
    const [c, w] = [sessionOf(first), secondId].map((id) => JSON.parse(fs.readFileSync(d.file("data", "runs", "bob", id, "run.json"), "utf8")))
    expect(c).toMatchObject({ kind: "session", warm: false })
    expect(w).toMatchObject({ kind: "session", warm: true, warm_box: warmId, channel: c.channel })
    expect(fs.existsSync(d.file("data", "runs", "bob", warmId))).toBe(false)
    // Its preflight was reported while it waited (the session still runs: its events, not yet its finished record, say so).
    expect(fs.readFileSync(d.file("data", "runs", "bob", secondId, "events.jsonl"), "utf8")).toContain(`"kind":"preflight","result":{"ok":true`)
  }, 240_000)

  it("a warm run and a cold run of the same prompt: the same transcript shape, messages, answer and record fields (warm: true|false)", async () => {
    const runs = d.file("data", "runs", "alice")
    const prompt = "What system is your box running?"
    const cold = await d.roster(["worker", "run", "alice", prompt])
    expect(cold.code, cold.stderr).toBe(0)
    const coldId = latestRunId(runs)
    // pi waits in rpc mode for a prompt in the warm box the daemon makes next.
    const warmId = await warmOf("alice")
    expect(warmId).not.toBe("")
    const callsBefore = model.received.length
    const warm = await d.roster(["worker", "run", "alice", prompt])
    expect(warm.code, warm.stderr).toBe(0)
    const warmRunId = latestRunId(runs)
    const [c, w] = [coldId, warmRunId].map((id) => JSON.parse(fs.readFileSync(path.join(runs, id, "run.json"), "utf8")))
    expect(c).toMatchObject({ warm: false, ended_by: "exit", exit_code: 0, error: null, stop_reason: "stop", messages: [REHEARSAL_MESSAGE] })
    expect(w).toMatchObject({ warm: true, warm_box: warmId, ended_by: "exit", exit_code: 0, error: null, stop_reason: "stop", messages: [REHEARSAL_MESSAGE], preflight: { ok: true } })
    expect(c.warm_box).toBeUndefined()
    // The same words, but for the run's id and the box's own hostname (its container's id).
    const same = (s: string, runId: string) => s.replaceAll(runId, "RUN").replace(/host=[0-9a-f]{12}/g, "host=BOX")
    expect(same(w.final_text, warmRunId)).toBe(same(c.final_text, coldId))
    expect(shape(path.join(runs, warmRunId))).toEqual(shape(path.join(runs, coldId)))
    expect(same(warm.stdout, warmRunId)).toBe(same(cold.stdout, coldId))
    // The warm box's model calls went out under the run, after its claim: none while it waited.
    expect(model.received.length).toBeGreaterThan(callsBefore)
  })

  it("roster talk is handed to the daemon, which gives it the warm box a talk left: the same lines as a cold talk and as one the CLI runs itself, its record warm: true", async () => {
    expect((await d.roster(["worker", "add", "erin"])).code).toBe(0)
    fs.writeFileSync(d.file("config", "workers", "erin", "worker.toml"), `model = "anthropic/claude-sonnet-4-5"\n`)
    const runs = d.file("data", "runs", "erin")
    const talk = (env: NodeJS.ProcessEnv = d.env) => {
      const child = spawn(ROSTER_BIN, ["talk", "erin"], { env, stdio: ["pipe", "pipe", "pipe"] })
      child.stdin?.end("What system is your box running?\n")
      return collect(child)
    }
    // erin has never run: her first talk starts its own box, in the daemon.
    const cold = await talk()
    expect(cold.code, cold.stderr).toBe(0)
    const coldId = latestRunId(runs)
    // Its end leaves her a warm box of a talk's shape (pi in rpc mode with term_send).
    const warmId = await warmOf("erin")
    expect(warmId).not.toBe("")
    const warm = await talk()
    expect(warm.code, warm.stderr).toBe(0)
    const warmRunId = latestRunId(runs)
    // The CLI's own session (no handoff): no warm box in its process.
    const own = await talk({ ...d.env, ROSTER_HANDOFF: "0" })
    expect(own.code, own.stderr).toBe(0)
    const ownId = latestRunId(runs)
    const [c, w, o] = [coldId, warmRunId, ownId].map((id) => JSON.parse(fs.readFileSync(path.join(runs, id, "run.json"), "utf8")))
    expect(c).toMatchObject({ kind: "session", warm: false, ended_by: "closed", exit_code: 0 })
    expect(w).toMatchObject({ kind: "session", warm: true, warm_box: warmId, ended_by: "closed", exit_code: 0, preflight: { ok: true } })
    expect(o).toMatchObject({ kind: "session", warm: false, ended_by: "closed", exit_code: 0 })
    // Whose box ran it: the daemon's for a handed-over talk, the CLI's own process for the last.
    expect(c.owner.pid).toBe(w.owner.pid)
    expect(o.owner.pid).not.toBe(c.owner.pid)
    const same = (s: string, runId: string) => s.replaceAll(runId, "RUN").replace(/host=[0-9a-f]{12}/g, "host=BOX")
    expect(warm.stdout).toMatch(/^erin> Rehearsal answer/m)
    expect(same(warm.stdout, warmRunId)).toBe(same(cold.stdout, coldId))
    expect(same(own.stdout, ownId)).toBe(same(cold.stdout, coldId))
  }, 240_000)

  it("a queued task in a warm box has ROSTER_TASK_ID for its commands, as a cold task's box has it in its environment", async () => {
    const runs = d.file("data", "runs", "alice")
    // alice's last run left her a warm box, unless another worker's took its place since (warm_max = 2): then the run below does.
    if ((await warmBoxOf(docker, d.file("config"), "alice", 0)) === "") expect((await d.roster(["worker", "run", "alice", "hello"])).code).toBe(0)
    const warmId = await warmOf("alice")
    expect(warmId).not.toBe("")
    const added = await d.roster(["task", "add", "alice", "look at your box", "--json"])
    expect(added.code, added.stderr).toBe(0)
    const taskId = (JSON.parse(added.stdout) as { task_id: string }).task_id
    const deadline = Date.now() + 120_000
    let task: { status: string; run_ids: Array<string> } = { status: "queued", run_ids: [] }
    while (["queued", "running"].includes(task.status) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 300))
      task = JSON.parse((await d.roster(["task", "show", taskId, "--json"])).stdout)
    }
    expect(task).toMatchObject({ status: "done", run_ids: [expect.any(String)] })
    const record = JSON.parse(fs.readFileSync(path.join(runs, task.run_ids[0]!, "run.json"), "utf8"))
    expect(record).toMatchObject({ kind: "task", task_id: taskId, warm: true, warm_box: warmId, exit_code: 0 })
    // The rehearsal's bash call printed the variable as the box's commands see it.
    expect(record.final_text).toContain(`task=${taskId}`)
  })

  it("a gated repo in a warm box: moved on since the box was made, the run's commands see the new base (ROSTER_KNOWLEDGE_BASE)", async () => {
    const git = (cwd: string, ...args: Array<string>) =>
      execFileSync("git", ["-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd, encoding: "utf8" }).trim()
    const repos = fs.mkdtempSync(path.join(os.tmpdir(), "roster-e2e-repos-"))
    const seed = path.join(repos, "seed")
    const canonical = path.join(repos, "knowledge.git")
    git(repos, "init", "--quiet", "--initial-branch=main", seed)
    fs.writeFileSync(path.join(seed, "README.md"), "notes\n")
    git(seed, "add", "-A")
    git(seed, "commit", "--quiet", "-m", "first")
    git(repos, "clone", "--quiet", "--bare", seed, canonical)
    d.writeOrg(`${orgText}\n[[mount]]\nname = "knowledge"\npath = "${canonical}"\nkind = "repo"\ngated = true\nworkers = ["dora"]\n`)
    expect((await d.roster(["worker", "add", "dora"])).code).toBe(0)
    fs.writeFileSync(d.file("config", "workers", "dora", "worker.toml"), `model = "anthropic/claude-sonnet-4-5"\n`)
    expect((await d.roster(["worker", "run", "dora", "hello"])).code).toBe(0)
    const warmId = await warmOf("dora")
    expect(warmId).not.toBe("")
    fs.writeFileSync(path.join(seed, "later.md"), "later\n")
    git(seed, "add", "-A")
    git(seed, "commit", "--quiet", "-m", "later")
    git(seed, "push", "--quiet", canonical, "HEAD:main")
    const moved = git(canonical, "rev-parse", "main")
    const r = await d.roster(["worker", "run", "dora", "look at your box"])
    expect(r.code, r.stderr).toBe(0)
    const record = JSON.parse(fs.readFileSync(d.file("data", "runs", "dora", latestRunId(d.file("data", "runs", "dora")), "run.json"), "utf8"))
    expect(record).toMatchObject({ warm: true, warm_box: warmId, exit_code: 0 })
    expect(record.final_text).toContain(`knowledge=${moved}`)
  })
})
