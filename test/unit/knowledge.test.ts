import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { briefing } from "../../src/box/context.js"
import { layout } from "../../src/config/Paths.js"
import { decodeToml } from "../../src/config/decode.js"
import { OrgSchema, type MountRule } from "../../src/config/schema.js"
import { finishRepos } from "../../src/knowledge/backstop.js"
import { knowledgeEnv, protectedHits, reposJson } from "../../src/knowledge/Checkout.js"
import { repoNotes } from "../../src/knowledge/notes.js"
import { provisionRepos } from "../../src/knowledge/provision.js"
import { knowledgePush } from "../../src/knowledge/push.js"
import { tempPaths, unitLayer } from "../support/harness.js"

const WORKER = "alice"
const BOX_USER = { uid: 65532, gid: 65532 }

/** git as the test (the box's stand-in here): it may open any repository. */
const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd, encoding: "utf8" }).trim()

const canonicalRepo = (root: string, bare = false) => {
  const work = path.join(root, "canonical")
  fs.mkdirSync(work, { recursive: true })
  sh(work, "init", "--quiet", "--initial-branch=main")
  fs.writeFileSync(path.join(work, "README.md"), "hello\n")
  fs.mkdirSync(path.join(work, "policy"))
  fs.writeFileSync(path.join(work, "policy", "rules.md"), "be kind\n")
  sh(work, "add", "-A")
  sh(work, "commit", "--quiet", "-m", "first")
  if (!bare) return work
  const b = path.join(root, "canonical.git")
  sh(root, "clone", "--quiet", "--bare", work, b)
  return b
}

const mountOf = (p: string, extra: Partial<MountRule> = {}): MountRule => ({
  name: "knowledge", path: p, kind: "repo", rw: true, gated: true, protect: ["policy"], push_max: "1m", ...extra
})

const runDirFor = (paths: ReturnType<typeof tempPaths>, runId: string) => {
  const dir = layout(paths).runDir(WORKER, runId)
  fs.mkdirSync(dir, { recursive: true })
  return dir
}

