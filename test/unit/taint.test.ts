import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { briefing } from "../../src/box/context.js"
import { layout } from "../../src/config/Paths.js"
import type { MountRule } from "../../src/config/schema.js"
import { isTainted } from "../../src/contract/taint.js"
import { knowledgePushAction } from "../../src/gateway/actions/knowledgePush.js"
import { finishRepos } from "../../src/knowledge/backstop.js"
import { provisionRepos } from "../../src/knowledge/provision.js"
import { RunLog } from "../../src/run/RunLog.js"
import { readRunContext } from "../../src/run/runContext.js"
import { runOnce } from "../../src/box/runOnce.js"
import { rememberAction } from "../../src/gateway/actions/memoryActions.js"
import { untaintRun } from "../../src/supervisor/untaint.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd, encoding: "utf8" }).trim()

const canonicalRepo = (root: string) => {
  const work = path.join(root, "canonical")
  fs.mkdirSync(path.join(work, "policy"), { recursive: true })
  sh(work, "init", "--quiet", "--initial-branch=main")
  fs.writeFileSync(path.join(work, "README.md"), "hello\n")
  fs.writeFileSync(path.join(work, "policy", "rules.md"), "be kind\n")
  sh(work, "add", "-A")
  sh(work, "commit", "--quiet", "-m", "first")
  const bare = path.join(root, "canonical.git")
  sh(root, "clone", "--quiet", "--bare", work, bare)
  return bare
}

const mountOf = (p: string): MountRule => ({ name: "knowledge", path: p, kind: "repo", rw: true, gated: true, protect: ["policy"], push_max: "1m" })
const orgWith = (p: string) => `[[mount]]\nname = "knowledge"\npath = "${p}"\nkind = "repo"\ngated = true\nrw = true\nprotect = ["policy"]\n`
const caller = (runId: string) => ({ subject: "org/alice", runId, worker: "alice", taskId: null })
const taint = (time: string) => ({ kind: "taint" as const, taint: { reason: "egress_refused" as const, host: "evil.example.net", time, detail: "no_rule" } })

/** A run whose box committed work that the backstop then quarantined. */
const quarantinedRun = (canonical: string, runId: string, file: string) =>
  Effect.gen(function*() {
    yield* (yield* RunLog).start({ runId, worker: "alice", kind: "box" })
    const [c] = yield* provisionRepos("alice", runId, [mountOf(canonical)], { uid: 65532, gid: 65532 })
    fs.writeFileSync(path.join(c!.clone, file), "work\n")
    sh(c!.clone, "add", file)
    sh(c!.clone, "commit", "--quiet", "-m", file)
    const knowledge = yield* finishRepos("alice", runId)
    yield* (yield* RunLog).finish("alice", runId, { endedBy: "exit", exitCode: 0, extra: { knowledge } })
    return knowledge[0]?.quarantined_ref ?? ""
  })

