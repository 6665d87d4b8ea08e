import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src")
const sources = () =>
  (fs.readdirSync(src, { recursive: true }) as Array<string>).filter((f) => f.endsWith(".ts")).map((f) => ({ file: path.join("src", f), text: fs.readFileSync(path.join(src, f), "utf8") }))

/** Where `JSON.parse(…)` is cast to a shape (`as T`, or a typed declaration) instead of decoded by a Schema. */
export const parsedCasts = (text: string): Array<number> => {
  const lines: Array<number> = []
  for (let at = text.indexOf("JSON.parse("); at >= 0; at = text.indexOf("JSON.parse(", at + 1)) {
    let depth = 0
    let end = at + "JSON.parse".length
    for (; end < text.length; end++) {
      if (text[end] === "(") depth++
      else if (text[end] === ")" && --depth === 0) break
    }
    const argument = text.slice(at + "JSON.parse(".length, end)
    // A deep copy of roster's own value is not outside data.
    if (argument.startsWith("JSON.stringify(")) continue
    const after = text.slice(end + 1, end + 40)
    const lineStart = text.lastIndexOf("\n", at) + 1
    const before = text.slice(lineStart, at)
    const cast = /^\s*as\s+(?!unknown\b)/.test(after)
    const typedDeclaration = /(?:const|let|var)\s+\w+\s*:\s*(?!\s|unknown\b)[^=]+=\s*$/.test(before)
    if (cast || typedDeclaration) lines.push(text.slice(0, at).split("\n").length)
  }
  return lines
}

