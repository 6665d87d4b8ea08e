import { describe, expect, it } from "vitest"
import { readEvent, worthReading } from "../../src/contract/piEvents.js"

describe("reading pi's events", () => {
  it("skips a line of another type without parsing it, and still reads the events roster acts on", () => {
    expect(worthReading(`{"type":"message_update","delta":"…"}`)).toBe(false)
    expect(worthReading(`{"type":"noise","pad":"x"}`)).toBe(false)
    expect(worthReading(`{"type":"message_end","message":{"role":"assistant","content":[]}}`)).toBe(true)
    expect(worthReading(`{"type":"roster_preflight","ok":true,"check":"all","detail":"d"}`)).toBe(true)
    // Type not first: read the slow way rather than guess.
    expect(worthReading(`{"message":{"role":"assistant"},"type":"message_end"}`)).toBe(true)
    expect(readEvent(`{"message":{"role":"assistant","content":[{"type":"text","text":"hi"}]},"type":"message_end"}`)).toMatchObject({ kind: "assistant", text: "hi" })
    expect(readEvent(`{"type":"noise","message":{"role":"assistant"}}`)).toEqual({ kind: "other" })
  })
})
