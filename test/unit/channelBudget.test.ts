import { describe, expect, it } from "vitest"
import { endedNotice } from "../../src/chatHub/notices.js"
import { chargedChannel, chatChannelKey, parseChatChannelKey } from "../../src/contract/origin.js"
import { budgetText, type Limits, overAtStart } from "../../src/gateway/metering/meter.js"
import { type LedgerEntry, makeSums } from "../../src/spend/SpendLedger.js"

const entry = (o: Partial<LedgerEntry>): LedgerEntry => ({
  time: "2026-12-05T10:00:00.000Z", run_id: "2026-12-05-10-00-00-000000a1", worker: "alice", model: "m",
  input: 1, output: 1, cache_read: 0, cache_write: 0, usd: 1, priced: true, ...o
})

describe("a chat channel's budget (budget_usd_day)", () => {
  it("a run is charged to the channel of its chat session, or of the session that queued it", () => {
    expect(chargedChannel({ _tag: "chat", provider: "slack", channel: "C0TEAM", thread: "1.2", author: "U1" })).toBe("slack:c0team")
    expect(chargedChannel({ _tag: "queue", task_id: "t-1", queued_by: { by: "self", run_id: null, task_id: null, chat_channel: "discord:42" } })).toBe("discord:42")
    expect(chargedChannel({ _tag: "queue", task_id: "t-1", queued_by: { by: "person", run_id: null, task_id: null } })).toBeUndefined()
    expect(chargedChannel({ _tag: "person", via: "cli" })).toBeUndefined()
    expect(chatChannelKey({ provider: "slack", channel: "C0TEAM" })).toBe("slack:c0team")
    expect(parseChatChannelKey("slack:C0TEAM")).toEqual({ provider: "slack", channel: "C0TEAM", key: "slack:c0team" })
    expect(parseChatChannelKey("C0TEAM")).toBeUndefined()
    expect(parseChatChannelKey("slack:a/b")).toBeUndefined()
  })

  it("the ledger sums a UTC day's spending by channel, apart from the worker's and the org's", () => {
    const sums = makeSums()
    sums.add(entry({ usd: 1, chat_channel: "slack:c0team" }))
    sums.add(entry({ usd: 2, worker: "bob", run_id: "2026-12-05-10-00-00-000000b1", chat_channel: "slack:c0team" }))
    sums.add(entry({ usd: 4 }))
    sums.add(entry({ usd: 8, time: "2026-12-04T23:59:59.000Z", chat_channel: "slack:c0team" }))
    expect(sums.spent("alice", "2026-12-05-10-00-00-000000a1", "2026-12-05T12:00:00.000Z", "slack:c0team")).toEqual({
      runUsd: 13, runTokens: 6, workerDayUsd: 5, orgDayUsd: 7, channelDayUsd: 3
    })
    expect(sums.spent("alice", "x", "2026-12-05T12:00:00.000Z").channelDayUsd).toBe(0)
    expect(sums.spent("alice", "x", "2026-12-05T12:00:00.000Z", "slack:other").channelDayUsd).toBe(0)
  })

  it("a run of a channel past its budget is over, in words that name the channel, the key and when it starts again", () => {
    const limits: Limits = { on_cross: "cut", channel_usd_day: { usd: 2, provider: "slack", id: "C0TEAM" } }
    const spent = { runUsd: 0, runTokens: 0, workerDayUsd: 0, orgDayUsd: 0 }
    const at = (channelDayUsd: number) => overAtStart({ limits, spent: { ...spent, channelDayUsd }, startedAt: "2026-12-05T12:00:00.000Z" })
    expect(at(1.99)).toBeUndefined()
    const over = at(2)
    expect(over).toMatchObject({ which: "budget_usd_day", limit: 2, spent: 2 })
    const text = budgetText(over!, "alice")
    // "out of budget" first: pi reads it as final and does not retry.
    expect(text).toBe(
      "out of budget: slack channel C0TEAM may spend $2.0000 (estimated) a day and $2.0000 (estimated) is spent today — this run is stopped. " +
        "The channel's spending starts again at 00:00 UTC; to allow more, raise budget_usd_day of its [[chat.channel]] in org.toml"
    )
    // A worker's own budget is still its own.
    expect(overAtStart({ limits: { ...limits, worker_daily_usd: 1 }, spent: { ...spent, workerDayUsd: 1, channelDayUsd: 0 }, startedAt: "x" })?.which).toBe("worker_daily_usd")
  })

  it("a session the gateway stopped tells its thread why, in the gateway's words", () => {
    expect(endedNotice("alice", "r1", "box-died", 30, 240, { detail: "out of budget: slack channel C0TEAM may spend …" }))
      .toBe("[roster] alice's session r1 was stopped: out of budget: slack channel C0TEAM may spend …")
    expect(endedNotice("alice", "r1", "idle", 30, 240)).toBe("[roster] alice's session r1 ended: no message for 30 min. A new message starts a new one.")
  })
})
