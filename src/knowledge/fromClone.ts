import { Path } from "@effect/platform"
import { Effect } from "effect"
import type { Checkout } from "./Checkout.js"
import { checkClone } from "./cloneCheck.js"
import { git, HARDENING } from "./HostGit.js"

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`

/**
 * The serving side of a fetch from the box's clone. A local fetch drops the caller's `-c` options
 * before it starts upload-pack in the other repository, so the hardening is spelled out again here.
 */
export const uploadPackFor = (clone: string) =>
  ["git", ...HARDENING, "-c", `safe.directory=${clone}`, "-c", `safe.directory=${clone}/.git`, "upload-pack"].map(quote).join(" ")

/**
 * Copies a ref of the box's clone into the host's own git dir for it (`into`): the clone's git
 * dir is checked first, and nothing of its config, hooks or worktree runs. (While the box still
 * runs — a knowledge_push — it could swap a link in after the check; the backstop runs after
 * the box is gone.)
 */
export const fetchFromClone = Effect.fn("knowledge.fetchFromClone")(function*(
  c: Checkout,
  from: string,
  into: string
) {
  const path = yield* Path.Path
  yield* checkClone(c.clone)
  yield* git({
    gitDir: c.scratch,
    args: [
      "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head",
      "--upload-pack", uploadPackFor(c.clone),
      "--", path.join(c.clone, ".git"), `+${from}:${into}`
    ]
  })
  return (yield* git({ gitDir: c.scratch, args: ["rev-parse", "--verify", `${into}^{commit}`] })).trim()
})
