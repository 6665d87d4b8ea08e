import Dockerode from "dockerode"
import * as fs from "node:fs"
import * as path from "node:path"

const docker = new Dockerode()

/** A token file of a deployment, as roster writes it. */
interface Token {
  readonly file: string
  readonly run_id: string
  readonly worker: string
  readonly warm?: boolean
}

/**
 * What a deployment has in the engine and its token folder, in two parts: warm boxes waiting for their
 * worker's next run (labelled `warm`, still under the name they were made with) and their unbound
 * tokens — what a user's deployment keeps by default — and everything else: a run's box or token left
 * behind. A test asserts both: no run's leftovers, and only the warm boxes it expects (each with its token).
 */
export const leftovers = async (config: string, state: string, o: { readonly all?: boolean } = {}) => {
  const containers = (await docker.listContainers({ all: true, filters: { label: [`roster.deployment=${config}`] } }))
    .filter((c) => o.all === true || c.State === "running" || c.State === "created")
  const waiting = (c: Dockerode.ContainerInfo) =>
    c.Labels["roster.kind"] === "warm" && c.Names.some((n) => n.replace(/^\//, "") === `roster-box-${c.Labels["roster.run-id"] ?? ""}`)
  const dir = path.join(state, "identity")
  const tokens: Array<Token> = (fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith(".json")) : []).flatMap((f) => {
    try {
      return [{ file: f, ...(JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")) as Omit<Token, "file">) }]
    } catch {
      return [{ file: f, run_id: "?", worker: "?" }]
    }
  })
  const warmBoxes = containers.filter(waiting)
  const warmIds = new Set(warmBoxes.map((c) => c.Labels["roster.run-id"] ?? ""))
  return {
    /** Boxes a run left (not a warm box waiting): none after a run has ended. */
    runBoxes: containers.filter((c) => !waiting(c)),
    /** Warm boxes waiting for their worker's next run. */
    warmBoxes,
    /** The workers whose warm box waits. */
    warmWorkers: warmBoxes.map((c) => c.Labels["roster.worker"] ?? "").sort(),
    /** Tokens that are not a waiting warm box's (an unbound token of a warm box still being made counts as its box's). */
    runTokens: tokens.filter((t) => !(t.warm === true)),
    /** Unbound tokens of warm boxes. */
    warmTokens: tokens.filter((t) => t.warm === true),
    /** Unbound warm tokens whose box is not waiting (gone, or not yet made): none once things settle. */
    strayWarmTokens: tokens.filter((t) => t.warm === true && !warmIds.has(t.run_id)),
    /** Whether every waiting warm box has its unbound token. */
    warmBoxesHaveTokens: [...warmIds].every((id) => tokens.some((t) => t.warm === true && t.run_id === id))
  }
}

/** The leftovers once no run's box or token is left (a run's close takes a moment), or as they are after `ms`. */
export const settledLeftovers = async (config: string, state: string, ms = 15_000) => {
  const by = Date.now() + ms
  for (;;) {
    const l = await leftovers(config, state)
    if ((l.runBoxes.length === 0 && l.runTokens.length === 0 && l.strayWarmTokens.length === 0) || Date.now() > by) return l
    await new Promise((r) => setTimeout(r, 200))
  }
}

/** A deployment's folders, as the helpers read them. */
export interface Roots {
  readonly file: (...parts: Array<string>) => string
}

/**
 * Asserts a deployment has nothing a run left behind — no box but waiting warm boxes, no token but
 * theirs — and that what waits is what a user's deployment keeps: each warm box with its unbound
 * token, at most `warmMax` of them, of the workers named in `warm` when given. Waits for a run's
 * close to finish first (it removes its box and token a moment after the run's end is said).
 */
export const expectOnlyWarm = async (d: Roots, o: { readonly warm?: ReadonlyArray<string>; readonly warmMax?: number } = {}) => {
  const { expect } = await import("vitest")
  const l = await settledLeftovers(d.file("config"), d.file("state"))
  expect(l.runBoxes.map((c) => `${c.Names.join(",")} (${c.Labels["roster.kind"]})`), "boxes a run left").toEqual([])
  expect(l.runTokens.map((t) => `${t.file}: run ${t.run_id} of ${t.worker}`), "tokens a run left").toEqual([])
  expect(l.warmBoxesHaveTokens, "every waiting warm box holds its unbound token").toBe(true)
  expect(l.strayWarmTokens.map((t) => `${t.file}: warm box ${t.run_id} of ${t.worker}`), "warm tokens whose box is gone").toEqual([])
  expect(l.warmBoxes.length).toBeLessThanOrEqual(o.warmMax ?? 2)
  if (o.warm) expect(l.warmWorkers).toEqual([...o.warm].sort())
  return l
}

/** The deployment's boxes that are not warm boxes waiting (a run's: a cold box, or a warm box a run took). */
export const runBoxesOf = async (config: string) => (await leftovers(config, "/nonexistent")).runBoxes

/**
 * The token of `worker`'s run that the gateway serves now: bound to a run (not a warm box's, waiting), not
 * one that was already a run's before `before` was taken (a run that ended, its token not yet removed), and
 * its run's box going by the run's name — a warm box's token is bound a moment before the engine renames
 * the box, and until then the gateway finds no live box of the run (407, "the run of this token has ended").
 */
export const servedRunToken = async (d: Roots, worker: string, before: ReadonlySet<string>, ms = 60_000) => {
  const by = Date.now() + ms
  for (;;) {
    const l = await leftovers(d.file("config"), d.file("state"), { all: true })
    const token = l.runTokens.find((t) => t.worker === worker && !before.has(t.file))
    if (token) {
      const named = await docker.listContainers({ all: true, filters: { label: [`roster.deployment=${d.file("config")}`], name: [`roster-box-${token.run_id}`] } })
      if (named.some((c) => c.State === "running")) return token.file.replace(/\.json$/, "")
    }
    if (Date.now() > by) throw new Error(`no served run token of ${worker} after ${ms / 1000} s`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** The token files that are runs' now (taken before starting a run, for servedRunToken). */
export const runTokenFiles = async (d: Roots) => new Set((await leftovers(d.file("config"), d.file("state"))).runTokens.map((t) => t.file))