/** The lines that import Node's file system directly (`node:fs`, `node:fs/promises`, `fs`). */
export const nodeFsImports = (text: string): Array<number> =>
  text.split("\n").flatMap((line, i) => (/^\s*import\b[^"']*["'](?:node:)?fs(?:\/promises)?["']/.test(line) || /\bimport\(\s*["'](?:node:)?fs(?:\/promises)?["']\s*\)/.test(line) ? [i + 1] : []))

/** The lines that run an Effect from a plain callback with no scope owning the fiber: a bare `Runtime.run*` or `Effect.run*` (comments aside). */
export const bareRuns = (text: string): Array<number> =>
  text.split("\n").flatMap((line, i) =>
    !/^\s*(\*|\/\/)/.test(line) && /\b(?:Runtime|Effect)\.run(?:Fork|Promise|Sync|Callback)\b/.test(line) ? [i + 1] : [])

/** The lines that import the engine itself (the `Docker` service, its request shapes, its layers) rather than only its errors. */
export const engineImports = (text: string): Array<number> =>
  text.split("\n").flatMap((line, i) => {
    const m = /^\s*(?:import|export)\s+(?:type\s+)?\{([^}]*)\}\s+from\s+["'][./]*(?:[\w/]*\/)?docker\/Docker(?:Live|Test)?\.js["']/.exec(line)
    if (!m) return []
    const names = (m[1] ?? "").split(",").map((n) => n.trim().replace(/^type\s+/, "")).filter((n) => n !== "")
    return names.every((n) => n === "DockerError" || n === "DockerUnavailable") ? [] : [i + 1]
  })

/** The lines (trimmed) that turn a failure into success or silence with no comment on them or just above. */
export const silentFailures = (text: string): Array<string> => {
  const lines = text.split("\n")
  return lines.flatMap((l, i) => {
    if (!/orElseSucceed|Effect\.ignore\b|catchAll\(\(\) => Effect\.void\)|orElse\(\(\) =>/.test(l)) return []
    const near = [lines[i - 1] ?? "", lines[i - 2] ?? "", lines[i - 3] ?? "", l].join("\n")
    return /\/\/|\/\*|^\s*\*/m.test(near) ? [] : [l.trim()]
  })
}

/**
 * The lines that read what only the decision may read: a grant, an allow or a rule type (or the rule and
 * entry modules), the canonical path, or org.toml's egress sections and a compiled entry's parts.
 */
export const decisionReads = (text: string): Array<number> =>
  text.split("\n").flatMap((line, i) => {
    const imported = /^\s*import\b.*["'][./]*(?:[\w/]*\/)?(?:config\/requestRule|policy\/requestRules|policy\/hostEntry|policy\/canonicalPath)\.js["']/.test(line) ||
      /^\s*import\b[^"']*\b(?:GrantRule|AllowRule|RequestRule|PolicyEntry|CompiledRules?)\b/.test(line)
    const reads = /\b(?:org|policy)\.(?:grant|allow|route|entries|routes)\b/.test(line) || /\bentry\.(?:rules|grant|hosts)\b/.test(line)
    return imported || reads ? [i + 1] : []
  })

describe("source rules", () => {
  it("the check finds a cast of parsed data, and lets a Schema's input through", () => {
    expect(parsedCasts(`const a = JSON.parse(x) as { b: number }`)).toEqual([1])
    expect(parsedCasts(`\nconst a: Foo = JSON.parse(read(f, "utf8"))`)).toEqual([2])
    expect(parsedCasts(`const a = JSON.parse(x) as unknown`)).toEqual([])
    expect(parsedCasts(`const a: unknown = JSON.parse(x)`)).toEqual([])
    expect(parsedCasts(`const c = JSON.parse(JSON.stringify(spec)) as Spec`)).toEqual([])
  })

  it("no piece of outside data in src/ is cast to a shape after JSON.parse: each is decoded by a Schema", () => {
    const found = sources().flatMap(({ file, text }) => parsedCasts(text).map((line) => `${file}:${line}`))
    expect(found, "decode these with a Schema (Schema.parseJson / decodeUnknown), or parse to `unknown` and decode").toEqual([])
  })

  it("the file-system check finds each way of importing node:fs, and nothing else", () => {
    expect(nodeFsImports(`import * as fs from "node:fs"\nimport * as fsp from "node:fs/promises"\nimport { readFileSync } from "fs"`)).toEqual([1, 2, 3])
    expect(nodeFsImports(`const m = await import("node:fs")`)).toEqual([1])
    expect(nodeFsImports(`import { FileSystem } from "@effect/platform"\nimport * as path from "node:path"`)).toEqual([])
  })

  it("files are read and written through the FileSystem service: node:fs is imported only inside src/fs/", () => {
    const found = sources().filter(({ file }) => !file.startsWith(path.join("src", "fs") + path.sep))
      .flatMap(({ file, text }) => nodeFsImports(text).map((line) => `${file}:${line}`))
    expect(found, "use @effect/platform's FileSystem (or a helper in src/fs/) instead").toEqual([])
  })

  it("the bridge check finds a bare run of an Effect, and not one in a comment or a FiberSet's runtime", () => {
    expect(bareRuns(`const run = Runtime.runFork(runtime)\nvoid Effect.runPromise(x)\nRuntime.runSync(rt)(e)`)).toEqual([1, 2, 3])
    expect(bareRuns(` * Effect.runPromise(program)\n// Runtime.runFork(x)\nconst run = yield* FiberSet.makeRuntime<never>()`)).toEqual([])
  })

  it("every callback-to-Effect bridge is supervised: no bare Runtime.run* or Effect.run* outside src/bin.ts (a FiberSet's runtime in the scope that owns the callback)", () => {
    const found = sources().filter(({ file }) => file !== path.join("src", "bin.ts"))
      .flatMap(({ file, text }) => bareRuns(text).map((line) => `${file}:${line}`))
    expect(found, "use FiberSet.makeRuntime / makeRuntimePromise in the scope that owns the listener, so closing it interrupts what it started").toEqual([])
  })

  it("the engine check finds an import of the Docker service or its shapes, and lets its errors through", () => {
    expect(engineImports(`import { Docker } from "../docker/Docker.js"\nimport type { ContainerSpec } from "../../docker/Docker.js"\nimport { DockerLive } from "./docker/DockerLive.js"`)).toEqual([1, 2, 3])
    expect(engineImports(`import type { DockerError, DockerUnavailable } from "../docker/Docker.js"\nimport { BoxBackend } from "./BoxBackend.js"`)).toEqual([])
  })

  it("only the Docker box backend (src/box/docker/), the image builder (src/image/) and the engine itself reach the Docker service: everything else goes through BoxBackend", () => {
    const allowed = [path.join("src", "docker") + path.sep, path.join("src", "box", "docker") + path.sep, path.join("src", "image") + path.sep]
    const roots = ["index.ts", "RosterLive.ts", "testing.ts"].map((f) => path.join("src", f))
    const found = sources().filter(({ file }) => !allowed.some((a) => file.startsWith(a)) && !roots.includes(file))
      .flatMap(({ file, text }) => engineImports(text).map((line) => `${file}:${line}`))
    expect(found, "take BoxBackend (src/backend/BoxBackend.ts) instead: a box in roster's words, so another backend plugs in beneath").toEqual([])
  })

  it("the gateway's listeners act on the one decision: none reads a grant, an allow or a rule itself", () => {
    // The modules that take a request off the wire (and what they hand it to) and act on its verdict.
    const listeners = [
      "gateway/server.ts", "gateway/egress/connect.ts", "gateway/egress/forward.ts", "gateway/egress/decision.ts", "gateway/inject/terminate.ts",
      "gateway/inject/fastForward.ts", "gateway/inject/injectForward.ts", "gateway/inject/injectUpgrade.ts", "gateway/inject/granted.ts",
      "gateway/inject/grantCache.ts"
    ].map((f) => path.join("src", f))
    const found = sources().filter(({ file }) => listeners.includes(file)).flatMap(({ file, text }) =>
      decisionReads(text).map((line) => `${file}:${line}`))
    expect(found, "decide the request with gateway/policy/decide.ts and match its verdict; what it needs of an entry goes in the verdict").toEqual([])
    expect(listeners.filter((f) => !sources().some((s) => s.file === f)), "a listener was moved or renamed: say where it went").toEqual([])
  })

  it("the decision-reader check finds an import of the rules or an entry, and a read of org.toml's egress sections", () => {
    expect(decisionReads(`import type { GrantRule } from "../../config/schema.js"`)).toEqual([1])
    expect(decisionReads(`import { type AllowRule, type Org } from "../../config/schema.js"`)).toEqual([1])
    expect(decisionReads(`import { segmentsOf } from "../../config/requestRule.js"`)).toEqual([1])
    expect(decisionReads(`import type { PolicyEntry } from "../../config/policy.js"`)).toEqual([1])
    expect(decisionReads(`import { candidatesFor } from "../policy/requestRules.js"\nimport { entryFor } from "../policy/hostEntry.js"`)).toEqual([1, 2])
    expect(decisionReads(`import { canonicalTarget } from "../policy/canonicalPath.js"`)).toEqual([1])
    expect(decisionReads(`const g = org.grant.find((x) => x.name)\nconst a = policy.entries[0]\nconst r = entry.rules`)).toEqual([1, 2, 3])
    expect(decisionReads(`import type { Policy } from "../../config/policy.js"\nimport { decide } from "../policy/decide.js"\nconst v = verdict.inject`)).toEqual([])
  })

  it("a failure turned into success or silence says why beside it: none is added without (the ones from before the sweep are listed)", () => {
    const baseline = new Set(fs.readFileSync(path.resolve(src, "../test/support/swallowedBaseline.txt"), "utf8").split("\n").filter((l) => l !== "" && !l.startsWith("#")))
    const found = sources().flatMap(({ file, text }) => silentFailures(text).map((line) => `${file}\t${line}`))
    expect(found.filter((f) => !baseline.has(f)), "say why losing the failure is right in a comment beside it (or let it fail)").toEqual([])
    // The list only shrinks: a site given its comment or its failure is taken off it.
    expect([...baseline].filter((b) => !found.includes(b)), "listed in test/support/swallowedBaseline.txt but no longer found: take it off the list").toEqual([])
  })

  it("the silent-failure check finds orElseSucceed, Effect.ignore and their kin without a comment near, and lets a commented one through", () => {
    expect(silentFailures(`const a = x.pipe(Effect.orElseSucceed(() => []))\nconst b = y.pipe(Effect.ignore)`)).toEqual(["const a = x.pipe(Effect.orElseSucceed(() => []))", "const b = y.pipe(Effect.ignore)"])
    expect(silentFailures(`// a missing file is no entries\nconst a = x.pipe(Effect.orElseSucceed(() => []))`)).toEqual([])
    expect(silentFailures(`const a = x.pipe(Effect.catchAll(() => Effect.void), Effect.orElse(() => z))`)).toHaveLength(1)
  })
})
