import { describe, expect, it } from "vitest"
import { SENTINEL } from "../../src/contract/constants.js"
import { sentinelJwt } from "../../src/box/sentinel.js"
import { sentinelWarning } from "../../src/gateway/base/runWarning.js"
import { bodyScanner, redactMarks, sentinelPlaces } from "../../src/gateway/secrets/sentinelScan.js"

describe("a sentinel leaving the gateway is found where it is", () => {
  it("names each header and the query (encoded too), and nothing when the request is clean", () => {
    expect(sentinelPlaces({ "x-other": SENTINEL, cookie: `a=1; k=${SENTINEL}`, accept: "*/*" }, `/v1?key=${encodeURIComponent(SENTINEL)}`))
      .toEqual(["header:x-other", "header:cookie", "query"])
    expect(sentinelPlaces({ authorization: `Bearer ${sentinelJwt(Date.now())}` }, "/v1")).toEqual(["header:authorization"])
    expect(sentinelPlaces({ "x-api-key": "sk-ant-real", accept: "*/*" }, "/v1?x=1")).toEqual([])
  })

  it("finds one in a body however it is cut, and never in a clean one", () => {
    const text = `{"note":"${SENTINEL}"}`
    for (let cut = 1; cut < text.length; cut++) {
      const scan = bodyScanner()
      scan.feed(Buffer.from(text.slice(0, cut)))
      scan.feed(Buffer.from(text.slice(cut)))
      expect(scan.found(), `cut at ${cut}`).toBe(true)
    }
    const clean = bodyScanner()
    clean.feed(Buffer.from(`{"note":"${SENTINEL.slice(0, 10)}"}`))
    clean.feed(Buffer.from(SENTINEL.slice(10, 12)))
    expect(clean.found()).toBe(false)
  })

  it("the warning says where and what to check, never a value", () => {
    const w = sentinelWarning("api.example.com", ["header:x-other", "body"])
    expect(w).toContain("api.example.com")
    expect(w).toContain("header:x-other, body")
    expect(w).not.toContain(SENTINEL)
  })
})

describe("the sentinel in the request line", () => {
  it("is found in the path, plain or percent-encoded, apart from the query", () => {
    expect(sentinelPlaces({}, `/v1/${SENTINEL}/x`)).toEqual(["path"])
    expect(sentinelPlaces({}, `/v1/${encodeURIComponent(SENTINEL).replace(/-/g, "%2d")}/x?y=1`)).toEqual(["path"])
    expect(sentinelPlaces({}, `/v1/${SENTINEL}?k=${SENTINEL}`)).toEqual(["path", "query"])
    expect(sentinelPlaces({}, "/v1/roster-sentinel/x")).toEqual([])
  })

  it("is audited in the path as [sentinel], percent-encoded or not, never as itself", () => {
    expect(redactMarks(`/v1/${SENTINEL}/x`)).toBe("/v1/[sentinel]/x")
    expect(redactMarks(`/v1/${encodeURIComponent(SENTINEL).replace(/-/g, "%2D")}/x`)).toBe("/v1/[sentinel]/x")
    expect(redactMarks("/v1/messages")).toBe("/v1/messages")
  })
})
