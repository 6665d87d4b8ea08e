// How soon a chat channel's new session answers: from a message arriving in the channel (pushed by
// the Slack stand-in, a local server speaking Slack's Web API and Socket Mode — not Slack) to the
// worker's answer posted in its thread, with a warm box against a cold start of the same session,
// alternating. Real pi in the real box image, the rehearsal model (a local stand-in for Claude) behind
// the gateway's route. Each session ends when idle before the next message, so each is a new one.
import { Effect, Exit, Scope } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, it } from "vitest"
import { serveRehearsal } from "../src/rehearsal/server.js"
import { freePort } from "../test/support/deployment.js"
import { buildPiImage, PI_IMAGE } from "../test/support/images.js"
import { BOT_USER, type SlackStandIn, startSlackStandIn } from "../test/support/slackStandIn.js"
import { emit, percentile, quick, settledWarmBox, sleep, smoke } from "./support.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const bin = path.join(root, "bin/roster.js")
const RUNS = smoke ? 1 : quick ? 3 : 5
const CHANNEL = "C0BENCH"
const TOKENS = { bot: "xoxb-bench-bot-token-5a4b3c2d1e0f", app: "xapp-bench-app-token-0f1e2d3c4b5a" }

describe("a chat session's first answer", () => {
  let env: NodeJS.ProcessEnv
  let home = ""
  let orgToml = ""
  let scope: Scope.CloseableScope
  let slack: SlackStandIn

  const useWarm = (warm: "off" | "recent") => fs.writeFileSync(path.join(home, "config", "org.toml"), `${orgToml}[box]\nwarm = "${warm}"\n`)
  const config = () => path.join(home, "config")
  const roster = (args: ReadonlyArray<string>) => spawnSync(bin, args, { env, encoding: "utf8" })

  /** Waits until `ready` says yes, failing with `what` after `ms`. */
  const until = async (what: string, ready: () => boolean, ms = 120_000) => {
    const deadline = Date.now() + ms
    while (!ready()) {
      if (Date.now() > deadline) throw new Error(`${what}: not in ${ms / 1000} s (see ${home}/state/gateway.log)`)
      await sleep(50)
    }
  }
  /** The box of a run (a session's box, made warm or cold), while it runs. */
  const boxOf = (runId: string) =>
    // By its name: a warm box keeps the label of the run id it was made under and is renamed to the run that takes it.
    spawnSync("docker", ["ps", "-q", "--filter", `label=roster.deployment=${config()}`, "--filter", `name=^roster-box-${runId}$`], { encoding: "utf8" })
      .stdout.trim()
  /** The session that answers in `thread`, as its "is here" notice names it. */
  const sessionOf = (thread: string) =>
    /is here \(session (\S+?)\)/.exec(slack.posts.find((p) => p.thread_ts === thread && p.text.includes("is here"))?.text ?? "")?.[1] ?? ""
  /** One message opening a session: ms from its arrival to the answer in its thread; then the session ends (idle). */
  const firstAnswer = async () => {
    const t0 = Date.now()
    const thread = slack.say({ channel: CHANNEL, user: "U0ANNA", text: `<@${BOT_USER}> Say hello.` })
    const answer = () => slack.posts.find((p) => p.thread_ts === thread && p.text.startsWith("Rehearsal answer"))
    await until(`an answer in thread ${thread}`, () => answer() !== undefined).catch((e: Error) => {
      throw new Error(`${e.message}; its posts: ${slack.posts.filter((p) => p.thread_ts === thread).map((p) => p.text).join(" | ")}`)
    })
    const at = answer()?.at ?? Number.NaN
    const session = sessionOf(thread)
    if (session === "") throw new Error(`no session said it is here in thread ${thread}`)
    await until(`the end of session ${session} (idle)`, () => boxOf(session) === "", 60_000)
    return at - t0
  }

  beforeAll(async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), "roster-bench-chat-"))
    env = { ...process.env, ROSTER_HOME: home, HOME: home, ANTHROPIC_API_KEY: "sk-ant-bench-not-real", BOT: TOKENS.bot, APP: TOKENS.app }
    buildPiImage()
    scope = Effect.runSync(Scope.make())
    const model = await Effect.runPromise(serveRehearsal({ port: 0 }).pipe(Scope.extend(scope)))
    slack = await startSlackStandIn(TOKENS)
    roster(["init"])
    orgToml = [
      "[engine]", `image = "${PI_IMAGE}"`,
      "[gateway]", `port = ${await freePort()}`,
      "[[grant]]", `name = "anthropic"`, `hosts = ["api.anthropic.com"]`, `scope = ["org/*"]`, `credential = "anthropic"`,
      "[[route]]", `host = "api.anthropic.com"`, `upstream = "http://127.0.0.1:${model.port}"`,
      // A session ends 3 s after its answer, so each message of the bench opens a new one.
      "[[chat]]", `provider = "slack"`, `connection = "slack"`, `api_url = "${slack.apiUrl}"`, "turns_per_min = 600",
      "[[chat.channel]]", `id = "${CHANNEL}"`, `worker = "alice"`, `allow_users = ["U0ANNA"]`, "idle_min = 0.05"
    ].join("\n") + "\n"
    useWarm("off")
    const stored = roster(["connection", "add", "slack", "--from-env", "BOT", "--app-from-env", "APP"])
    if (stored.status !== 0) throw new Error(`the Slack connection was not stored: ${stored.stderr}`)
    const started = roster(["server", "start"])
    if (started.status !== 0) throw new Error(`the daemon did not start: ${started.stderr}`)
    await until("the channel's listener connected", () => slack.connected(), 60_000)
  }, 900_000)

  afterAll(async () => {
    if (home) spawnSync(bin, ["server", "stop"], { env })
    await slack?.close()
    if (scope) await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  it("a chat channel's new session to its first answer, warm box against cold (real pi, the rehearsal model, the Slack stand-in)", async () => {
    const cold: Array<number> = []
    const warm: Array<number> = []
    for (let i = 0; i < RUNS; i++) {
      useWarm("off")
      cold.push(await firstAnswer())
      useWarm("recent")
      // The session after the switch starts its own box (none was made while off) and leaves one of its shape.
      await firstAnswer()
      await settledWarmBox(home, "alice")
      warm.push(await firstAnswer())
    }
    const w = percentile(warm, 50)
    const c = percentile(cold, 50)
    emit({
      metric: "chat message to a new session's first answer, warm box, p50 (real pi, Slack stand-in)", roster: w, baseline: c, unit: "ms", compare: "ratio",
      goal: "reported", pass: true, reported: true,
      spread: `min ${Math.min(...warm).toFixed(0)} max ${Math.max(...warm).toFixed(0)}, n=${RUNS}; baseline: the same session cold; both include the rehearsal's bash call, whose egress probe waits 0.5 s`
    })
  }, 900_000)
})
