import { Effect } from "effect"
import type { MountRule } from "../config/schema.js"
import { inCanonical, readCanonical } from "./canonical.js"
import { type Checkout, protectedHits } from "./Checkout.js"
import { readCheckouts } from "./backstop.js"
import { fetchFromClone } from "./fromClone.js"
import { git, gitLine, gitSays } from "./HostGit.js"

export type PushOutcome =
  | { readonly ok: true; readonly connection: string; readonly head: string; readonly landed_ref: string; readonly already: boolean }
  /** `refused`: the worker can fix it (rebase, drop a protected change); `failed`: the host could not do it; `tainted`: a person must decide. */
  | { readonly ok: false; readonly connection: string | null; readonly head: string | null; readonly kind: "refused" | "failed" | "tainted"; readonly reason: string }

const short = (sha: string) => sha.slice(0, 12)

const chooseCheckout = (checkouts: ReadonlyArray<Checkout>, connection: string | undefined) => {
  const names = checkouts.map((c) => c.connection).join(", ")
  if (checkouts.length === 0) return "this run has no gated repo to push"
  if (connection !== undefined) return checkouts.find((c) => c.connection === connection) ?? `this run has no gated repo "${connection}" (it has: ${names})`
  return checkouts.length === 1 ? checkouts[0]! : checkouts.find((c) => c.connection === "knowledge") ?? `this run has several gated repos: name one (${names})`
}

/** Bytes (uncompressed) of the objects `head` brings that the canonical branch does not have. */
const addedBytes = (c: Checkout, head: string, landed: string) =>
  Effect.gen(function*() {
    const ids = yield* git({ gitDir: c.scratch, args: ["rev-list", "--objects", "--no-object-names", head, "--not", landed] })
    if (ids.trim() === "") return 0
    const sizes = yield* git({ gitDir: c.scratch, args: ["cat-file", "--batch-check=%(objectsize)"], input: ids })
    return sizes.split("\n").reduce((n, line) => n + (Number(line) || 0), 0)
  })

/** What stops this push landing, as the worker should read it; undefined when it may land. */
const checkPush = (c: Checkout, head: string, landed: string) =>
  Effect.gen(function*() {
    if (!(yield* gitSays({ gitDir: c.scratch, args: ["merge-base", "--is-ancestor", landed, head] }))) {
      return `not a fast-forward: ${c.default_branch} is at ${short(landed)}, which your branch does not contain — ` +
        `git fetch origin && git rebase origin/${c.default_branch}, then push again`
    }
    const changed = (yield* git({ gitDir: c.scratch, args: ["diff", "--no-renames", "--name-only", "-z", landed, head] })).split("\0").filter((p) => p !== "")
    const hits = protectedHits(changed, c.protect)
    if (hits.length > 0) {
      return `it changes protected paths (${hits.slice(0, 5).join(", ")}${hits.length > 5 ? ", …" : ""}): leave ${c.protect.join(", ")} as they are on ${c.default_branch}`
    }
    const bytes = yield* addedBytes(c, head, landed)
    if (bytes > c.push_max) return `it adds ${bytes} bytes, over this repo's push_max of ${c.push_max}: land smaller pieces`
    return undefined
  })

/**
 * Moves the canonical default branch from `landed` to `head` (already checked as a fast-forward),
 * `ref` naming `head` in the canonical repo. A checked-out branch is advanced with its worktree
 * only when that worktree is clean, any other branch by a compare-and-swap of the ref.
 */
const advance = (at: ReturnType<typeof inCanonical>, branch: string, ref: string, head: string, landed: string, message: string) =>
  Effect.gen(function*() {
    const bare = (yield* gitLine({ ...at, args: ["rev-parse", "--is-bare-repository"] })) === "true"
    // symbolic-ref --quiet fails only when HEAD is detached: no branch checked out, so no worktree to advance.
    const current = bare ? "" : yield* gitLine({ ...at, args: ["symbolic-ref", "--quiet", "HEAD"] }).pipe(Effect.orElseSucceed(() => ""))
    if (current === `refs/heads/${branch}`) {
      const dirty = yield* git({ ...at, args: ["status", "--porcelain", "--untracked-files=no"] })
      if (dirty.trim() !== "") return `the canonical repo has uncommitted changes on ${branch} (the host must commit or stash them there)`
      yield* git({ ...at, args: ["merge", "--quiet", "--ff-only", ref] })
      return undefined
    }
    return yield* git({ ...at, args: ["update-ref", "-m", message, `refs/heads/${branch}`, head, landed] }).pipe(
      Effect.as(undefined),
      Effect.catchTag("GitError", () => Effect.succeed(`${branch} moved while this push was checked: fetch origin, rebase, push again`))
    )
  })

