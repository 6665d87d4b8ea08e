import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import { runFiles } from "../../src/contract/runFiles.js"
import { layout } from "../../src/config/Paths.js"
import { LABEL_DEPLOYMENT, LABEL_RUN_ID } from "../../src/contract/constants.js"
import { Docker } from "../../src/docker/Docker.js"
import { DockerFake } from "../../src/docker/DockerTest.js"
import { MAX_OPEN_TAINTS, makeTaintMemo, taintOrHold, taintRun, taintSentinelBefore } from "../../src/gateway/base/taint.js"
import { RunLog } from "../../src/run/RunLog.js"
import { untaintRun } from "../../src/supervisor/untaint.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const caller = (runId: string) => ({ subject: "org/alice", runId, worker: "alice", taskId: null })

/** A refused host a box asked for, one of many: each its own taint (one per reason and host). */
const refused = (memo: ReturnType<typeof makeTaintMemo>, runId: string, i: number) =>
  taintRun(memo, caller(runId), "egress_refused", `h${i}.example.net`, "no_rule")

describe("taint cannot be worn out or lost", () => {
  it.effect("past the cap the run is stopped (its box killed, its end 'tainted'), not left to go on unrecorded", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const runId = "2026-12-07-10-00-00-0000ca90"
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      yield* runLog.start({ runId, worker: "alice", kind: "box" })
      // The run's box, running.
      const engine = yield* Docker
      const box = yield* engine.containerCreate({
        name: `roster-box-${runId}`, Image: "roster-box:1", HostConfig: { AutoRemove: false },
        Labels: { [LABEL_RUN_ID]: runId, [LABEL_DEPLOYMENT]: paths.config, "roster.worker": "alice", "roster.kind": "box" }
      } as unknown as Parameters<typeof engine.containerCreate>[0])
      yield* engine.containerStart(box)
      const memo = makeTaintMemo()
      for (let i = 0; i < MAX_OPEN_TAINTS; i++) yield* refused(memo, runId, i)
      expect((yield* runLog.read("alice", runId))?.tainted?.length).toBe(MAX_OPEN_TAINTS)
      // One more: not recorded as a taint — the run is stopped, once however many follow.
      yield* refused(memo, runId, MAX_OPEN_TAINTS)
      yield* refused(memo, runId, MAX_OPEN_TAINTS + 1)
      const run = yield* runLog.read("alice", runId)
      expect(run?.tainted?.length).toBe(MAX_OPEN_TAINTS)
      expect(run?.stopped).toMatchObject({ by: "tainted", detail: expect.stringMatching(/tainted 20 times no person has cleared/) })
      expect((yield* (yield* DockerFake).callsOf("containerKill")).map((k) => k.id)).toEqual([box])
    }).pipe(Effect.provide(unitLayer(paths, { docker: { script: () => ({ hang: true }) } })))
  })

  it.effect("after 20 taints and an untaint, one more refused host taints the run again: taints a person cleared do not count", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const runId = "2026-12-07-10-00-00-0000ca91"
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      yield* runLog.start({ runId, worker: "alice", kind: "box" })
      const memo = makeTaintMemo()
      for (let i = 0; i < MAX_OPEN_TAINTS; i++) yield* refused(memo, runId, i)
      yield* untaintRun("alice", runId, "a person looked: the hosts were typos")
      yield* refused(memo, runId, 99)
      const run = yield* runLog.read("alice", runId)
      expect(run?.tainted?.length).toBe(MAX_OPEN_TAINTS + 1)
      expect(run?.tainted?.at(-1)).toMatchObject({ host: "h99.example.net" })
      expect(run?.stopped).toBeUndefined()
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("a taint that cannot be written fails closed: a request not yet sent is refused (503), one already answered holds the run's gated actions", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const runId = "2026-12-07-10-00-00-0000ca92"
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      yield* runLog.start({ runId, worker: "alice", kind: "box" })
      // The run's events file made unwritable (a directory in its place: root writes through permissions).
      const events = runFiles(layout(paths).runDir("alice", runId)).events
      fs.rmSync(events, { force: true })
      fs.mkdirSync(events)
      const memo = makeTaintMemo()
      const refusal = yield* Effect.flip(taintSentinelBefore(memo, caller(runId), "api.example.com", ["header:x-other"]))
      expect(refusal).toMatchObject({ status: 503, detail: { why: "taint_unrecorded" } })
      expect(refusal.reason).toMatch(/taint could not be recorded/)
      expect(memo.isUnrecorded(runId)).toBe(true)
      // Already answered (a refusal): nothing to refuse, so the run's gated actions are held instead.
      const other = "2026-12-07-10-00-00-0000ca93"
      yield* runLog.start({ runId: other, worker: "alice", kind: "box" })
      const otherEvents = runFiles(layout(paths).runDir("alice", other)).events
      fs.rmSync(otherEvents, { force: true })
      fs.mkdirSync(otherEvents)
      yield* taintOrHold(memo, caller(other), "egress_refused", "evil.example.net", "no_rule")
      expect(memo.isUnrecorded(other)).toBe(true)
      // Once it can be written again, the taint is (the memo did not keep the failed one as written).
      fs.rmSync(otherEvents, { recursive: true })
      yield* taintOrHold(memo, caller(other), "egress_refused", "evil.example.net", "no_rule")
      expect((yield* runLog.read("alice", other))?.tainted?.map((t) => t.host)).toEqual(["evil.example.net"])
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("a run whose events cannot be read reads as tainted (unreadable), never as clean: its taints are not known", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const runId = "2026-12-07-10-00-00-0000ca94"
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      yield* runLog.start({ runId, worker: "alice", kind: "box" })
      yield* refused(makeTaintMemo(), runId, 1)
      const events = runFiles(layout(paths).runDir("alice", runId)).events
      fs.rmSync(events, { force: true })
      fs.mkdirSync(events)
      const run = yield* runLog.read("alice", runId)
      expect(run?.tainted).toMatchObject([{ reason: "unreadable", detail: expect.stringMatching(/could not be read/) }])
    }).pipe(Effect.provide(unitLayer(paths)))
  })
})
