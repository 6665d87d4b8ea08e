import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { ChatClients } from "../../src/chat/ChatClients.js"
import { turnMarks } from "../../src/chatHub/turnMarks.js"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import type { SessionMessage } from "../../src/session/turnContext.js"
import { startDiscordStandIn } from "../support/discordStandIn.js"
import { startSlackStandIn } from "../support/slackStandIn.js"
import { eventually, tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const BOT = "xoxb-unit-bot-token-0003"
const APP = "xapp-unit-app-token-0003"
const DISCORD = "discord-unit-bot-token-0003"
const DISCORD_CHANNEL = "700000000000000001"

const deployment = (chat: string) => {
  const paths = tempPaths()
  writeFixture({ paths, orgToml: chat })
  return unitLayer(paths, { vault: { slack: { type: "slack", bot_token: BOT, app_token: APP }, discord: { type: "discord", bot_token: DISCORD } } })
}

/** The chat services over the deployment's org.toml and vault, as the daemon builds them. */
const clients = ChatClients.pipe(Effect.provide(ChatClients.layer))

/** The `[[chat]]` of the deployment's org.toml, as the hub builds its marks from. */
const firstChat = Effect.flatMap(OrgConfig, (c) => c.snapshot).pipe(Effect.map((org) => org.chat[0]!))

const slackMessage = (ts: string): SessionMessage => ({ text: "hi", author: "U0ANNA", provider: "slack", messageId: ts, place: { provider: "slack", channel: "C0ALICE", thread: ts } })

describe("a chat message shows its turn (the real SDKs against the Slack and Discord stand-ins)", () => {
  it.live("Slack: eyes when its turn starts, then a check mark when it was answered, a warning when it was not; in order", () =>
    Effect.gen(function*() {
      const slack = yield* Effect.acquireRelease(Effect.promise(() => startSlackStandIn({ bot: BOT, app: APP })), (s) => Effect.promise(() => s.close()))
      yield* Effect.gen(function*() {
        const marks = yield* turnMarks(yield* firstChat, yield* clients)
        const answered = slackMessage("1700000000.000001")
        const failed = slackMessage("1700000000.000002")
        yield* marks.start(answered)
        yield* marks.end({ delivered: true, failed: false, message: answered })
        yield* marks.start(failed)
        yield* marks.end({ delivered: true, failed: true, message: failed })
        yield* eventually(Effect.sync(() => slack.reactions.length === 6), "six reaction changes")
        expect(slack.reactions).toEqual([
          "+eyes C0ALICE/1700000000.000001", "-eyes C0ALICE/1700000000.000001", "+white_check_mark C0ALICE/1700000000.000001",
          "+eyes C0ALICE/1700000000.000002", "-eyes C0ALICE/1700000000.000002", "+warning C0ALICE/1700000000.000002"
        ])
        expect(slack.calls.filter((c) => c.method.startsWith("reactions.")).every((c) => c.token === BOT)).toBe(true)
      }).pipe(Effect.scoped, Effect.provide(deployment([
        "[[chat]]", `provider = "slack"`, `connection = "slack"`, `api_url = "${slack.apiUrl}"`, "[[chat.channel]]", `id = "C0ALICE"`, `worker = "alice"`
      ].join("\n"))))
    }).pipe(Effect.scoped))

  it.live("Discord: its emoji on the message and the typing indicator while the turn runs; a turn that delivered nothing is marked so", () =>
    Effect.gen(function*() {
      const discord = yield* Effect.acquireRelease(Effect.promise(() => startDiscordStandIn(DISCORD)), (d) => Effect.promise(() => d.close()))
      yield* Effect.gen(function*() {
        const marks = yield* turnMarks(yield* firstChat, yield* clients)
        const m: SessionMessage = { text: "hi", author: "600000000000000001", provider: "discord", messageId: "800000000000000001", place: { provider: "discord", channel: DISCORD_CHANNEL, message: "800000000000000001" } }
        yield* marks.start(m)
        yield* eventually(Effect.sync(() => discord.marks.includes(`typing ${DISCORD_CHANNEL}`)), "the typing indicator")
        yield* marks.end({ delivered: false, failed: false, message: m })
        yield* eventually(Effect.sync(() => discord.marks.length >= 4), "the turn's end marks")
        expect(discord.marks.filter((x) => !x.startsWith("typing"))).toEqual([
          `+👀 ${DISCORD_CHANNEL}/800000000000000001`, `-👀 ${DISCORD_CHANNEL}/800000000000000001`, `+⚠️ ${DISCORD_CHANNEL}/800000000000000001`
        ])
      }).pipe(Effect.scoped, Effect.provide(deployment([
        "[[chat]]", `provider = "discord"`, `connection = "discord"`, `api_url = "${discord.apiUrl}"`, "[[chat.channel]]", `id = "${DISCORD_CHANNEL}"`, `worker = "alice"`
      ].join("\n"))))
    }).pipe(Effect.scoped))

  it.live("with reactions = false a turn leaves no mark", () =>
    Effect.gen(function*() {
      const slack = yield* Effect.acquireRelease(Effect.promise(() => startSlackStandIn({ bot: BOT, app: APP })), (s) => Effect.promise(() => s.close()))
      yield* Effect.gen(function*() {
        const marks = yield* turnMarks(yield* firstChat, yield* clients)
        const m = slackMessage("1700000000.000003")
        yield* marks.start(m)
        yield* marks.end({ delivered: true, failed: false, message: m })
        yield* Effect.sleep("300 millis")
        expect(slack.calls.filter((c) => c.method.startsWith("reactions."))).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(deployment([
        "[[chat]]", `provider = "slack"`, `connection = "slack"`, `api_url = "${slack.apiUrl}"`, "reactions = false", "[[chat.channel]]", `id = "C0ALICE"`, `worker = "alice"`
      ].join("\n"))))
    }).pipe(Effect.scoped))
})
