import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { uploadChat } from "../../src/chat/uploadChat.js"
import { discordPress, slackPress } from "../../src/chat/cardPress.js"
import { closeApprovalCard, postApprovalCard } from "../../src/chat/approvalCard.js"
import { makeApprovals } from "../../src/gateway/base/approvals.js"
import { layout } from "../../src/config/Paths.js"
import { readBoxFile } from "../../src/gateway/actions/chat/boxFile.js"
import { chatSend } from "../../src/gateway/actions/chat/sendAction.js"
import { saveRunContext } from "../../src/run/runContext.js"
import { startDiscordStandIn } from "../support/discordStandIn.js"
import { startSlackStandIn } from "../support/slackStandIn.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const BOT = "xoxb-unit-bot-token-0005"
const APP = "xapp-unit-app-token-0005"
const DISCORD = "discord-unit-bot-token-0005"
const DISCORD_CHANNEL = "700000000000000002"
const RUN = "2026-12-05-10-00-00-0000f11e"
const sha = (b: Uint8Array) => crypto.createHash("sha256").update(b).digest("hex")

const deployment = (chat: string) => {
  const paths = tempPaths()
  writeFixture({ paths, orgToml: chat, workers: ["alice"] })
  return { paths, layer: unitLayer(paths, { vault: { slack: { type: "slack", bot_token: BOT, app_token: APP }, discord: { type: "discord", bot_token: DISCORD } } }) }
}

/** A run folder with a home and an inbox, as provisioning leaves them. */
const runFolder = (paths: ReturnType<typeof tempPaths>) => {
  const runDir = layout(paths).runDir("alice", RUN)
  fs.mkdirSync(path.join(runDir, "home", "workspace"), { recursive: true })
  fs.mkdirSync(path.join(runDir, "inbox", "files"), { recursive: true })
  return runDir
}

