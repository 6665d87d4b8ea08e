import { describe, expect, it } from "vitest"
import type * as http from "node:http"
import { makeSessions } from "../../src/web/auth.js"
import { cut, html } from "../../src/web/html.js"

const req = (headers: Record<string, string>) => ({ headers } as unknown as http.IncomingMessage)

describe("the web UI's building blocks", () => {
  it("html escapes every interpolated value, nested fragments pass as built", () => {
    const box = `<script>alert(1)</script><img src=x onerror="x()"> & 'q'`
    const out = html`<p title="${box}">${box}${html`<b>${box}</b>`}${[box, 1]}</p>`.text
    expect(out).not.toContain("<script>")
    expect(out).not.toContain("<img")
    expect(out).toContain("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;x()&quot;&gt; &amp; &#39;q&#39;")
    expect(out).toContain("<b>&lt;script&gt;")
    expect(cut("x".repeat(10), 4)).toBe("xxxx… (6 more characters)")
  })

  it("sessions: only the token logs in; the cookie is HttpOnly and SameSite=Strict; Host, Origin and CSRF are checked", () => {
    const s = makeSessions("a".repeat(64), () => 7310)
    expect(s.login("b".repeat(64))).toBeUndefined()
    expect(s.login("short")).toBeUndefined()
    const session = s.login(` ${"a".repeat(64)}\n`)
    expect(session).toBeDefined()
    const cookie = s.cookie(session!)
    expect(cookie).toMatch(/^roster_session=[0-9a-f]{64}; HttpOnly; SameSite=Strict; Path=\/$/)
    expect(s.of(req({ cookie: `x=1; ${cookie.split(";")[0]}` }))).toBe(session)
    expect(s.of(req({ cookie: "roster_session=forged" }))).toBeUndefined()
    expect(s.hostOk(req({ host: "127.0.0.1:7310" }))).toBe(true)
    expect(s.hostOk(req({ host: "localhost:7310" }))).toBe(true)
    expect(s.hostOk(req({ host: "attacker.example.com:7310" }))).toBe(false)
    expect(s.originOk(req({ origin: "http://127.0.0.1:7310" }))).toBe(true)
    expect(s.originOk(req({ origin: "null" }))).toBe(false)
    expect(s.originOk(req({ origin: "http://127.0.0.1:7311" }))).toBe(false)
    expect(s.originOk(req({}))).toBe(false)
    expect(s.csrfOk(session!, session!.csrf)).toBe(true)
    expect(s.csrfOk(session!, "nope")).toBe(false)
    expect(s.csrfOk(session!, undefined)).toBe(false)
  })
})