/** Lands a checked push: the objects come from the host's own git dir, through a landing ref removed after. */
const land = (c: Checkout, runId: string, head: string, landed: string) =>
  Effect.gen(function*() {
    const at = inCanonical({ path: c.canonical, gitDir: c.canonical_git_dir })
    const landing = `refs/roster/landing/run-${runId}`
    yield* git({ gitDir: c.scratch, args: ["update-ref", "refs/roster/land", head] })
    yield* git({ ...at, args: ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", c.scratch, `+refs/roster/land:${landing}`] })
    return yield* advance(at, c.default_branch, landing, head, landed, `roster: knowledge_push of run ${runId}`).pipe(
      // A landing ref left (refs/roster/landing/…) holds nothing that matters and is replaced by the run's next push.
      Effect.ensuring(git({ ...at, args: ["update-ref", "-d", landing] }).pipe(Effect.ignore))
    )
  })

/** What a person's untaint did with one quarantined ref. */
export interface Landing {
  readonly connection: string
  readonly ok: boolean
  readonly ref: string
  readonly head?: string
  readonly detail: string
}

/**
 * A person lands a run's quarantined work (`roster runs untaint`): the same fast-forward and
 * protected-path checks a knowledge_push meets; the objects are in the canonical repo already.
 * Anything else is left on its ref with how to merge it by hand.
 */
export const landQuarantined = Effect.fn("knowledge.landQuarantined")(function*(mount: MountRule, ref: string, runId: string) {
  const result = (ok: boolean, detail: string, head?: string): Landing => ({ connection: mount.name, ok, ref, ...(head ? { head } : {}), detail })
  return yield* Effect.gen(function*() {
    const c = yield* readCanonical(mount)
    const at = inCanonical(c)
    // --verify --quiet fails only when there is no such commit: none to land, said just below.
    const head = yield* gitLine({ ...at, args: ["rev-parse", "--verify", "--quiet", `${ref}^{commit}`] }).pipe(Effect.orElseSucceed(() => ""))
    if (head === "") return result(false, `${ref} is not in ${c.path} any more`)
    if (yield* gitSays({ ...at, args: ["merge-base", "--is-ancestor", head, c.head] })) return result(true, `already on ${c.defaultBranch}`, head)
    if (!(yield* gitSays({ ...at, args: ["merge-base", "--is-ancestor", c.head, head] }))) {
      return result(false, `not a fast-forward of ${c.defaultBranch}: merge it by hand in ${c.path} (git merge ${ref})`, head)
    }
    const changed = (yield* git({ ...at, args: ["diff", "--no-renames", "--name-only", "-z", c.head, head] })).split("\0").filter((p) => p !== "")
    const hits = protectedHits(changed, mount.protect)
    if (hits.length > 0) return result(false, `it changes protected paths (${hits.slice(0, 5).join(", ")}): review and merge it by hand (git merge ${ref})`, head)
    const stop = yield* advance(at, c.defaultBranch, ref, head, c.head, `roster: untaint of run ${runId}`)
    return stop === undefined ? result(true, `landed on ${c.defaultBranch}`, head) : result(false, stop, head)
  }).pipe(Effect.catchAll((e) => Effect.succeed(result(false, `the host could not land it: ${e.message}`))))
})

/**
 * knowledge_push: the run's branch lands on the canonical default branch only as a fast-forward
 * that leaves the protected paths alone and stays under the size cap. Anything else stays where
 * it is, and the run's end parks it in quarantine.
 */
export const knowledgePush = Effect.fn("knowledge.push")(function*(worker: string, runId: string, connection: string | undefined) {
  const checkouts = yield* readCheckouts(worker, runId).pipe(Effect.either)
  if (checkouts._tag === "Left") return { ok: false, connection: connection ?? null, head: null, kind: "failed", reason: checkouts.left.message } satisfies PushOutcome
  const chosen = chooseCheckout(checkouts.right, connection)
  if (typeof chosen === "string") return { ok: false, connection: connection ?? null, head: null, kind: "refused", reason: chosen } satisfies PushOutcome
  const c = chosen
  const refuse = (head: string | null, reason: string, kind: "refused" | "failed" = "refused"): PushOutcome => ({ ok: false, connection: c.connection, head, kind, reason })
  if (c.mode !== "rw") return refuse(null, `${c.connection} is read-only for this run`)
  return yield* Effect.gen(function*() {
    const head = yield* fetchFromClone(c, `refs/heads/${c.branch}`, "refs/box/push")
    const landed = yield* gitLine({ ...inCanonical({ path: c.canonical, gitDir: c.canonical_git_dir }), args: ["rev-parse", "--verify", `refs/heads/${c.default_branch}`] })
    const landedRef = `refs/heads/${c.default_branch}`
    if (head === landed) return { ok: true, connection: c.connection, head, landed_ref: landedRef, already: true } satisfies PushOutcome
    const stop = (yield* checkPush(c, head, landed)) ?? (yield* land(c, runId, head, landed))
    return stop === undefined ? { ok: true, connection: c.connection, head, landed_ref: landedRef, already: false } satisfies PushOutcome : refuse(head, stop)
  }).pipe(Effect.catchAll((e) =>
    Effect.succeed(refuse(null, e._tag === "UnsafeClone" ? e.message : `the host could not push: ${e.message}`, e._tag === "UnsafeClone" ? "refused" : "failed"))
  ))
})
