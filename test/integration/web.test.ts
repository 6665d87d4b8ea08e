import Dockerode from "dockerode"
import { controlPost } from "../support/control.js"
import { Effect, Exit, Scope } from "effect"
import { spawn, type ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { type Browser, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Received, serveRehearsal } from "../../src/rehearsal/server.js"
import { answersOf, askScript, nextHeld } from "../support/ask.js"
import { collect, type Deployment, makeDeployment, TEST_IMAGE } from "../support/deployment.js"
import { makeOutsideHost } from "../support/netns.js"
import { latestRunId } from "../support/runs.js"
import { auditedOnce } from "../support/audit.js"
import { CHROMIUM, startWeb } from "../support/web.js"
import type { AuditRecord } from "../../src/gateway/base/Audit.js"

const PI_IMAGE = "roster-box:test"
const artifacts = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../test-artifacts/web")
const docker = new Dockerode()

/** A request to the web server as a script (no browser): status, headers and body. */
const request = (port: number, method: string, target: string, headers: Record<string, string> = {}, body?: string) =>
  new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method, path: target, headers: { host: `127.0.0.1:${port}`, ...headers } }, (res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }))
    })
    req.once("error", reject)
    req.end(body)
  })

describe("roster web in a real browser (Debian's chromium), against a real daemon, real pi and the rehearsal model", () => {
  let d: Deployment
  let grant = ""
  let scope: Scope.CloseableScope
  let model: { port: number; received: Array<Received> }
  let web: ChildProcess
  let webPort: number
  let loginUrl: string
  let browser: Browser
  let page: Page
  const pageErrors: Array<string> = []

  beforeAll(async () => {
    if (!fs.existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM}: install Debian's chromium (scripts/ensure-host.sh does)`)
    fs.mkdirSync(artifacts, { recursive: true })
    scope = Effect.runSync(Scope.make())
    // Thinking time keeps a box alive across a few of the Now page's looks (one each 2 s).
    model = await Effect.runPromise(serveRehearsal({ port: 0, delayMs: 1000 }).pipe(Scope.extend(scope)))
    grant = [
      "[[grant]]", `name = "anthropic"`, `hosts = ["api.anthropic.com"]`, `scope = ["org/*"]`, `credential = "anthropic"`,
      "[[route]]", `host = "api.anthropic.com"`, `upstream = "http://127.0.0.1:${model.port}"`,
      // Rules the Gateway page lists: a grant's and an [[allow]]'s, one for an upgrade.
      "[[grant]]", `name = "github"`, `hosts = ["api.github.example.com"]`, `scope = ["org/alice"]`, `credential = "github"`,
      "[[grant.rules]]", `methods = ["DELETE"]`, `action = "deny"`,
      "[[grant.rules]]", `paths = ["/repos/acme/*/events"]`, "websocket = true", `action = "allow"`,
      "[[grant.rules]]", `methods = ["GET", "POST"]`, `paths = ["/repos/acme/**"]`, `case = "insensitive"`, `action = "allow"`,
      "[[allow]]", `hosts = ["mirror.example.com"]`, `scope = ["org/*"]`,
      "[[allow.rules]]", `methods = ["GET"]`, `paths = ["/pub/**"]`, `action = "allow"`
    ].join("\n")
    d = await makeDeployment(grant, PI_IMAGE)
    fs.writeFileSync(d.file("config", "workers", "alice", "worker.toml"), `model = "anthropic/claude-sonnet-4-5"\n`)
    const ui = await startWeb(d.env)
    webPort = ui.port
    web = ui.process
    loginUrl = ui.loginUrl
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] })
    page = await (await browser.newContext()).newPage()
    page.on("pageerror", (e) => pageErrors.push(e.message))
    page.on("console", (m) => m.type() === "error" && pageErrors.push(m.text()))
  }, 300_000)

  afterAll(async () => {
    await browser?.close()
    web?.kill("SIGTERM")
    await d?.stop()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  it("without the token every page and request is refused; a foreign Origin, a missing CSRF token or a foreign Host too", async () => {
    for (const p of ["/", "/runs", "/tasks", "/talk", "/gateway", "/events", "/runs/2026-01-01-00-00-00-00000000"]) {
      expect((await request(webPort, "GET", p)).status, p).toBe(401)
    }
    expect((await request(webPort, "POST", "/tasks", { origin: `http://127.0.0.1:${webPort}`, "content-type": "application/x-www-form-urlencoded" }, "worker=alice&prompt=x")).status).toBe(401)
    expect((await request(webPort, "GET", "/login?token=" + "0".repeat(64))).status).toBe(401)
    const login = await request(webPort, "GET", new URL(loginUrl).pathname + new URL(loginUrl).search)
    expect(login.status).toBe(303)
    const cookie = String(login.headers["set-cookie"]?.[0] ?? "")
    expect(cookie).toMatch(/HttpOnly/)
    expect(cookie).toMatch(/SameSite=Strict/)
    const session = cookie.split(";")[0] ?? ""
    const form = { cookie: session, "content-type": "application/x-www-form-urlencoded" }
    const foreign = await request(webPort, "POST", "/tasks", { ...form, origin: "http://evil.example.com" }, "worker=alice&prompt=x")
    expect(foreign.status).toBe(403)
    expect((await request(webPort, "POST", "/tasks", form, "worker=alice&prompt=x")).status).toBe(403)
    expect((await request(webPort, "POST", "/tasks", { ...form, origin: `http://127.0.0.1:${webPort}` }, "worker=alice&prompt=x&csrf=nope")).status).toBe(403)
    expect((await request(webPort, "GET", "/", { cookie: session, host: "rebound.example.com" })).status).toBe(421)
    const ok = await request(webPort, "GET", "/", { cookie: session })
    expect(ok.status).toBe(200)
    expect(ok.headers["content-security-policy"]).toContain("script-src 'self'")
    // The form refuses a ceiling the CLI refuses (the one rule), saying why — never queued without it.
    const csrf = /<meta name="csrf" content="([^"]+)">/.exec(ok.body)?.[1] ?? ""
    const local = { ...form, origin: `http://127.0.0.1:${webPort}` }
    for (const ceiling of ["-3", "0", "abc", "Infinity"]) {
      const bad = await request(webPort, "POST", "/tasks", local, `worker=alice&prompt=x&ceiling=${ceiling}&csrf=${csrf}`)
      expect(bad.status, ceiling).toBe(200)
      expect(bad.body, ceiling).toContain("not queued: a ceiling is a positive number of minutes")
    }
    // So does the control API, which scripts call.
    await expect(controlPost(d, "/tasks", { worker: "alice", prompt: "x", ceiling_min: -3 })).rejects.toThrow(/400.*a ceiling is a positive number of minutes/s)
    expect(JSON.parse((await d.roster(["task", "list", "--json"])).stdout)).toEqual([])
  })

  it("logs in with the token; Now shows the running server, live", async () => {
    await page.goto(loginUrl)
    expect(new URL(page.url()).pathname).toBe("/")
    await page.getByText("Server: running").waitFor()
    await page.screenshot({ path: path.join(artifacts, "now.png"), fullPage: true })
  })

  it("a task added in the page runs; its timeline shows the tool call, the request marked injected, and the final answer", async () => {
    // Now, open in a second tab, is told of the box over SSE: it appears and goes without a reload.
    const now = await page.context().newPage()
    now.on("pageerror", (e) => pageErrors.push(e.message))
    await now.goto(`http://127.0.0.1:${webPort}/`)
    // No run's box (alice's warm box may wait for her next run: counted among the live boxes, marked warm).
    const noRunBox = /^Live boxes \((0|(\d+), \2 warm)\)$/
    await now.getByRole("heading", { name: noRunBox }).waitFor()
    let reloaded = false
    now.on("framenavigated", () => (reloaded = true))
    await page.goto(`http://127.0.0.1:${webPort}/tasks`)
    await page.getByLabel("Worker", { exact: true }).first().selectOption("alice")
    await page.getByLabel("Prompt").fill("What system is your box running?")
    await page.getByRole("button", { name: "Queue it" }).click()
    const queued = await page.getByText(/task t-[0-9a-f]{8} queued/).textContent()
    const id = /t-[0-9a-f]{8}/.exec(queued ?? "")?.[0] ?? ""
    // The task's box appears without a reload (a warm box it took is listed as the task's).
    await now.locator("#now table tbody tr").filter({ hasText: id }).first().waitFor({ timeout: 60_000 })
    expect(await now.locator("#now table").innerText()).toMatch(/alice\s+\S+\s+task\s+t-[0-9a-f]{8}\s+daemon/)
    await now.screenshot({ path: path.join(artifacts, "now-live.png"), fullPage: true })
    await now.getByRole("heading", { name: noRunBox }).waitFor({ timeout: 120_000 })
    expect(reloaded).toBe(false)
    await now.close()
    const deadline = Date.now() + 150_000
    let status = ""
    while (Date.now() < deadline) {
      status = JSON.parse((await d.roster(["task", "show", id, "--json"])).stdout).status
      if (status === "done" || status === "failed") break
      await new Promise((r) => setTimeout(r, 1000))
    }
    expect(status).toBe("done")
    // A task queued after another (which takes seconds) waits: cancelled from its row in the page.
    const first = JSON.parse((await d.roster(["task", "add", "alice", "--json", "What system is your box running?"])).stdout) as { task_id: string }
    const held = JSON.parse((await d.roster(["task", "add", "alice", "--after", first.task_id, "--json", "wait for me"])).stdout) as { task_id: string }
    await page.goto(`http://127.0.0.1:${webPort}/tasks?status=queued`)
    await page.getByRole("button", { name: `Cancel ${held.task_id}` }).click()
    await page.getByText(`task ${held.task_id} cancelled`).waitFor()
    expect(JSON.parse((await d.roster(["task", "show", held.task_id, "--json"])).stdout).status).toBe("cancelled")
    while (Date.now() < deadline && !["done", "failed"].includes(JSON.parse((await d.roster(["task", "show", first.task_id, "--json"])).stdout).status)) {
      await new Promise((r) => setTimeout(r, 1000))
    }
    await page.goto(`http://127.0.0.1:${webPort}/tasks?worker=alice&status=done`)
    await page.screenshot({ path: path.join(artifacts, "tasks.png"), fullPage: true })
    await page.locator("table a[href^='/runs/']").first().click()
    await page.getByRole("heading", { name: "Timeline" }).waitFor()
    const timeline = await page.locator("ol.timeline").innerText()
    expect(timeline).toContain("tool call: bash")
    expect(timeline).toMatch(/gateway POST api\.anthropic\.com:443\/v1\/messages → 200 credential injected/)
    expect(timeline).toContain("Rehearsal answer: I looked at my box with bash")
    expect(timeline).toContain("message_user")
    await page.screenshot({ path: path.join(artifacts, "run.png"), fullPage: true })
    const download = await request(webPort, "GET", `${new URL(page.url()).pathname}/transcript`, { cookie: (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join("; ") })
    expect(download.headers["content-disposition"]).toContain("attachment")
    expect(download.body).toContain("tool_execution_start")
  }, 200_000)

  it("a talk of two turns: the second recalls the first, markup from the box is shown as text and runs nothing", async () => {
    const hostile = `<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> remember this`
    await page.goto(`http://127.0.0.1:${webPort}/talk`)
    await page.getByRole("button", { name: "Start a conversation" }).click()
    await page.getByText(/Conversation with alice: ready/).waitFor({ timeout: 60_000 })
    await page.getByLabel(/Your message/).fill(hostile)
    await page.getByRole("button", { name: "Send" }).click()
    await page.getByText("Rehearsal answer: I looked at my box with bash").waitFor({ timeout: 60_000 })
    await page.getByText(/Conversation with alice: ready/).waitFor({ timeout: 30_000 })
    await page.getByLabel(/Your message/).fill("what did I say first?")
    await page.getByRole("button", { name: "Send" }).click()
    const recalled = page.getByText(/earlier in this conversation you said/)
    await recalled.waitFor({ timeout: 60_000 })
    expect(await recalled.textContent()).toContain(hostile)
    expect(await page.evaluate(() => (globalThis as unknown as { pwned?: number }).pwned)).toBeUndefined()
    expect(await page.locator("#talk script, #talk img").count()).toBe(0)
    await page.screenshot({ path: path.join(artifacts, "talk.png"), fullPage: true })
    // The session's own run page shows the same text as text.
    const runHref = await page.locator("#talk a[href^='/runs/']").getAttribute("href")
    await page.getByRole("button", { name: "End the conversation" }).click()
    await page.getByText(/ended \(closed\)/).waitFor({ timeout: 60_000 })
    // The session was the daemon's (`roster web` handed it over, as `roster talk` does), so it could take a warm box.
    const talkRun = JSON.parse(fs.readFileSync(d.file("data", "runs", "alice", (runHref ?? "").split("/").at(-1) ?? "", "run.json"), "utf8"))
    expect(talkRun).toMatchObject({ kind: "session", ended_by: "closed" })
    expect(talkRun.owner.pid).toBe(JSON.parse((await d.roster(["server", "status", "--json"])).stdout).pid)
    await page.goto(`http://127.0.0.1:${webPort}${runHref}`)
    expect(await page.locator("ol.timeline").innerText()).toContain(hostile)
    expect(await page.locator("ol.timeline script, ol.timeline img").count()).toBe(0)
    expect(await page.evaluate(() => (globalThis as unknown as { pwned?: number }).pwned)).toBeUndefined()
    expect(pageErrors, pageErrors.join("\n")).toEqual([])
  }, 200_000)

  it("a refused request appears under Gateway, with its reason, beside the rules in force", async () => {
    // A host-side caller asking the gateway for a host no rule allows.
    const refused = await new Promise<number>((resolve, reject) => {
      const req = http.request({ host: "127.0.0.1", port: d.port, method: "CONNECT", path: "blocked.example.test:443" })
      req.once("connect", (res, socket) => {
        socket.destroy()
        resolve(res.statusCode ?? 0)
      })
      req.once("error", reject)
      req.end()
    })
    expect(refused).toBe(403)
    await page.goto(`http://127.0.0.1:${webPort}/gateway`)
    const text = await page.locator("main").innerText()
    expect(text).toContain("blocked.example.test:443")
    expect(text).toContain("no [[grant]] or [[allow]] in org.toml covers it")
    expect(text).toContain("api.anthropic.com")
    // Each entry's rules in order, then what decides the rest.
    expect(text).toMatch(/api\.github\.example\.com[^]*deny DELETE any path[^]*allow WebSocket upgrade on \/repos\/acme\/\*\/events[^]*the rest: deny/)
    expect(text).toMatch(/mirror\.example\.com[^]*allow GET \/pub\/\*\*[^]*the rest: deny/)
    // The refusal's code beside its reason.
    expect(await page.locator("table", { hasText: "blocked.example.test:443" }).innerText()).toMatch(/blocked\.example\.test:443\s+403\s+no_rule/)
    await page.screenshot({ path: path.join(artifacts, "gateway.png"), fullPage: true })
    // "Check a request": the gateway's own decision, the verdict's fields, nothing sent.
    const check = async (method: string, url: string, headers = "") => {
      await page.locator("form.check input[name=check_worker]").fill("alice")
      await page.locator("form.check input[name=check_method]").fill(method)
      await page.locator("form.check input[name=check_url]").fill(url)
      await page.locator("form.check textarea[name=check_headers]").fill(headers)
      await page.locator("form.check button").click()
      await page.waitForLoadState()
      return page.locator("dl.verdict").innerText()
    }
    const denied = await check("DELETE", "https://api.github.example.com/repos/acme/app")
    expect(denied).toMatch(/Verdict\s+refuse \(403\)/)
    expect(denied).toMatch(/Why\s+request_rule/)
    expect(denied).toMatch(/Reason\s+.*rule 1/)
    const read = await check("GET", "https://api.github.example.com/repos/ACME/x/../app")
    expect(read).toMatch(/Verdict\s+forward/)
    expect(read).toMatch(/Target the upstream gets\s+\/repos\/ACME\/app/)
    expect(read).toMatch(/Decided by\s+rule 3/)
    const overridden = await check("POST", "https://api.github.example.com/repos/acme/app/pulls", "X-HTTP-Method-Override: DELETE")
    expect(overridden).toMatch(/Why\s+ambiguous/)
    expect(pageErrors, pageErrors.join("\n")).toEqual([])
  })

  it("a held request shows on the Gateway page, and its Approve button lets it through while the box waits", async () => {
    const outside = await makeOutsideHost()
    const target = `${outside.address}:${outside.port}`
    try {
      // The scripted engine for this one: the box asks for a host no rule allows, and waits.
      d.writeOrg(`${grant}\n[gateway]\napprovals = "ask"\napproval_wait_s = 60\n`, `[engine]\nimage = "${TEST_IMAGE}"`)
      const done = collect(d.spawn(["worker", "run", "alice", askScript(d, "web-ask.sh", [`${target} web`])]))
      const held = await nextHeld(d, new Set())
      await page.goto(`http://127.0.0.1:${webPort}/gateway`)
      const row = page.locator("tr", { hasText: target })
      expect(await row.innerText()).toContain(held.run_id)
      await page.screenshot({ path: path.join(artifacts, "approval.png"), fullPage: true })
      await row.getByRole("button", { name: "Approve once" }).click()
      await page.waitForLoadState()
      expect(await page.locator("main").innerText()).toContain(`approved (once): CONNECT ${target}`)
      const r = await done
      expect(r.code, r.stderr).toBe(0)
      const runs = d.file("data", "runs", "alice")
      const answer = answersOf(fs.readFileSync(path.join(runs, latestRunId(runs), "stdout.jsonl"), "utf8")).web
      expect(answer).toContain("HTTP/1.1 200 Connection Established")
      expect(answer).toContain(outside.greeting)
      const auditDir = d.file("state", "audit")
      const approved = (x: AuditRecord) => x.run_id === held.run_id && x.status === 200 && x.host !== "roster-gateway"
      const audited = await auditedOnce(auditDir, (lines) => lines.some(approved))
      expect(audited.find(approved)?.note).toBe("approved by a person at roster web (once)")
    } finally {
      d.writeOrg(grant)
      outside.close()
    }
  })

  it("no box can reach the web server: it listens on the host's loopback only", async () => {
    const nets = await docker.listNetworks({ filters: { label: [`roster.deployment=${d.file("config")}`] } })
    const net = nets[0]
    expect(net?.Name).toBeTruthy()
    const info = await docker.getNetwork(net?.Id ?? "").inspect()
    const hostSide = String(info.IPAM?.Config?.[0]?.Gateway ?? "")
    expect(hostSide).toMatch(/^\d+\.\d+\.\d+\.\d+$/)
    const probe = `const s=require("net").connect(${webPort},"${hostSide}");s.on("connect",()=>{console.log("REACHED");process.exit(0)});` +
      `s.on("error",(e)=>console.log("REFUSED "+e.code));s.setTimeout(3000,()=>{console.log("REFUSED timeout");s.destroy()})`
    const run = await collect(spawn("docker", ["run", "--rm", "--network", net?.Name ?? "", "--entrypoint", "node", PI_IMAGE, "-e", probe], { stdio: ["ignore", "pipe", "pipe"] }))
    expect(run.stdout).toMatch(/^REFUSED/m)
    expect(run.stdout).not.toContain("REACHED")
  })

  it("Now counts the warm boxes among the live ones: one after a run with warm boxes on, none once it is taken and no other is made", async () => {
    d.writeOrg(`${grant}\n[box]\nwarm = "recent"\n`)
    try {
      const r = await d.roster(["worker", "run", "alice", "!true"])
      expect(r.code, r.stderr).toBe(0)
      await page.goto(loginUrl)
      // Pushed by the page's live view once the daemon has made alice's next box (a live box, and of them one warm).
      await page.getByRole("heading", { name: /^Live boxes \(1, 1 warm\)$/ }).waitFor({ timeout: 30_000 })
      // The next run takes it; warm boxes then off, none is made after it.
      d.writeOrg(`${grant}\n[box]\nwarm = "off"\n`)
      expect((await d.roster(["worker", "run", "alice", "!true"])).code).toBe(0)
      await page.getByRole("heading", { name: /^Live boxes \(0\)$/ }).waitFor({ timeout: 30_000 })
    } finally {
      d.writeOrg(grant)
    }
  })
})
