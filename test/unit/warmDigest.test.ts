import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { systemPromptOf } from "../../src/box/context.js"
import { ONE_SHOT, type WarmShape, warmDigest } from "../../src/box/warmBox.js"
import { OrgSchema, WorkerSchema } from "../../src/config/schema.js"

/** What a warm box of alice is made from, as prepareRun reads it: org.toml, her worker.toml, her identity. */
const made = (org: Record<string, unknown> = {}, worker: Record<string, unknown> = {}, identity = "You are alice.") => ({
  org: Schema.decodeUnknownSync(OrgSchema)(org),
  settings: Schema.decodeUnknownSync(WorkerSchema)(worker),
  mounts: [],
  identity,
  channel: null,
  hidden: [] as ReadonlyArray<string>
})

/** Its digest with the system prompt a run of it would get, with no gated repo (or `repos`' notes). */
const digest = (m: ReturnType<typeof made>, shape: WarmShape, repos: Parameters<typeof systemPromptOf>[2] = []) =>
  warmDigest(m, shape, systemPromptOf(m.identity, m.mounts, repos, m.channel))

const grant = (scope: ReadonlyArray<string>) => ({ grant: [{ name: "docs", hosts: ["docs.example.com"], scope, credential: "docs" }] })
const session = { kind: "session", chatSend: null, termSend: true, channel: null } as const

describe("what a warm box was made from (its digest): a claim takes it only while a run would be made from the same", () => {
  it("a run of the worker tainted since the box was made (a folder a box made now would hide) is another box", () => {
    const base = made(grant(["org/*"]))
    expect(digest({ ...base, hidden: ["2026-12-07-10-00-00-0000a0a0"] }, ONE_SHOT)).not.toBe(digest(base, ONE_SHOT))
  })

  it("a change of the worker's grants, the runtime, the box's hardening, worker.toml or identity.md is another box", () => {
    const base = digest(made(grant(["org/*"])), ONE_SHOT)
    expect(digest(made(grant(["org/*"])), ONE_SHOT)).toBe(base)
    const others = [
      made(grant(["org/bob"])), // the grant no longer reaches alice
      made({ ...grant(["org/*"]), box: { runtime: "runc" } }),
      made({ ...grant(["org/*"]), box: { runtime: "runsc" } }),
      made({ ...grant(["org/*"]), box: { memory: "2g" } }),
      made(grant(["org/*"]), { model: "anthropic/claude-sonnet-4-5" }),
      made(grant(["org/*"]), {}, "You are alice. You keep your notes short.")
    ].map((m) => digest(m, ONE_SHOT))
    for (const d of others) expect(d).not.toBe(base)
    // Its briefing: a gated repo's work now waiting in quarantine (or held for a person) is another box.
    const repo = { name: "knowledge", rw: true, protect: [], defaultBranch: "main", unlanded: [] as Array<string> }
    const clean = digest(made(grant(["org/*"])), ONE_SHOT, [repo])
    expect(digest(made(grant(["org/*"])), ONE_SHOT, [{ ...repo, unlanded: ["refs/quarantine/run-x"] }])).not.toBe(clean)
    expect(digest(made(grant(["org/*"])), ONE_SHOT, [{ ...repo, unlanded: ["refs/quarantine/run-x"], tainted: new Map([["refs/quarantine/run-x", "egress_refused"]]) }]))
      .not.toBe(digest(made(grant(["org/*"])), ONE_SHOT, [{ ...repo, unlanded: ["refs/quarantine/run-x"] }]))
    expect(new Set(others).size).toBe(others.length)
  })

  it("how warm boxes are kept, and a session's own idle time and ceilings, are not what a box is made from; a one-shot's ceiling is", () => {
    const base = made()
    const kept = made({ box: { warm: "recent", warm_max: 5, warm_idle_min: 90, idle_secs: 60, session_ceiling_min: 30, turn_ceiling_min: 5 } })
    expect(digest(kept, ONE_SHOT)).toBe(digest(base, ONE_SHOT))
    expect(digest(kept, session)).toBe(digest(base, session))
    // A one-shot's ceiling is in its box's environment (its deadline); a session's box does not see it.
    const ceiling = made({ box: { ceiling_min: 5 } })
    expect(digest(ceiling, ONE_SHOT)).not.toBe(digest(base, ONE_SHOT))
    expect(digest(ceiling, session)).toBe(digest(base, session))
    // A talk's box is not a one-shot's.
    expect(digest(base, session)).not.toBe(digest(base, ONE_SHOT))
  })
})
