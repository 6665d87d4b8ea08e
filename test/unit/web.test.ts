import { describe, expect, it } from "vitest"
import { makeSessions } from "../../src/web/auth.js"
import { cut, html } from "../../src/web/html.js"

const req = (headers: Record<string, string>) => ({ headers })

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

describe("the Now page's chat listeners", () => {
  it("each listener's state, its channels and their sessions; a service's words escaped", async () => {
    const { nowFragment } = await import("../../src/web/nowPage.js")
    const out = nowFragment({
      stats: new Map(),
      status: {
        pid: 1, version: "t", config_root: "/c", started_at: "now", queue: {}, boxes: [], adopted: 0, reaped: 0, held_reason: null,
        chat: [{
          provider: "slack", connection: "slack", state: "failing", detail: "invalid_auth <script>x</script>", since: "now",
          channels: [{ id: "C0TEAM", worker: "alice", session: "2026-12-01-10-00-00-0000c4a7" }], ignored: 2, limited: 1, turns: 5
        }]
      }
    }).text
    expect(out).toContain("<h2>Chat</h2>")
    expect(out).toContain(`<li class="warn">slack (slack): <strong>failing</strong> — invalid_auth &lt;script&gt;`)
    expect(out).toContain("5 turns, 2 ignored, 1 rate-limited")
    expect(out).toContain(`C0TEAM → alice: session <a href="/runs/2026-12-01-10-00-00-0000c4a7">`)
    expect(out).not.toContain("<script>")
  })
})

describe("the Now page on a fleet node", () => {
  it("the other nodes' live boxes under their node, with links to their runs; a node that did not answer says why; nothing on a machine alone", async () => {
    const { nowFragment } = await import("../../src/web/nowPage.js")
    const status = { pid: 1, version: "t", config_root: "/c", started_at: "now", queue: {}, boxes: [], adopted: 0, reaped: 0, held_reason: null }
    const out = nowFragment({
      stats: new Map(),
      status,
      elsewhere: [
        { node: "node-a", boxes: [{ run_id: "2026-12-02-21-00-00-0000aa01", worker: "carol", kind: "task", task_id: "t-0000aa01", age_s: 75, remaining_s: 3525, cpu_percent: 12.5, memory_bytes: 3 * 1024 * 1024 }] },
        { node: "node-c", detail: "the runner RPC at 10.0.0.7:7310 did not answer in 3000 ms <b>" },
        { node: "node-d", boxes: [] }
      ]
    }).text
    expect(out).toContain("<h2>Elsewhere in the fleet</h2>")
    expect(out).toContain("<h3>Node node-a (1 live)</h3>")
    expect(out).toContain(`<tr><td>carol</td><td><a href="/runs/2026-12-02-21-00-00-0000aa01">2026-12-02-21-00-00-0000aa01</a></td><td>task</td><td>t-0000aa01</td><td>1 min 15 s</td>`)
    expect(out).toContain("<td>12.5 %</td><td>3.0 MiB</td>")
    expect(out).toContain(`<p class="warn">Not shown: the runner RPC at 10.0.0.7:7310 did not answer in 3000 ms &lt;b&gt;</p>`)
    expect(out).toContain("<h3>Node node-d (0 live)</h3>\n<p>No box is running there.</p>")
    expect(nowFragment({ stats: new Map(), status }).text).not.toContain("Elsewhere")
  })
})