describe("a worker hands files back in chat: read host-side from its run's own folders, uploaded by the daemon (the real SDKs against the stand-ins)", () => {
  it.effect("only a regular file of the run's own folders, within file_max, never through a symlink", () => {
    const { layer, paths } = deployment("")
    return Effect.gen(function*() {
      const runDir = runFolder(paths)
      const home = path.join(runDir, "home")
      fs.writeFileSync(path.join(home, "workspace", "ok.txt"), "fine\n")
      fs.writeFileSync(path.join(runDir, "inbox", "files", "in.txt"), "sent to it\n")
      fs.symlinkSync("/etc/passwd", path.join(home, "workspace", "link.txt"))
      fs.mkdirSync(path.join(runDir, "outside"))
      fs.writeFileSync(path.join(runDir, "outside", "secret.txt"), "not the box's\n")
      // A folder the box made a symlink to a host folder: the file is reached through it, and refused.
      fs.symlinkSync(path.join(runDir, "outside"), path.join(home, "workspace", "dir"))
      fs.writeFileSync(path.join(home, "workspace", "big.bin"), Buffer.alloc(2000))
      const read = (p: string) => readBoxFile(runDir, p, 1000)
      expect(yield* read("/pihome/workspace/ok.txt")).toMatchObject({ name: "ok.txt" })
      expect(yield* read("/pihome/inbox/files/in.txt")).toMatchObject({ name: "in.txt" })
      expect(yield* read("/pihome/workspace/link.txt")).toBe("/pihome/workspace/link.txt is a symlink: send the file itself")
      expect(yield* read("/pihome/workspace/dir/secret.txt")).toBe("/pihome/workspace/dir/secret.txt leads outside this run's folders: send a file of its own")
      expect(yield* read("/pihome/../etc/passwd")).toMatch(/name a file under \/pihome/)
      expect(yield* read("/etc/passwd")).toMatch(/name a file under \/pihome/)
      expect(yield* read("/pihome/store/notes.md")).toMatch(/only files of this run's own folders can be sent \(not \/pihome\/store\)/)
      expect(yield* read("/pihome/workspace/big.bin")).toBe("/pihome/workspace/big.bin is 2000 bytes; a file sent to chat is at most 1000 ([[chat]] file_max)")
      expect(yield* read("/pihome/workspace")).toBe("/pihome/workspace is not a regular file")
      expect(yield* read("/pihome/workspace/none.txt")).toBe("/pihome/workspace/none.txt: no such file")
    }).pipe(Effect.provide(layer))
  })

  it.live("Slack: slack_send with files posts the text, then uploads them to the thread through the external upload flow", () =>
    Effect.gen(function*() {
      const slack = yield* Effect.acquireRelease(Effect.promise(() => startSlackStandIn({ bot: BOT, app: APP })), (s) => Effect.promise(() => s.close()))
      const { layer, paths } = deployment([
        "[[chat]]", `provider = "slack"`, `connection = "slack"`, `api_url = "${slack.apiUrl}"`, "file_max = 1",
        "[[chat.channel]]", `id = "C0ALICE"`, `worker = "alice"`
      ].join("\n"))
      yield* Effect.gen(function*() {
        const runDir = runFolder(paths)
        const bytes = crypto.randomBytes(700_000)
        fs.writeFileSync(path.join(runDir, "home", "workspace", "chart.png"), bytes)
        fs.writeFileSync(path.join(runDir, "home", "workspace", "too-big.bin"), Buffer.alloc(2 * 1024 * 1024))
        yield* saveRunContext({
          run_id: RUN, worker: "alice", surface: "chat-session", chat: { provider: "slack", channel: "C0ALICE", thread: "1.5" },
          origin: { _tag: "chat", provider: "slack", channel: "C0ALICE", thread: "1.5", author: "U0ANNA" },
          task_id: null, channel: null, reply_to: null, continues: null, taints: [], memory_briefed: [], turns: 1, saved_at: new Date().toISOString()
        })
        const caller = { subject: "org/alice", runId: RUN, worker: "alice", taskId: null }
        const send = chatSend("slack")
        // A file over file_max refuses the whole send: nothing is posted.
        const refused = yield* send(caller, JSON.stringify({ text: "here", files: ["/pihome/workspace/chart.png", "/pihome/workspace/too-big.bin"] }))
        expect(refused.status).toBe(400)
        expect(JSON.stringify(refused.body)).toContain("too-big.bin is 2097152 bytes")
        expect(slack.posts).toEqual([])
        const sent = yield* send(caller, JSON.stringify({ text: "the chart", files: ["/pihome/workspace/chart.png"] }))
        expect(sent).toEqual({ status: 200, body: { ok: true, messages: 1, files: 1 } })
        expect(slack.posts.map((p) => [p.channel, p.thread_ts, p.text])).toEqual([["C0ALICE", "1.5", "the chart"]])
        expect(slack.uploads).toHaveLength(1)
        expect(slack.uploads[0]).toMatchObject({ channel: "C0ALICE", thread_ts: "1.5", name: "chart.png", token: BOT })
        expect(sha(slack.uploads[0]!.bytes)).toBe(sha(bytes))
        expect(slack.calls.map((c) => c.method)).toEqual(expect.arrayContaining(["files.getUploadURLExternal", "files.completeUploadExternal"]))
      }).pipe(Effect.provide(layer))
    }).pipe(Effect.scoped))

  it.live("Discord: files go as one multipart message in the place the answer goes", () =>
    Effect.gen(function*() {
      const discord = yield* Effect.acquireRelease(Effect.promise(() => startDiscordStandIn(DISCORD)), (s) => Effect.promise(() => s.close()))
      const { layer } = deployment([
        "[[chat]]", `provider = "discord"`, `connection = "discord"`, `api_url = "${discord.apiUrl}"`,
        "[[chat.channel]]", `id = "${DISCORD_CHANNEL}"`, `worker = "alice"`
      ].join("\n"))
      const a = crypto.randomBytes(100_000)
      const b = Buffer.from("a patch\n")
      const n = yield* uploadChat({ provider: "discord", channel: DISCORD_CHANNEL, message: "555" }, [{ name: "a.bin", bytes: a }, { name: "fix.patch", bytes: b }]).pipe(Effect.provide(layer))
      expect(n).toBe(2)
      const post = discord.posts.at(-1)
      expect(post).toMatchObject({ channel: DISCORD_CHANNEL, reply_to: "555", allowed_mentions: { parse: [] }, token: DISCORD })
      expect(post?.files?.map((f) => [f.name, sha(f.bytes)])).toEqual([["a.bin", sha(a)], ["fix.patch", sha(b)]])
    }).pipe(Effect.scoped))
})

describe("a held request's card in Slack: its buttons' presses, and the first decision wins", () => {
  it("a block_actions payload of a card's button is a press; another app's is none", () => {
    const body = (action_id: string, value?: string) => ({
      type: "block_actions", user: { id: "U0ANNA" }, channel: { id: "C0TEAM" }, message: { ts: "9.9", thread_ts: "1.1" },
      actions: [{ action_id, ...(value ? { value } : {}) }]
    })
    expect(slackPress(body("roster_approval_deny", "ap-0123abcd"))).toEqual({
      provider: "slack", channel: "C0TEAM", thread: "1.1", user: "U0ANNA", message: "9.9", approvalId: "ap-0123abcd", decision: "deny"
    })
    expect(slackPress(body("roster_approval_always", "ap-0123abcd"))).toBeUndefined()
    expect(slackPress(body("someone_elses_button", "x"))).toBeUndefined()
    expect(slackPress(body("roster_approval_once"))).toBeUndefined()
    expect(slackPress({ type: "view_submission" })).toBeUndefined()
    // Discord: a button interaction (type 3), its channel resolved to the mapped one; the custom id carries both parts.
    const interaction = (custom_id: string, who: Record<string, unknown> = { member: { user: { id: "600" } } }) => ({
      id: "77", token: "tok", type: 3, channel_id: "701", data: { custom_id, component_type: 2 }, message: { id: "880", channel_id: "701" }, ...who
    })
    const where = { channel: "700", thread: "701" }
    expect(discordPress(interaction("roster_approval_run:ap-0123abcd"), where)).toEqual({
      provider: "discord", channel: "700", thread: "701", user: "600", message: "880", approvalId: "ap-0123abcd", decision: "run", interaction: { id: "77", token: "tok" }
    })
    expect(discordPress(interaction("roster_approval_once:ap-0123abcd", { user: { id: "601" } }), where)?.user).toBe("601")
    expect(discordPress(interaction("roster_approval_always:ap-0123abcd"), where)).toBeUndefined()
    expect(discordPress(interaction("roster_approval_deny:../x"), where)).toBeUndefined()
    expect(discordPress({ ...interaction("roster_approval_deny:ap-0123abcd"), type: 2 }, where)).toBeUndefined()
  })

  it.live("a second decision finds the request taken: the first one stands", () =>
    Effect.gen(function*() {
      const approvals = makeApprovals()
      const seen: Array<string> = []
      const held = yield* Effect.fork(approvals.ask(
        { run_id: RUN, worker: "alice", subject: "org/alice", method: "CONNECT", host: "198.51.100.9", port: 443, path: null },
        Date.now(), 60_000, { perRun: 8, total: 64 }, Effect.never, (view) => Effect.sync(() => void seen.push(view.id))
      ))
      let id = ""
      while (id === "") id = (yield* approvals.list)[0]?.id ?? (yield* Effect.sleep("5 millis").pipe(Effect.as("")))
      expect(Option.isSome(yield* approvals.decide(id, { decision: "deny", by: "root (cli)" }))).toBe(true)
      expect(Option.isNone(yield* approvals.decide(id, { decision: "run", by: "slack:U0ANNA" }))).toBe(true)
      const end = yield* Fiber.join(held)
      expect(end).toEqual({ _tag: "decided", decided: { decision: "deny", by: "root (cli)" } })
      expect(seen).toEqual([id])
      // The losing "run" left nothing behind for the run.
      expect(approvals.allowedForRun(RUN, "198.51.100.9", 443)).toBe(false)
    }))
})

describe("a held request's card says the box's words as words", () => {
  it.live("a path with Slack's mention markup reaches the thread escaped, in the text and the blocks", () =>
    Effect.gen(function*() {
      const slack = yield* Effect.acquireRelease(Effect.promise(() => startSlackStandIn({ bot: BOT, app: APP })), (s) => Effect.promise(() => s.close()))
      const { layer } = deployment(["[[chat]]", `provider = "slack"`, `connection = "slack"`, `api_url = "${slack.apiUrl}"`, "[[chat.channel]]", `id = "C0ALICE"`, `worker = "alice"`].join("\n"))
      const view = {
        id: "ap-0123abcd", run_id: RUN, worker: "alice", subject: "org/alice", method: "GET", host: "example.test", port: 443, path: "/<!channel>&x",
        asked_at: "2026-12-05T10:00:00.000Z", expires_at: "2026-12-05T10:02:00.000Z"
      }
      const card = yield* postApprovalCard({ provider: "slack", channel: "C0ALICE", thread: "1.5" }, view).pipe(Effect.provide(layer))
      const post = slack.posts.at(-1)!
      expect(post.text).toContain("GET example.test:443/&lt;!channel&gt;&amp;x")
      expect(post.text).not.toContain("<!channel>")
      expect(JSON.stringify(post.blocks)).not.toContain("<!channel>")
      yield* closeApprovalCard(card!, "[roster] GET example.test:443/<!channel> for alice: denied (403) by slack:U1.").pipe(Effect.provide(layer))
      expect(slack.updates.at(-1)?.text).toBe("[roster] GET example.test:443/&lt;!channel&gt; for alice: denied (403) by slack:U1.")
    }).pipe(Effect.scoped))
})
