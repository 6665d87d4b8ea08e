import { it as eff } from "@effect/vitest"
import { Effect, Either, Exit, Layer, Ref, Schema, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { admit, type ChatEvent, takeTurn, withoutMention } from "../../src/chat/admit.js"
import { handleUnsent } from "../../src/chatHub/say.js"
import { ChatClients } from "../../src/chat/ChatClients.js"
import type { ListenerSink } from "../../src/chat/sink.js"
import { discordListener } from "../../src/chat/discordListener.js"
import { slackEvent, slackListener } from "../../src/chat/slackListener.js"
import { decodeToml } from "../../src/config/decode.js"
import { Chat, OrgSchema } from "../../src/config/schema.js"
import { postChat } from "../../src/chat/postChat.js"
import { CHAT_MESSAGE_MAX, splitMessage } from "../../src/chat/split.js"
import { initialTurnState, step, type TurnState } from "../../src/session/turns.js"
import { type DiscordStandIn, startDiscordStandIn } from "../support/discordStandIn.js"
import { BOT_USER, type SlackStandIn, startSlackStandIn } from "../support/slackStandIn.js"
import { tempPaths, unitLayer, writeFixture, until } from "../support/harness.js"

const BOT = "xoxb-unit-bot-token-0001"
const APP = "xapp-unit-app-token-0001"
const chatRule = (extra: Record<string, unknown> = {}) =>
  Schema.decodeUnknownSync(Chat)({
    provider: "slack", connection: "slack",
    channel: [{ id: "C0TEAM", worker: "alice", allow_users: ["U0ANNA"] }],
    ...extra
  })
const event = (e: Partial<ChatEvent>): ChatEvent => ({
  provider: "slack", channel: "C0TEAM", id: "1.1", user: "U0ANNA", text: `<@${BOT_USER}> hello`, mentionsBot: true, fromBot: false, ...e
})


describe("[[chat]] in org.toml", () => {
  it("decodes with its defaults, and a channel mapped twice is refused naming both", () => {
    const org = Either.getOrThrow(decodeToml(OrgSchema, "org.toml", [
      "[[chat]]", `provider = "slack"`, `connection = "slack"`, `api_url = "http://127.0.0.1:9/api/"`,
      "[[chat.channel]]", `id = "C0TEAM"`, `worker = "alice"`, `allow_users = ["U0ANNA"]`
    ].join("\n")))
    expect(org.chat[0]).toMatchObject({ respond: "mention", unsent: "notice", message_max: 4000, turns_per_min: 6 })
    expect(org.chat[0]?.channel[0]).toMatchObject({ id: "C0TEAM", idle_min: 30 })
    const twice = decodeToml(OrgSchema, "org.toml", [
      "[[chat]]", `provider = "slack"`, `connection = "slack"`,
      "[[chat.channel]]", `id = "C0TEAM"`, `worker = "alice"`,
      "[[chat]]", `provider = "slack"`, `connection = "slack-two"`,
      "[[chat.channel]]", `id = "c0team"`, `worker = "bob"`
    ].join("\n"))
    expect(Either.isLeft(twice) && twice.left.message).toMatch(/chat\[1\]\.channel\[0\]\.id: slack channel c0team is mapped twice \(chat\[0\]\.channel\[0\] and chat\[1\]\.channel\[0\]\)/)
    const bad = decodeToml(OrgSchema, "org.toml", ["[[chat]]", `provider = "irc"`, `connection = "x"`, `api_url = "ftp://x"`, `respnd = "all"`].join("\n"))
    expect(Either.isLeft(bad) && bad.left.message).toMatch(/chat\[0\]\.provider/)
    expect(Either.isLeft(bad) && bad.left.message).toMatch(/chat\[0\]\.respnd: unknown key/)
  })
})

describe("the chat gate", () => {
  it("a mapped channel, a person in allow_users, a mention: a turn without the mention", () => {
    expect(admit(chatRule(), event({}), BOT_USER)).toMatchObject({ _tag: "turn", text: "hello", cut: false })
    expect(withoutMention(`hi <@${BOT_USER}|roster> there`, BOT_USER)).toBe("hi there")
  })
  it("strangers are counted, bots and unmapped channels ignored, respond = mention needs the mention", () => {
    expect(admit(chatRule(), event({ user: "U0MALLORY" }), BOT_USER)._tag).toBe("stranger")
    expect(admit(chatRule(), event({ channel: "C0OTHER" }), BOT_USER)).toEqual({ _tag: "ignore", why: "unmapped" })
    expect(admit(chatRule(), event({ fromBot: true }), BOT_USER)).toEqual({ _tag: "ignore", why: "bot" })
    expect(admit(chatRule(), event({ user: BOT_USER }), BOT_USER)).toEqual({ _tag: "ignore", why: "bot" })
    expect(admit(chatRule(), event({ mentionsBot: false, text: "hello" }), BOT_USER)).toEqual({ _tag: "ignore", why: "no-mention" })
    expect(admit(chatRule({ respond: "all" }), event({ mentionsBot: false, text: "hello" }), BOT_USER)._tag).toBe("turn")
    expect(admit(chatRule(), event({ text: `<@${BOT_USER}>` }), BOT_USER)).toEqual({ _tag: "ignore", why: "empty" })
  })
  it("a message over message_max is cut there", () => {
    const a = admit(chatRule({ message_max: 10 }), event({ text: `<@${BOT_USER}> ${"x".repeat(50)}` }), BOT_USER)
    expect(a).toMatchObject({ _tag: "turn", cut: true })
    expect(a._tag === "turn" && a.text.length).toBe(10)
  })
  it("turns_per_min: a sliding minute", () => {
    let starts: ReadonlyArray<number> = []
    const ok: Array<boolean> = []
    for (const t of [0, 1000, 2000, 3000]) {
      const r = takeTurn(starts, t, 3)
      starts = r.starts
      ok.push(r.ok)
    }
    expect(ok).toEqual([true, true, true, false])
    expect(takeTurn(starts, 60_001, 3).ok).toBe(true)
  })
  it("Slack events: edits and joins are not words; a bot's message is marked", () => {
    expect(slackEvent({ type: "message", subtype: "message_changed", channel: "C", ts: "1" }, BOT_USER)).toBeUndefined()
    expect(slackEvent({ type: "message", channel: "C", ts: "1", bot_id: "B1", text: "x" }, BOT_USER)?.fromBot).toBe(true)
    expect(slackEvent({ type: "message", channel: "C", ts: "2", thread_ts: "1", user: "U", text: `<@${BOT_USER}> x` }, BOT_USER))
      .toMatchObject({ thread: "1", id: "2", mentionsBot: true, fromBot: false })
  })
})

describe("splitting an answer for the service", () => {
  it("every part fits, no text is lost, and a code block cut in two is closed and reopened", () => {
    const code = Array.from({ length: 200 }, (_, i) => `const line${i} = ${i} // ${"y".repeat(20)}`).join("\n")
    const text = `Here is the file:\n\`\`\`ts\n${code}\n\`\`\`\nThat is all.`
    const parts = splitMessage(text, CHAT_MESSAGE_MAX.discord)
    expect(parts.length).toBeGreaterThan(3)
    for (const p of parts) {
      expect(p.length).toBeLessThanOrEqual(CHAT_MESSAGE_MAX.discord)
      // Every part has its fences paired, so each renders as code where the whole did.
      expect((p.match(/^```/gm) ?? []).length % 2).toBe(0)
    }
    expect(parts[1]?.startsWith("```ts\n")).toBe(true)
    const rejoined = parts.join("\n").replace(/\n```\n```ts/g, "")
    expect(rejoined).toBe(text)
    expect(splitMessage("x".repeat(9000), 3900).every((p) => p.length <= 3900)).toBe(true)
    expect(splitMessage("x".repeat(9000), 3900).join("")).toBe("x".repeat(9000))
    expect(splitMessage("short", 3900)).toEqual(["short"])
  })
})

describe("a chat turn that answers without sending", () => {
  it("is reported with its text, and a turn that sent is not", () => {
    const run = (events: ReadonlyArray<Parameters<typeof step>[1]>) => {
      let s: TurnState = initialTurnState
      const out: Array<unknown> = []
      for (const e of events) {
        const [next, o] = step(s, e, "chat-session")
        s = next
        out.push(...o)
      }
      return out
    }
    const msg = { _tag: "msg", message: { text: "hi", author: "U0ANNA", provider: "slack", messageId: "1" } } as const
    const unsent = run([msg, { _tag: "prompted" }, { _tag: "event", event: { kind: "agent-start" } }, { _tag: "event", event: { kind: "assistant", text: "the answer", stopReason: null, errorMessage: null } }, { _tag: "event", event: { kind: "settled" } }])
    expect(unsent).toContainEqual({ _tag: "unsent", turn: 1, text: "the answer" })
    const sent = run([msg, { _tag: "prompted" }, { _tag: "event", event: { kind: "agent-start" } }, { _tag: "event", event: { kind: "tool-start", name: "slack_send", args: { text: "x" } } }, { _tag: "event", event: { kind: "tool-end", name: "slack_send", output: "posted", isError: false } }, { _tag: "event", event: { kind: "assistant", text: "done", stopReason: null, errorMessage: null } }, { _tag: "event", event: { kind: "settled" } }])
    expect(sent.some((o) => (o as { _tag: string })._tag === "unsent")).toBe(false)
  })
})

describe("the real Slack SDK against the Slack stand-in", () => {
  let slack: SlackStandIn | undefined
  afterEach(async () => {
    await slack?.close()
    slack = undefined
  })

  const sinkInto = (heard: Ref.Ref<ReadonlyArray<ChatEvent>>, states: Ref.Ref<ReadonlyArray<string>>): ListenerSink => ({
    event: (e) => Ref.update(heard, (h) => [...h, e]),
    state: (s, d) => Ref.update(states, (x) => [...x, d ? `${s}: ${d}` : s])
  })

  eff.live("Socket Mode: events are acked and heard once each; after the socket drops it reconnects and hears again", () =>
    Effect.gen(function*() {
      const s = yield* Effect.promise(() => startSlackStandIn({ bot: BOT, app: APP }))
      slack = s
      const heard = yield* Ref.make<ReadonlyArray<ChatEvent>>([])
      const states = yield* Ref.make<ReadonlyArray<string>>([])
      const scope = yield* Scope.make()
      const readTokens = Effect.succeed({ type: "slack" as const, bot_token: BOT, app_token: APP })
      yield* Effect.forkIn(slackListener(chatRule({ api_url: s.apiUrl }), readTokens, sinkInto(heard, states)).pipe(Scope.extend(scope)), scope)
      yield* until(Ref.get(states), (x) => x.includes("connected"), "the listener connects")
      const first = s.say({ channel: "C0TEAM", user: "U0ANNA", text: `<@${BOT_USER}> one` })
      yield* until(Ref.get(heard), (h) => h.length === 1, "the first message is heard")
      // The SDK acks beside handing the event on: the ack may reach the stand-in just after.
      expect(yield* until(Effect.sync(() => s.acks.size), (n) => n >= 1, "the first message is acked")).toBe(1)
      s.drop()
      yield* until(Effect.sync(() => s.connections()), (n) => n >= 2 && s.connected(), "the listener reconnects")
      s.say({ channel: "C0TEAM", user: "U0ANNA", text: `<@${BOT_USER}> two`, thread_ts: first })
      const h = yield* until(Ref.get(heard), (x) => x.length === 2, "the second message is heard after the reconnect")
      expect(h.map((e) => [e.text, e.thread])).toEqual([[`<@${BOT_USER}> one`, undefined], [`<@${BOT_USER}> two`, first]])
      yield* Scope.close(scope, Exit.void)
      // Only the two tokens' own calls: the bot token for auth.test, the app token to open the socket.
      expect(new Set(s.calls.map((c) => `${c.method}:${c.token}`))).toEqual(new Set([`auth.test:${BOT}`, `apps.connections.open:${APP}`]))
    }))

  eff.live("a refused app token is said in the status with the fix, and retried", () =>
    Effect.gen(function*() {
      const s = yield* Effect.promise(() => startSlackStandIn({ bot: BOT, app: APP }))
      slack = s
      const heard = yield* Ref.make<ReadonlyArray<ChatEvent>>([])
      const states = yield* Ref.make<ReadonlyArray<string>>([])
      const scope = yield* Scope.make()
      const readTokens = Effect.succeed({ type: "slack" as const, bot_token: BOT, app_token: "xapp-wrong" })
      yield* Effect.forkIn(slackListener(chatRule({ api_url: s.apiUrl }), readTokens, sinkInto(heard, states)).pipe(Scope.extend(scope)), scope)
      const seen = yield* until(Ref.get(states), (x) => x.filter((l) => l.startsWith("failing")).length >= 2, "the start fails and is tried again")
      expect(seen.find((l) => l.startsWith("failing"))).toMatch(/invalid_auth.*roster connection add slack/)
      yield* Scope.close(scope, Exit.void)
    }))

  /** The Slack stand-in, and a deployment whose org.toml maps its C0TEAM to alice with the stand-in's tokens. */
  const mappedSlack = Effect.gen(function*() {
    const s = yield* Effect.promise(() => startSlackStandIn({ bot: BOT, app: APP }))
    slack = s
    const paths = tempPaths()
    writeFixture({
      paths,
      orgToml: ["[[chat]]", `provider = "slack"`, `connection = "slack"`, `api_url = "${s.apiUrl}"`, "[[chat.channel]]", `id = "C0TEAM"`, `worker = "alice"`].join("\n")
    })
    return { s, layer: unitLayer(paths, { vault: { slack: { type: "slack", bot_token: BOT, app_token: APP } } }) }
  })

  eff.live("unsent = notice | post | drop: a notice with the start of the answer, the answer itself, or nothing", () =>
    Effect.gen(function*() {
      const { layer, s } = yield* mappedSlack
      const place = { provider: "slack" as const, channel: "C0TEAM", thread: "9.9" }
      const answer = `The answer is ${"long ".repeat(100)}`
      const clients = yield* ChatClients.pipe(Effect.provide(Layer.provide(ChatClients.layer, layer)))
      expect(yield* handleUnsent(clients, chatRule({ unsent: "notice" }), "alice", place, answer)).toEqual({ handled: "notice", posted: true })
      expect(s.posts[0]?.text).toContain("[roster] alice answered without sending it here; its first 300 characters:\n&gt; The answer is long")
      expect(s.posts[0]?.text.length).toBeLessThan(420)
      expect(yield* handleUnsent(clients, chatRule({ unsent: "post" }), "alice", place, answer)).toEqual({ handled: "post", posted: true })
      expect(s.posts[1]).toMatchObject({ thread_ts: "9.9", text: answer })
      expect(yield* handleUnsent(clients, chatRule({ unsent: "drop" }), "alice", place, answer)).toEqual({ handled: "drop", posted: true })
      expect(s.posts).toHaveLength(2)
      // Slack gone: the post fails, and says so (the message is then marked unanswered, not answered).
      yield* Effect.promise(() => s.close())
      expect(yield* handleUnsent(clients, chatRule({ unsent: "post" }), "alice", place, answer)).toEqual({ handled: "post", posted: false })
    }))

  eff.live("postChat: into the thread, Slack's markup escaped, a long answer in parts, only a mapped channel", () =>
    Effect.gen(function*() {
      const { layer, s } = yield* mappedSlack
      yield* postChat({ provider: "slack", channel: "C0TEAM", thread: "1.5" }, "<!channel> & hi").pipe(Effect.provide(layer))
      expect(s.posts[0]).toMatchObject({ channel: "C0TEAM", thread_ts: "1.5", text: "&lt;!channel&gt; &amp; hi", token: BOT })
      yield* postChat({ provider: "slack", channel: "C0TEAM" }, "z".repeat(8000)).pipe(Effect.provide(layer))
      expect(s.posts.length).toBe(4)
      const other = yield* postChat({ provider: "slack", channel: "C0ELSEWHERE" }, "x").pipe(Effect.provide(layer), Effect.flip)
      expect(other.message).toMatch(/maps no \[\[chat\.channel\]\] with id = "C0ELSEWHERE"/)
      expect(s.posts.length).toBe(4)
    }))
})

describe("the real Discord clients (@discordjs/ws, @discordjs/rest) against the Discord stand-in", () => {
  const TOKEN = "discord-unit-bot-token-0001"
  let discord: DiscordStandIn | undefined
  afterEach(async () => {
    await discord?.close()
    discord = undefined
  })
  const rule = (apiUrl: string) => Schema.decodeUnknownSync(Chat)({
    provider: "discord", connection: "discord", api_url: apiUrl,
    channel: [{ id: "700000000000000001", worker: "alice", allow_users: ["600000000000000001"] }]
  })

  eff.live("the gateway: identified, messages heard (a thread's under its channel), heard again after the socket drops", () =>
    Effect.gen(function*() {
      const s = yield* Effect.promise(() => startDiscordStandIn(TOKEN))
      discord = s
      const heard = yield* Ref.make<ReadonlyArray<ChatEvent>>([])
      const states = yield* Ref.make<ReadonlyArray<string>>([])
      const scope = yield* Scope.make()
      const sink: ListenerSink = {
        event: (e) => Ref.update(heard, (h) => [...h, e]),
        state: (st, d) => Ref.update(states, (x) => [...x, d ? `${st}: ${d}` : st])
      }
      const readTokens = Effect.succeed({ type: "discord" as const, bot_token: TOKEN })
      yield* Effect.forkIn(discordListener(rule(s.apiUrl), readTokens, sink).pipe(Scope.extend(scope)), scope)
      yield* until(Ref.get(states), (x) => x.includes("connected"), "the listener connects")
      const first = s.say({ channel: "700000000000000001", user: "600000000000000001", text: "one" })
      const thread = s.thread("700000000000000001")
      s.say({ channel: thread, user: "600000000000000001", text: "in a thread" })
      const h = yield* until(Ref.get(heard), (x) => x.length === 2, "both messages are heard")
      expect(h[0]).toMatchObject({ provider: "discord", channel: "700000000000000001", id: first, mentionsBot: true, thread: undefined })
      expect(h[1]).toMatchObject({ channel: "700000000000000001", thread })
      s.drop()
      yield* until(Effect.sync(() => s.identified()), (n) => n >= 2 && s.connected(), "the listener identifies again")
      s.say({ channel: "700000000000000001", user: "600000000000000001", text: "after" })
      yield* until(Ref.get(heard), (x) => x.length === 3, "a message after the reconnect is heard")
      yield* Scope.close(scope, Exit.void)
    }))

  eff.live("postChat to Discord: a reply to the message outside a thread, into a thread when in one, no mention pings, parts of 2000", () =>
    Effect.gen(function*() {
      const s = yield* Effect.promise(() => startDiscordStandIn(TOKEN))
      discord = s
      const paths = tempPaths()
      writeFixture({
        paths,
        orgToml: ["[[chat]]", `provider = "discord"`, `connection = "discord"`, `api_url = "${s.apiUrl}"`, "[[chat.channel]]", `id = "700000000000000001"`, `worker = "alice"`].join("\n")
      })
      const layer = unitLayer(paths, { vault: { discord: { type: "discord", bot_token: TOKEN } } })
      yield* postChat({ provider: "discord", channel: "700000000000000001", message: "42" }, "@everyone hi").pipe(Effect.provide(layer))
      expect(s.posts[0]).toMatchObject({ channel: "700000000000000001", content: "@everyone hi", reply_to: "42", allowed_mentions: { parse: [] } })
      yield* postChat({ provider: "discord", channel: "700000000000000001", thread: "55", message: "43" }, "x".repeat(4500)).pipe(Effect.provide(layer))
      expect(s.posts.slice(1).map((p) => [p.channel, p.reply_to, p.content.length <= 2000])).toEqual([["55", undefined, true], ["55", undefined, true], ["55", undefined, true]])
    }))
})
