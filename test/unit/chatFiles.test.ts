import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Either } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { admit } from "../../src/chat/admit.js"
import { discordEvent } from "../../src/chat/discordListener.js"
import { fetchChatFile } from "../../src/chat/fetchFile.js"
import { slackEvent } from "../../src/chat/slackListener.js"
import { decodeToml } from "../../src/config/decode.js"
import { OrgSchema } from "../../src/config/schema.js"
import { safeFileName } from "../../src/contract/messageFile.js"
import { takeFiles } from "../../src/session/messageFiles.js"
import { compileTurn } from "../../src/session/turnContext.js"
import { Files } from "../../src/fs/Files.js"
import { type DiscordStandIn, startDiscordStandIn } from "../support/discordStandIn.js"
import { BOT_USER, type SlackStandIn, startSlackStandIn } from "../support/slackStandIn.js"

const BOT = "xoxb-files-REAL-bot-token"
const sha = (b: Buffer) => crypto.createHash("sha256").update(b).digest("hex")
const run = <A, E>(e: Effect.Effect<A, E, NodeContext.NodeContext>) => Effect.runPromise(e.pipe(Effect.provide(NodeContext.layer)))

describe("a chat message's files: read off the event, fetched host-side, named in the turn (Slack and Discord stand-ins)", () => {
  let slack: SlackStandIn
  let discord: DiscordStandIn
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-chat-files-"))
  beforeAll(async () => {
    slack = await startSlackStandIn({ bot: BOT, app: "xapp-x" })
    discord = await startDiscordStandIn("discord-token")
  })
  afterAll(async () => {
    await slack.close()
    await discord.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  const slackChat = () => ({ provider: "slack" as const, api_url: slack.apiUrl })

  it("Slack: the bot token fetches a file from Slack's own URL; no token gets the sign-in page, said as a missing scope", async () => {
    const bytes = crypto.randomBytes(300_000)
    slack.say({ channel: "C0TEAM", user: "U0ANNA", text: "x", files: [{ name: "a.bin", mimetype: "application/octet-stream", bytes }] })
    const { id, url } = slack.shared.at(-1)!
    const file = { id, name: "a.bin", type: "application/octet-stream", size: bytes.length, url }
    const dest = path.join(dir, "a.bin")
    expect(await run(fetchChatFile(slackChat(), Effect.succeed(BOT))(file, dest, 1_000_000))).toBe(bytes.length)
    expect(sha(fs.readFileSync(dest))).toBe(sha(bytes))
    expect(fs.statSync(dest).mode & 0o777).toBe(0o644)
    expect(slack.downloads.at(-1)).toEqual({ id, token: BOT })
    const wrong = await run(Effect.flip(fetchChatFile(slackChat(), Effect.succeed("xoxb-other"))(file, path.join(dir, "b.bin"), 1_000_000)))
    expect(wrong.message).toContain("give the app the files:read scope")
    expect(fs.existsSync(path.join(dir, "b.bin"))).toBe(false)
  })

  it("a file larger than file_max is given up as it streams (whatever size the service claimed), and a URL off the service's hosts is never asked", async () => {
    const bytes = crypto.randomBytes(200_000)
    slack.say({ channel: "C0TEAM", user: "U0ANNA", text: "x", files: [{ name: "liar.bin", mimetype: "application/octet-stream", bytes, size: 10 }] })
    const { url } = slack.shared.at(-1)!
    const before = slack.downloads.length
    const over = await run(Effect.flip(fetchChatFile(slackChat(), Effect.succeed(BOT))({ id: "F02", name: "liar.bin", type: "x", size: 10, url }, path.join(dir, "liar.bin"), 100_000)))
    expect(over.message).toContain("larger than [[chat]] file_max")
    expect(fs.existsSync(path.join(dir, "liar.bin"))).toBe(false)
    expect(slack.downloads.length).toBe(before + 1)
    // Another origin (an attacker's URL in a crafted event): refused before any request, so the token goes nowhere.
    const elsewhere = await run(Effect.flip(fetchChatFile(slackChat(), Effect.succeed(BOT))({ id: "F9", name: "x", type: "x", size: 1, url: "http://192.0.2.1:9/x" }, path.join(dir, "x"), 100)))
    expect(elsewhere.message).toBe("http://192.0.2.1:9 is not where slack serves files")
  })

  it("Discord: an attachment's signed URL is fetched without the bot token", async () => {
    const bytes = Buffer.from("notes from the thread\n")
    discord.say({ channel: "700000000000000001", user: "600000000000000001", text: "look", files: [{ name: "notes.txt", type: "text/plain", bytes }] })
    const raw = {
      id: "1", channel_id: "700000000000000001", content: "look", author: { id: "600000000000000001" },
      attachments: [{ id: "42", filename: "notes.txt", content_type: "text/plain", size: bytes.length, url: discord.attachmentUrls.at(-1) }]
    }
    const e = discordEvent(raw, "900000000000000001", { channel: "700000000000000001", thread: undefined })
    const file = e?.files?.[0]
    expect(file).toMatchObject({ name: "notes.txt", type: "text/plain", size: bytes.length })
    const dest = path.join(dir, "notes.txt")
    await run(fetchChatFile({ provider: "discord", api_url: discord.apiUrl }, Effect.fail("no token needed"))(file!, dest, 1000))
    expect(fs.readFileSync(dest, "utf8")).toBe("notes from the thread\n")
    expect(discord.downloads.at(-1)?.authorization).toBe("")
  })

  it("Slack's file_share event brings its files; a message of files alone is a turn", () => {
    const e = slackEvent({
      type: "message", subtype: "file_share", channel: "C0TEAM", user: "U0ANNA", text: `<@${BOT_USER}>`, ts: "1.2",
      files: [{ id: "F1", name: "r.pdf", mimetype: "application/pdf", size: 9, url_private_download: "https://files.slack.com/f/r.pdf" }, { id: "F2", mode: "external" }]
    }, BOT_USER)
    expect(e?.files).toEqual([{ id: "F1", name: "r.pdf", type: "application/pdf", size: 9, url: "https://files.slack.com/f/r.pdf" }])
    const org = Either.getOrThrow(decodeToml(OrgSchema, "org.toml", `[[chat]]\nprovider = "slack"\nconnection = "s"\n[[chat.channel]]\nid = "C0TEAM"\nworker = "alice"\nallow_users = ["U0ANNA"]\n`))
    const a = admit(org.chat[0]!, e!, BOT_USER)
    expect(a).toMatchObject({ _tag: "turn", text: "(no words: this message brings the files below)", files: e?.files })
    expect(org.chat[0]?.file_max).toBe(20)
  })

  it("files land in the run's inbox under safe names, at most ten; each is named in the turn with where it is or why it is not", async () => {
    const inbox = path.join(dir, "inbox")
    const files = [
      { id: "1", name: "../../etc/passwd", type: "text/plain", size: 5, url: "u" },
      { id: "2", name: "passwd", type: "text/plain", size: 5, url: "u" },
      { id: "3", name: "big.zip", type: "application/zip", size: 5_000_000, url: "u" },
      ...Array.from({ length: 10 }, (_, i) => ({ id: `x${i}`, name: `f${i}.txt`, type: "text/plain", size: 1, url: "u" }))
    ]
    const fetched: Array<string> = []
    const notes = await run(takeFiles(files, "1733.000100", inbox, (f, dest) =>
      Effect.sync(() => {
        fetched.push(dest)
        fs.writeFileSync(dest, f.id)
        return f.size
      }), 4 * 1024 * 1024))
    expect(notes[0]).toEqual({ name: "../../etc/passwd", type: "text/plain", size: 5, path: "/pihome/inbox/files/1733.000100/passwd" })
    expect(notes[1]?.path).toBe("/pihome/inbox/files/1733.000100/passwd (2)")
    expect(notes[2]).toEqual({ name: "big.zip", type: "application/zip", size: 5_000_000, skipped: "larger than [[chat]] file_max (4 MB)" })
    expect(notes.slice(10).map((n) => n.skipped)).toEqual(["a message brings at most 10 files", "a message brings at most 10 files", "a message brings at most 10 files"])
    expect(fetched.every((f) => f.startsWith(path.join(inbox, "files", "1733.000100") + path.sep))).toBe(true)
    expect(safeFileName(".hidden")).toBe("hidden")
    expect(safeFileName("a;rm -rf $HOME`x`.sh")).toBe("a_rm -rf _HOME_x_.sh")
    const input = await Effect.runPromise(compileTurn({ text: "see", author: "U0ANNA", provider: "slack", messageId: "1.2", fileNotes: notes.slice(1, 3) }, 2, path.join(dir, "turns.jsonl")).pipe(
      Effect.provide(Files.layer), Effect.provide(NodeContext.layer)))
    expect(input).toContain("Files attached to this message (read-only in your box):\n- passwd (text/plain, 5 bytes): /pihome/inbox/files/1733.000100/passwd (2)\n" +
      "- big.zip (application/zip, 5,000,000 bytes): not fetched — larger than [[chat]] file_max (4 MB)")
  })
})

