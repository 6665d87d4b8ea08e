import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { answersOf, askScript, type Held, nextHeld } from "../support/ask.js"
import { viaGateway } from "../support/boxClient.js"
import { collect, type Deployment, HOST_KEY, makeDeployment } from "../support/deployment.js"
import { makeTestTls } from "../support/testCa.js"
import { SENTINEL } from "../../src/contract/constants.js"
import { makeOutsideHost, type OutsideHost } from "../support/netns.js"
import { latestRunId } from "../support/runs.js"
import { auditedOnce } from "../support/audit.js"
import { runTokenFiles, servedRunToken } from "../support/leftovers.js"
import type { AuditRecord } from "../../src/gateway/base/Audit.js"

describe("approvals: a box's refused request held while a person decides, through the real gateway and CLI", () => {
  let d: Deployment
  let outside: OutsideHost
  let testCa: string
  const writeOrg = (wait: number, extra = "") => d.writeOrg(`[gateway]\napprovals = "ask"\napproval_wait_s = ${wait}\nupstream_ca_file = "${testCa}"\n${extra}`)

  beforeAll(async () => {
    // The outside host speaks TLS too (its https ports): a grant's upstream, verified against this test CA.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-approvals-"))
    const tls = await makeTestTls("198.51.100.7")
    for (const [name, text] of [["up.crt", tls.certPem], ["up.key", tls.keyPem], ["ca.crt", tls.caPem]] as const) fs.writeFileSync(path.join(dir, name), text)
    testCa = path.join(dir, "ca.crt")
    outside = await makeOutsideHost({ cert: path.join(dir, "up.crt"), key: path.join(dir, "up.key") })
    d = await makeDeployment("")
    writeOrg(60)
  })

  afterAll(async () => {
    await d?.stop()
    outside?.close()
  })

  const script = (name: string, asks: ReadonlyArray<string>) => askScript(d, name, asks.map((a) => a.replace(/^ask /, "")))
  const pending = async () => JSON.parse((await d.roster(["approvals", "--json"])).stdout) as Array<Held>
  const answers = answersOf

  it("--once lets that request through while the box waits, deny refuses, --run covers the rest of the run; a metadata address is never held", async () => {
    const target = `${outside.address}:${outside.port}`
    const child = d.spawn(["worker", "run", "alice", script("ask.sh", [
      `ask ${target} first`, `ask ${target} second`, `ask ${target} third`, `ask ${target} fourth`, "ask 169.254.169.254:80 metadata"
    ])])
    const done = collect(child)
    const seen = new Set<string>()
    const first = await nextHeld(d, seen)
    expect(first).toMatchObject({ worker: "alice", method: "CONNECT", host: outside.address, port: outside.port, path: null })
    const listed = await d.roster(["approvals"])
    expect(listed.stdout).toContain(`${first.id}  alice  CONNECT ${target}`)
    const once = await d.roster(["approve", first.id])
    expect(once.code, once.stderr).toBe(0)
    expect(once.stdout).toContain(`approved CONNECT ${target} for alice (run ${first.run_id}), this request only`)
    const second = await nextHeld(d, seen)
    const denied = await d.roster(["deny", second.id])
    expect(denied.stdout).toContain(`denied CONNECT ${target}`)
    const third = await nextHeld(d, seen)
    expect((await d.roster(["approve", third.id, "--run"])).code).toBe(0)
    const r = await done
    expect(r.code, r.stderr).toBe(0)
    // Nothing more was held: the fourth went through on --run, the metadata address was refused at once.
    expect(await pending()).toEqual([])
    expect(seen.size).toBe(3)
    const runDir = d.file("data", "runs", "alice", latestRunId(d.file("data", "runs", "alice")))
    const said = answers(fs.readFileSync(path.join(runDir, "stdout.jsonl"), "utf8"))
    expect(said.first).toContain("HTTP/1.1 200 Connection Established")
    expect(said.first).toContain(outside.greeting)
    expect(said.second).toContain("HTTP/1.1 403")
    expect(said.second).toMatch(/denied it/)
    expect(said.third).toContain(outside.greeting)
    expect(said.fourth).toContain(outside.greeting)
    expect(said.metadata).toContain("HTTP/1.1 403")
    expect(said.metadata).not.toContain("approv")
    // Every decision is in the audit log with who made it.
    const auditDir = d.file("state", "audit")
    const ofRun = (lines: ReadonlyArray<AuditRecord>) => lines.filter((x) => x.run_id === first.run_id && x.host !== "roster-gateway")
    const audited = ofRun(await auditedOnce(auditDir, (lines) => ofRun(lines).length >= 5))
    expect(audited.filter((x) => x.status === 200).map((x) => x.note)).toEqual([
      expect.stringMatching(/^approved by \S+ \(cli\) \(once\)$/), expect.stringMatching(/^approved by \S+ \(cli\) \(run\)$/), "approved by an earlier --run approval"
    ])
    expect(audited.find((x) => x.status === 403 && x.host === outside.address)?.note).toMatch(/\(cli\) denied it$/)
  })

  it("a grant's rule that asks holds one DELETE until roster approve lets it through, injected, on the path its rule saw; the next is held again; --always is refused for it", async () => {
    writeOrg(60, [
      "[[grant]]", `name = "github"`, `hosts = ["gh.example.com"]`, `scope = ["org/alice"]`, `credential = "anthropic"`,
      "[[grant.rules]]", `methods = ["DELETE"]`, `paths = ["/repos/acme/*"]`, `action = "ask"`,
      "[[grant.rules]]", `methods = ["GET"]`, `paths = ["/repos/acme/**"]`, `action = "allow"`,
      "[[route]]", `host = "gh.example.com"`, `upstream = "https://${outside.address}:${outside.httpsPorts[0]}"`
    ].join("\n"))
    // A run whose box waits; the test speaks for it from the host, with its token, as its box's client would.
    const before = await runTokenFiles(d)
    const child = d.spawn(["worker", "run", "alice", "!sleep 60"])
    const done = collect(child)
    try {
      const token = await servedRunToken(d, "alice", before)
      const rosterCa = fs.readFileSync(d.file("state", "ca", "ca.crt"), "utf8")
      const send = (method: string, p: string) => viaGateway(d.port, token, "gh.example.com:443", { method, path: p, headers: { "x-api-key": SENTINEL } }, [rosterCa])
      const sha = (s: string) => crypto.createHash("sha256").update(s).digest("hex")
      // Allowed by rule 2, nothing held.
      const read = await send("GET", "/repos/acme/app")
      expect(read.status).toBe(200)
      const seen = new Set<string>()
      // Held: approved once, it goes on injected, on its canonical path.
      const first = send("DELETE", "/repos/acme/x/../app")
      const held = await nextHeld(d, seen)
      expect(held).toMatchObject({ worker: "alice", method: "DELETE", host: "gh.example.com", port: 443, path: "/repos/acme/app" })
      expect((held as unknown as { rule: string }).rule).toBe(`[[grant]] "github" rule 1 (methods = ["DELETE"], paths = ["/repos/acme/*"], action = "ask")`)
      expect((await d.roster(["approvals"])).stdout).toContain(`(asked by [[grant]] "github" rule 1`)
      const always = await d.roster(["approve", held.id, "--always"])
      expect(always.code).not.toBe(0)
      expect(always.stderr + always.stdout).toMatch(/which asks about each request: approve it once \(roster approve ap-[0-9a-f]{8}\) or deny it/)
      expect(fs.readFileSync(d.file("config", "org.toml"), "utf8")).not.toContain("roster approve --always")
      const once = await d.roster(["approve", held.id])
      expect(once.code, once.stderr).toBe(0)
      const approved = await first
      expect(approved.status).toBe(200)
      const e = JSON.parse(approved.body) as { method: string; path: string; x_api_key_sha256: string }
      expect(e).toMatchObject({ method: "DELETE", path: "/repos/acme/app", x_api_key_sha256: sha(HOST_KEY) })
      // The next DELETE is held again, and a denial is its 403.
      const second = send("DELETE", "/repos/acme/app")
      const again = await nextHeld(d, seen)
      expect(again.id).not.toBe(held.id)
      expect((await d.roster(["deny", again.id])).code).toBe(0)
      const denied = await second
      expect(denied.status).toBe(403)
      expect((JSON.parse(denied.body) as { error: { message: string } }).error.message).toMatch(/held for a person by \[\[grant\]\] "github" rule 1 .* denied it$/)
      const audited = await auditedOnce(d.file("state", "audit"), (lines) => lines.some((x) => x.host === "gh.example.com" && x.status === 403))
      expect(audited.find((x) => x.host === "gh.example.com" && x.method === "DELETE" && x.status === 200)?.note).toMatch(/^approved by \S+ \(cli\) \(once\)$/)
    } finally {
      child.kill("SIGINT")
      await done
      writeOrg(60)
    }
  }, 180_000)

  it("no decision in time is the 403 saying no one approved it; --always writes the worker's [[allow]] with who and when", async () => {
    writeOrg(2)
    const timedOut = await d.roster(["worker", "run", "alice", script("late.sh", [`ask ${outside.address}:${outside.port} late`])])
    expect(timedOut.code, timedOut.stderr).toBe(0)
    const runs = d.file("data", "runs", "alice")
    const late = answers(fs.readFileSync(path.join(runs, latestRunId(runs), "stdout.jsonl"), "utf8")).late
    expect(late).toContain("HTTP/1.1 403")
    expect(late).toContain("it waited 2 s for an approval and no one approved it")

    writeOrg(60)
    const child = d.spawn(["worker", "run", "alice", script("always.sh", [`ask ${outside.address}:${outside.port} kept`])])
    const done = collect(child)
    const held = await nextHeld(d, new Set())
    const always = await d.roster(["approve", held.id, "--always"])
    expect(always.code, always.stderr).toBe(0)
    expect((await done).code).toBe(0)
    const toml = fs.readFileSync(d.file("config", "org.toml"), "utf8")
    expect(toml).toMatch(new RegExp(`# approved by \\S+ \\(cli\\) on \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z \\(roster approve --always\\)\\n\\[\\[allow\\]\\]\\n` +
      `hosts = \\["${outside.address.replace(/\./g, "\\.")}"\\]\\nports = \\[${outside.port}\\]\\nscope = \\["org/alice"\\]\\n$`))
    // From now on the policy itself allows it: nothing is held.
    const again = await d.roster(["policy", "check", "alice", `${outside.address}:${outside.port}`, "--json"])
    expect(JSON.parse(again.stdout)).toMatchObject({ allowed: true })
    expect(await pending()).toEqual([])
  })

  it("an id that is not of its form never reaches a URL: roster approve of a crafted path is refused and the task it named is untouched; the server refuses such a path too", async () => {
    const added = await d.roster(["task", "add", "alice", "--json", "stay queued"])
    expect(added.code, added.stderr).toBe(0)
    const task = JSON.parse(added.stdout) as { task_id: string }
    for (const args of [["approve", `../tasks/${task.task_id}/cancel`], ["deny", `../tasks/${task.task_id}/cancel`], ["task", "cancel", `${task.task_id}/../../x`], ["task", "show", "../../etc"]]) {
      const crafted = await d.roster(args)
      expect(crafted.code, `${args.join(" ")}: ${crafted.stderr}`).not.toBe(0)
      expect(crafted.stderr, args.join(" ")).toMatch(/is not a (held request's|task) id \((ap|t)-xxxxxxxx\)/)
    }
    // Straight at the control socket, encoded: not one of its routes' shapes.
    const raw = await new Promise<number>((resolve, reject) => {
      const req = http.request({ socketPath: d.file("state", "control.sock"), method: "POST", path: `/approvals/..%2Ftasks%2F${task.task_id}%2Fcancel`, headers: { "content-type": "application/json" } }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.once("error", reject)
      req.end(JSON.stringify({ decision: "once", by: "a crafted client" }))
    })
    expect(raw).toBe(400)
    // Whatever the daemon has done with it since (queued, running or done), no one cancelled it.
    const shown = JSON.parse((await d.roster(["task", "show", task.task_id, "--json"])).stdout) as { status: string }
    expect(shown.status).not.toBe("cancelled")
    await d.roster(["task", "cancel", task.task_id])
  })
})