describe("tainted runs", () => {
  it.effect("a taint is appended beside run.json, so the runner rewriting its record never drops it", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const runId = "2026-11-29-10-00-00-000000c1"
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      yield* runLog.start({ runId, worker: "alice", kind: "box" })
      const stale = yield* runLog.read("alice", runId)
      yield* runLog.append("alice", runId, taint("2026-11-29T10:00:01.000Z"))
      // The runner writes what it saw before the taint (its notes, then its end).
      yield* runLog.update("alice", runId, { ...stale, container: "box-1" })
      const finished = yield* runLog.finish("alice", runId, { endedBy: "exit", exitCode: 0 })
      expect(finished.tainted).toEqual([taint("2026-11-29T10:00:01.000Z").taint])
      expect(isTainted((yield* runLog.read("alice", runId))!)).toBe(true)
      const onDisk = JSON.parse(fs.readFileSync(path.join(layout(paths).runDir("alice", runId), "run.json"), "utf8"))
      expect(onDisk.tainted).toHaveLength(1)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("an event for a run that is not there fails, and leaves nothing behind", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const runId = "2026-11-29-10-00-00-000000c9"
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      const failed = yield* runLog.append("alice", runId, taint("2026-11-29T10:00:01.000Z")).pipe(Effect.flip)
      expect(failed.message).toContain("no run record to add to")
      expect(fs.existsSync(layout(paths).runDir("alice", runId))).toBe(false)
      expect(yield* runLog.read("alice", runId)).toBeUndefined()
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("a tainted run's knowledge_push is refused (403) with the reason and the command that decides", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const runId = "2026-11-29-10-00-00-000000c2"
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      yield* runLog.start({ runId, worker: "alice", kind: "box" })
      yield* runLog.append("alice", runId, taint("2026-11-29T10:00:01.000Z"))
      const answer = yield* knowledgePushAction(caller(runId), "{}")
      expect(answer.status).toBe(403)
      expect(JSON.stringify(answer.body)).toContain("this run is tainted (egress_refused (evil.example.net)")
      expect(JSON.stringify(answer.body)).toContain(`roster runs untaint ${runId}`)
      expect((yield* runLog.read("alice", runId))?.knowledge_pushes).toMatchObject([{ ok: false }])
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("untaint records the reason and lands the quarantined work as a fast-forward; a later taint taints again", () => {
    const paths = tempPaths()
    const canonical = canonicalRepo(paths.home)
    writeFixture({ paths, orgToml: orgWith(canonical) })
    const runId = "2026-11-29-10-00-00-000000c3"
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      const ref = yield* quarantinedRun(canonical, runId, "found.md")
      expect(ref).toBe(`refs/quarantine/run-${runId}`)
      // Not tainted: nothing to decide.
      expect(Exit.isFailure(yield* Effect.exit(untaintRun("alice", runId, "ok")))).toBe(true)
      yield* runLog.append("alice", runId, taint("2026-11-29T10:00:01.000Z"))
      expect(Exit.isFailure(yield* Effect.exit(untaintRun("alice", runId, "  ")))).toBe(true)
      const done = yield* untaintRun("alice", runId, "the refused host was a typo")
      expect(done.landed).toEqual([{ connection: "knowledge", ok: true, ref, head: sh(canonical, "rev-parse", ref), detail: "landed on main" }])
      expect(sh(canonical, "show", "main:found.md")).toBe("work")
      const after = (yield* runLog.read("alice", runId))!
      expect(after.untainted).toMatchObject({ reason: "the refused host was a typo" })
      expect(isTainted(after)).toBe(false)
      yield* runLog.append("alice", runId, taint("2026-11-29T10:00:02.000Z"))
      expect(isTainted((yield* runLog.read("alice", runId))!)).toBe(true)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("untaint leaves work that is not a fast-forward on its ref, saying how to merge it by hand", () => {
    const paths = tempPaths()
    const canonical = canonicalRepo(paths.home)
    writeFixture({ paths, orgToml: orgWith(canonical) })
    const runId = "2026-11-29-10-00-00-000000c4"
    return Effect.gen(function*() {
      const ref = yield* quarantinedRun(canonical, runId, "late.md")
      yield* (yield* RunLog).append("alice", runId, taint("2026-11-29T10:00:01.000Z"))
      // main moves on after the run started.
      const other = "2026-11-29-10-00-00-000000c5"
      const otherRef = yield* quarantinedRun(canonical, other, "first.md")
      sh(canonical, "update-ref", "refs/heads/main", otherRef)
      const before = sh(canonical, "rev-parse", "main")
      const done = yield* untaintRun("alice", runId, "reviewed")
      expect(done.landed[0]).toMatchObject({ ok: false, detail: `not a fast-forward of main: merge it by hand in ${canonical} (git merge ${ref})` })
      expect(sh(canonical, "rev-parse", "main")).toBe(before)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it("the briefing names tainted work apart, held for a person", () => {
    const text = briefing([], [{
      name: "knowledge", rw: true, defaultBranch: "main", protect: [], unlanded: ["refs/quarantine/run-a", "refs/quarantine/run-b"],
      tainted: new Map([["refs/quarantine/run-b", "egress_refused (evil.example.net)"]])
    }])
    expect(text).toContain("Not landed yet from your earlier runs (fetch them from origin to pick them up): refs/quarantine/run-a.")
    expect(text).toContain("Held for a person's review, because the run that made it was tainted (refs/quarantine/run-b: egress_refused (evil.example.net))")
  })

  it.effect("taint follows the work: a tainted run's set_tasks follow-up, its continuation and a tainted chat session's follow-up start tainted, remember pending and knowledge_push refused; untainting the source leaves them tainted", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const source = "2026-11-29-10-00-00-000000d1"
    const answer = JSON.stringify({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "ok" }], stopReason: "stop" } })
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      yield* runLog.start({ runId: source, worker: "alice", kind: "box" })
      fs.mkdirSync(path.join(layout(paths).runDir("alice", source), "home", "session"), { recursive: true })
      fs.writeFileSync(path.join(layout(paths).runDir("alice", source), "context.json"), JSON.stringify({ cache: { route_key: "roster-pc-0000000000000000" } }))
      yield* runLog.append("alice", source, taint("2026-11-29T10:00:01.000Z"))
      const followUp = yield* runOnce({
        worker: "alice", prompt: "the follow-up", taskId: "t-0000f011",
        origin: { _tag: "queue", task_id: "t-0000f011", queued_by: { by: "self", run_id: source, task_id: null } }
      })
      const continued = yield* runOnce({ worker: "alice", prompt: "carry on", continues: { task_id: null, run_id: source } })
      // A chat session's run tainted (a channel's warm box), and a task it queued with set_tasks.
      const chatSource = "2026-11-29-10-00-00-000000c7"
      yield* runLog.start({ runId: chatSource, worker: "alice", kind: "session" })
      yield* runLog.append("alice", chatSource, taint("2026-11-29T10:00:02.000Z"))
      const fromChat = yield* runOnce({
        worker: "alice", prompt: "the chat's follow-up", taskId: "t-0000c7a1",
        origin: { _tag: "queue", task_id: "t-0000c7a1", queued_by: { by: "self", run_id: chatSource, task_id: null } }
      })
      const clean = yield* runOnce({ worker: "alice", prompt: "unrelated" })
      for (const [child, from] of [[followUp, source], [continued, source], [fromChat, chatSource]] as const) {
        const record = (yield* runLog.read("alice", child.runId))!
        expect(isTainted(record), child.runId).toBe(true)
        expect(record.tainted?.[0]).toMatchObject({ reason: "inherited", inherited_from: from, detail: expect.stringContaining("egress_refused (evil.example.net)") })
        expect((yield* readRunContext("alice", child.runId))?.taints).toMatchObject([{ reason: "inherited", inherited_from: from }])
        // What the tainted source could not do, its follow-ups cannot either.
        expect((yield* knowledgePushAction(caller(child.runId), "{}")).status).toBe(403)
        const kept = yield* rememberAction(caller(child.runId), JSON.stringify({ text: "from a tainted line of work" }))
        expect(kept).toMatchObject({ status: 200, body: { pending: true } })
      }
      expect(isTainted((yield* runLog.read("alice", clean.runId))!)).toBe(false)
      // A person clears the source: each follow-up is its own decision, still tainted.
      yield* runLog.append("alice", source, { kind: "untaint", untaint: { reason: "checked", at: "2026-11-29T11:00:00.000Z", cleared: 1, landed: [] } })
      expect(isTainted((yield* runLog.read("alice", source))!)).toBe(false)
      expect(isTainted((yield* runLog.read("alice", followUp.runId))!)).toBe(true)
      expect(isTainted((yield* runLog.read("alice", continued.runId))!)).toBe(true)
    }).pipe(Effect.provide(unitLayer(paths, { docker: { script: () => ({ stdout: [`${answer}\n`], exitCode: 0 }) } })))
  })
})