describe("gated repos", () => {
  it.effect("a nested git init (empty or with commits) in the clone: the rest is parked, the nested repos named, and the clone kept", () => {
    const paths = tempPaths()
    const canonical = canonicalRepo(paths.home)
    const runId = "2026-11-29-10-00-00-0000000e"
    runDirFor(paths, runId)
    return Effect.gen(function*() {
      const [c] = yield* provisionRepos(WORKER, runId, [mountOf(canonical)], BOX_USER)
      fs.writeFileSync(path.join(c!.clone, "notes.md"), "committed\n")
      sh(c!.clone, "add", "notes.md")
      sh(c!.clone, "commit", "--quiet", "-m", "work")
      fs.writeFileSync(path.join(c!.clone, "draft.md"), "not committed\n")
      // One nested repository with no commit (git add fails on it), one with a commit (git add would keep only its id).
      fs.mkdirSync(path.join(c!.clone, "sub", "empty"), { recursive: true })
      sh(path.join(c!.clone, "sub", "empty"), "init", "--quiet")
      fs.writeFileSync(path.join(c!.clone, "sub", "empty", "inside.md"), "nested work\n")
      fs.mkdirSync(path.join(c!.clone, "tool"))
      sh(path.join(c!.clone, "tool"), "init", "--quiet")
      fs.writeFileSync(path.join(c!.clone, "tool", "a.md"), "a\n")
      sh(path.join(c!.clone, "tool"), "add", "a.md")
      sh(path.join(c!.clone, "tool"), "commit", "--quiet", "-m", "nested")
      const [result] = yield* finishRepos(WORKER, runId)
      const ref = `refs/quarantine/run-${runId}`
      expect(result).toMatchObject({ quarantined_ref: ref, kept: c!.clone })
      expect(result?.error).toContain("sub/empty/, tool/ are git repositories of its own, not parked")
      // The commits and the uncommitted file are parked; the nested repos are not guessed at.
      expect(sh(canonical, "show", `${ref}:draft.md`)).toBe("not committed")
      expect(sh(canonical, "show", `${ref}^:notes.md`)).toBe("committed")
      expect(sh(canonical, "ls-tree", "-r", "--name-only", ref)).not.toContain("tool")
      // Nothing unparked is deleted: the clone, with the nested work, is where the result says.
      expect(fs.readFileSync(path.join(c!.clone, "sub", "empty", "inside.md"), "utf8")).toBe("nested work\n")
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("a run whose record of its checkouts cannot be read or decoded keeps its clones and says where; its push is refused saying why", () => {
    const paths = tempPaths()
    const canonical = canonicalRepo(paths.home)
    const runId = "2026-11-29-10-00-00-0000001f"
    runDirFor(paths, runId)
    return Effect.gen(function*() {
      const [c] = yield* provisionRepos(WORKER, runId, [mountOf(canonical)], BOX_USER)
      fs.writeFileSync(path.join(c!.clone, "draft.md"), "unlanded work\n")
      const record = path.join(layout(paths).runReposDir(WORKER, runId), ".host", "checkouts.json")
      fs.writeFileSync(record, `[{"connection": "knowledge", "clone": `)
      const pushed = yield* knowledgePush(WORKER, runId, undefined)
      expect(pushed).toMatchObject({ ok: false, kind: "failed", reason: expect.stringMatching(/checkouts\.json could not be read/) })
      const [result] = yield* finishRepos(WORKER, runId)
      const dir = layout(paths).runReposDir(WORKER, runId)
      expect(result).toMatchObject({ head: null, kept: dir, error: expect.stringMatching(/checkouts\.json could not be read: .*the run's clones are kept in /) })
      // Nothing of the run's work is deleted, and nothing was landed or parked.
      expect(fs.readFileSync(path.join(c!.clone, "draft.md"), "utf8")).toBe("unlanded work\n")
      expect(sh(canonical, "for-each-ref", "refs/quarantine")).toBe("")
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("a backstop that cannot read the clone at all parks nothing and deletes nothing", () => {
    const paths = tempPaths()
    const canonical = canonicalRepo(paths.home)
    const runId = "2026-11-29-10-00-00-0000000f"
    runDirFor(paths, runId)
    return Effect.gen(function*() {
      const [c] = yield* provisionRepos(WORKER, runId, [mountOf(canonical)], BOX_USER)
      fs.writeFileSync(path.join(c!.clone, "draft.md"), "work\n")
      // The box replaced its .git with a symlink: the host refuses to read it.
      fs.renameSync(path.join(c!.clone, ".git"), path.join(c!.clone, "real-git"))
      fs.symlinkSync("real-git", path.join(c!.clone, ".git"))
      const [result] = yield* finishRepos(WORKER, runId)
      expect(result).toMatchObject({ head: null, kept: c!.clone })
      expect(result?.error).toContain(`nothing parked, the clone is kept at ${c!.clone}`)
      expect(fs.readFileSync(path.join(c!.clone, "draft.md"), "utf8")).toBe("work\n")
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("a run commits and edits without pushing: its work is quarantined, the default branch untouched, the clone removed", () => {
    const paths = tempPaths()
    const canonical = canonicalRepo(paths.home)
    const runId = "2026-11-29-10-00-00-0000000a"
    runDirFor(paths, runId)
    return Effect.gen(function*() {
      const [c] = yield* provisionRepos(WORKER, runId, [mountOf(canonical)], BOX_USER)
      expect(c?.branch).toBe(`roster/alice/${runId}`)
      expect(fs.statSync(c!.clone).uid).toBe(BOX_USER.uid)
      expect(sh(c!.clone, "remote", "get-url", "origin")).toBe("/pihome/mnt/.origins/knowledge")
      const base = sh(canonical, "rev-parse", "main")
      expect(c?.base).toBe(base)
      fs.writeFileSync(path.join(c!.clone, "notes.md"), "committed\n")
      sh(c!.clone, "add", "notes.md")
      sh(c!.clone, "commit", "--quiet", "-m", "work")
      fs.writeFileSync(path.join(c!.clone, "draft.md"), "not committed\n")
      const [result] = yield* finishRepos(WORKER, runId)
      expect(result).toMatchObject({ connection: "knowledge", base, quarantined_ref: `refs/quarantine/run-${runId}` })
      expect(sh(canonical, "rev-parse", "main")).toBe(base)
      const parked = sh(canonical, "rev-parse", `refs/quarantine/run-${runId}`)
      expect(parked).toBe(result?.head)
      expect(sh(canonical, "show", `${parked}:draft.md`)).toBe("not committed")
      expect(sh(canonical, "show", `${parked}^:notes.md`)).toBe("committed")
      expect(fs.existsSync(layout(paths).runReposDir(WORKER, runId))).toBe(false)
      // The next run's briefing names it, until it lands.
      const notes = yield* repoNotes(WORKER, [mountOf(canonical)])
      expect(notes[0]?.unlanded).toEqual([`refs/quarantine/run-${runId}`])
      expect(briefing([mountOf(canonical)], notes)).toContain(`Not landed yet from your earlier runs (fetch them from origin to pick them up): refs/quarantine/run-${runId}`)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("a run that changes nothing is unchanged and parks nothing", () => {
    const paths = tempPaths()
    const canonical = canonicalRepo(paths.home, true)
    const runId = "2026-11-29-10-00-00-0000000b"
    return Effect.gen(function*() {
      yield* provisionRepos(WORKER, runId, [mountOf(canonical)], BOX_USER)
      const [result] = yield* finishRepos(WORKER, runId)
      expect(result?.unchanged).toBe(true)
      expect(sh(canonical, "for-each-ref", "refs/quarantine/")).toBe("")
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("knowledge_push lands a fast-forward; refuses a protected path, a non-fast-forward and an oversized push", () => {
    const paths = tempPaths()
    const canonical = canonicalRepo(paths.home, true)
    const runId = "2026-11-29-10-00-00-0000000c"
    runDirFor(paths, runId)
    return Effect.gen(function*() {
      const [c] = yield* provisionRepos(WORKER, runId, [mountOf(canonical)], BOX_USER)
      const clone = c!.clone
      fs.writeFileSync(path.join(clone, "notes.md"), "landed\n")
      sh(clone, "add", "notes.md")
      sh(clone, "commit", "--quiet", "-m", "good")
      const good = sh(clone, "rev-parse", "HEAD")
      const landed = yield* knowledgePush(WORKER, runId, undefined)
      expect(landed).toMatchObject({ ok: true, head: good, landed_ref: "refs/heads/main", already: false })
      expect(sh(canonical, "rev-parse", "main")).toBe(good)

      fs.writeFileSync(path.join(clone, "policy", "rules.md"), "be sneaky\n")
      sh(clone, "commit", "--quiet", "-am", "bad")
      const protectedPush = yield* knowledgePush(WORKER, runId, "knowledge")
      expect(protectedPush).toMatchObject({ ok: false, kind: "refused" })
      expect(!protectedPush.ok && protectedPush.reason).toContain("protected paths (policy/rules.md)")
      expect(sh(canonical, "rev-parse", "main")).toBe(good)

      sh(clone, "reset", "--quiet", "--hard", good)
      fs.writeFileSync(path.join(clone, "big.bin"), Buffer.alloc(2 * 1024 * 1024, 7))
      sh(clone, "add", "big.bin")
      sh(clone, "commit", "--quiet", "-m", "big")
      const big = yield* knowledgePush(WORKER, runId, undefined)
      expect(!big.ok && big.reason).toMatch(/over this repo's push_max/)

      // Someone else lands on main meanwhile: the run's branch is no longer a fast-forward.
      sh(clone, "reset", "--quiet", "--hard", good)
      const other = path.join(paths.home, "other")
      sh(paths.home, "clone", "--quiet", canonical, other)
      fs.writeFileSync(path.join(other, "theirs.md"), "theirs\n")
      sh(other, "add", "theirs.md")
      sh(other, "commit", "--quiet", "-m", "theirs")
      sh(other, "push", "--quiet", "origin", "main")
      fs.writeFileSync(path.join(clone, "mine.md"), "mine\n")
      sh(clone, "add", "mine.md")
      sh(clone, "commit", "--quiet", "-m", "mine")
      const nonFf = yield* knowledgePush(WORKER, runId, undefined)
      expect(!nonFf.ok && nonFf.reason).toMatch(/^not a fast-forward/)
      const theirs = sh(canonical, "rev-parse", "main")
      expect(theirs).not.toBe(good)

      const [result] = yield* finishRepos(WORKER, runId)
      expect(result?.quarantined_ref).toBe(`refs/quarantine/run-${runId}`)
      expect(sh(canonical, "rev-parse", "main")).toBe(theirs)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("knowledge_push into a repo with the default branch checked out advances its worktree, and only when clean", () => {
    const paths = tempPaths()
    const canonical = canonicalRepo(paths.home)
    const runId = "2026-11-29-10-00-00-0000000d"
    runDirFor(paths, runId)
    return Effect.gen(function*() {
      const [c] = yield* provisionRepos(WORKER, runId, [mountOf(canonical)], BOX_USER)
      fs.writeFileSync(path.join(c!.clone, "notes.md"), "landed\n")
      sh(c!.clone, "add", "notes.md")
      sh(c!.clone, "commit", "--quiet", "-m", "good")
      fs.writeFileSync(path.join(canonical, "README.md"), "edited by the host\n")
      const dirty = yield* knowledgePush(WORKER, runId, undefined)
      expect(!dirty.ok && dirty.reason).toContain("uncommitted changes on main")
      sh(canonical, "checkout", "--quiet", "--", "README.md")
      const ok = yield* knowledgePush(WORKER, runId, undefined)
      expect(ok.ok).toBe(true)
      expect(fs.readFileSync(path.join(canonical, "notes.md"), "utf8")).toBe("landed\n")
      expect(sh(canonical, "status", "--porcelain")).toBe("")
      const [result] = yield* finishRepos(WORKER, runId)
      expect(result?.landed_ref).toBe("refs/heads/main")
      expect(sh(canonical, "for-each-ref", "refs/quarantine/", "refs/roster/")).toBe("")
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("a .git/config the box planted (fsmonitor, hooks, a filter, sshCommand) runs nothing on the host; a symlinked git dir is refused", () => {
    const paths = tempPaths()
    const canonical = canonicalRepo(paths.home, true)
    const runId = "2026-11-29-10-00-00-0000000e"
    runDirFor(paths, runId)
    const canary = path.join(paths.home, "canary")
    const plant = path.join(paths.home, "plant.sh")
    fs.writeFileSync(plant, `#!/bin/sh\necho "$0 $*" >> ${canary}\ncat\n`, { mode: 0o755 })
    return Effect.gen(function*() {
      const [c] = yield* provisionRepos(WORKER, runId, [mountOf(canonical)], BOX_USER)
      const clone = c!.clone
      const hooks = path.join(clone, ".git", "evil-hooks")
      fs.mkdirSync(hooks)
      for (const h of ["pre-commit", "post-checkout", "reference-transaction", "pre-push", "post-index-change", "fsmonitor-watchman"]) {
        fs.writeFileSync(path.join(hooks, h), `#!/bin/sh\necho hook-${h} >> ${canary}\n`, { mode: 0o755 })
      }
      fs.appendFileSync(path.join(clone, ".git", "config"), [
        "[core]", `\tfsmonitor = ${plant}`, `\thooksPath = ${hooks}`, `\tsshCommand = ${plant}`, `\tpager = ${plant}`,
        '[filter "evil"]', `\tclean = ${plant} clean`, `\tsmudge = ${plant} smudge`, "\trequired = true",
        "[uploadpack]", `\tpackObjectsHook = ${plant}`,
        "[credential]", `\thelper = !${plant}`, ""
      ].join("\n"))
      fs.writeFileSync(path.join(clone, ".gitattributes"), "* filter=evil\n")
      fs.writeFileSync(path.join(clone, "notes.md"), "work\n")
      // The test's own git (the box's stand-in) must not fire them either.
      const safe = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "filter.evil.clean=cat", "-c", "filter.evil.smudge=cat"]
      sh(clone, ...safe, "add", "notes.md")
      sh(clone, ...safe, "commit", "--quiet", "-m", "w")
      expect(fs.existsSync(canary)).toBe(false)
      const pushed = yield* knowledgePush(WORKER, runId, undefined)
      expect(pushed.ok).toBe(true)
      const [result] = yield* finishRepos(WORKER, runId)
      expect(result?.quarantined_ref).toBeDefined() // the uncommitted .gitattributes
      expect(fs.existsSync(canary) ? fs.readFileSync(canary, "utf8") : "").toBe("")

      // A git dir that is a link elsewhere on the host is never read.
      const runId2 = "2026-11-29-10-00-00-0000000f"
      runDirFor(paths, runId2)
      const [c2] = yield* provisionRepos(WORKER, runId2, [mountOf(canonical)], BOX_USER)
      fs.rmSync(path.join(c2!.clone, ".git"), { recursive: true })
      fs.symlinkSync(path.join(canonical), path.join(c2!.clone, ".git"))
      const refused = yield* knowledgePush(WORKER, runId2, undefined)
      expect(!refused.ok && refused.reason).toContain(".git is a symlink")
      const [r2] = yield* finishRepos(WORKER, runId2)
      expect(r2?.error).toContain(".git is a symlink")
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it("ROSTER_REPOS_JSON lists every checkout; ROSTER_KNOWLEDGE_* names the one called knowledge", () => {
    const c = {
      connection: "knowledge", canonical: "/r", canonical_git_dir: "/r/.git", clone: "/c", scratch: "/s", default_branch: "main",
      base: "abc", branch: "roster/alice/r1", mode: "rw" as const, protect: [], push_max: 1
    }
    expect(JSON.parse(reposJson([c, { ...c, connection: "docs", mode: "ro" }]))).toEqual([
      { connection: "knowledge", dir: "/pihome/mnt/knowledge", base: "abc", branch: "roster/alice/r1", mode: "rw" },
      { connection: "docs", dir: "/pihome/mnt/docs", base: "abc", branch: "roster/alice/r1", mode: "ro" }
    ])
    expect(knowledgeEnv([c])).toEqual([
      `ROSTER_REPOS_JSON=${reposJson([c])}`,
      "ROSTER_KNOWLEDGE_DIR=/pihome/mnt/knowledge", "ROSTER_KNOWLEDGE_BASE=abc", "ROSTER_KNOWLEDGE_MODE=rw", "ROSTER_KNOWLEDGE_BRANCH=roster/alice/r1"
    ])
    expect(knowledgeEnv([])).toEqual([])
    expect(protectedHits(["policy/a.md", "policyx.md", "LICENSE", "src/x"], ["./policy/", "LICENSE"])).toEqual(["policy/a.md", "LICENSE"])
  })

  it("the briefing says what is mounted: a plain repo read-only, a gated one as the run's own clone", () => {
    const repo = mountOf("/r", { name: "docs", gated: false, rw: true })
    const text = briefing([repo, mountOf("/k")], [{ name: "knowledge", rw: true, defaultBranch: "main", protect: ["policy"], unlanded: [] }])
    expect(text).toContain("/pihome/mnt/docs: a git repository granted to you (read-only).")
    expect(text).toContain("/pihome/mnt/knowledge: your own clone of the knowledge repository (read-write)")
    expect(text).toContain("call knowledge_push: it lands a fast-forward only, never a change to policy")
    expect(text).not.toContain("Not landed yet")
    expect(text).not.toContain("/pihome/channel")
  })

  it("gated or protect on a dir mount is a config error that names the fix", () => {
    const bad = decodeToml(OrgSchema, "org.toml", `[[mount]]\nname = "notes"\npath = "/n"\ngated = true\n`)
    expect(Either.isLeft(bad) && bad.left.message).toContain(`mount[0].gated: gated applies to kind = "repo" only: set kind = "repo"`)
    const ok = decodeToml(OrgSchema, "org.toml", `[[mount]]\nname = "k"\npath = "/k"\nkind = "repo"\ngated = true\nprotect = ["a"]\n`)
    expect(Either.isRight(ok) && ok.right.mount[0]?.push_max).toBe("64m")
    expect(Schema.is(Schema.String)("x")).toBe(true)
  })
})
