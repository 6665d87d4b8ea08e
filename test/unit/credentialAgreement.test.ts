import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { preparePiHome } from "../../src/box/pihome.js"
import { layout } from "../../src/config/Paths.js"
import { WorkerSchema } from "../../src/config/schema.js"
import { resolveCredential } from "../../src/gateway/secrets/credentials.js"
import { credentialFor } from "../../src/vault/credentialFor.js"
import { Schema } from "effect"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const grant = { name: "anthropic", hosts: ["api.anthropic.com"] as const, scope: ["org/*"], credential: "anthropic" }
const settings = Schema.decodeSync(WorkerSchema)({})
const LOGIN = { type: "oauth", access: "sk-ant-oat-REAL-login", refresh: "r", expires: 4102444800000 }
const KEY = { type: "api_key", key: "sk-ant-REAL-vault-key" }

/** The header pi fills for anthropic from an auth.json entry (an OAuth login sends a Bearer token, a key x-api-key). */
const piHeader = (entry: Record<string, unknown> | undefined, envKey: boolean) =>
  entry?.type === "oauth" ? "bearer" : entry ? "x-api-key" : envKey ? "x-api-key" : "none"

const cases: ReadonlyArray<{
  readonly name: string
  readonly vault: Record<string, Record<string, unknown>>
  readonly login?: Record<string, unknown>
  readonly env: Record<string, string>
  readonly source: string
}> = [
  { name: "a vault key only", vault: { anthropic: KEY }, env: {}, source: "vault" },
  { name: "a host pi login only", vault: {}, login: { anthropic: LOGIN }, env: {}, source: "pi-login" },
  { name: "both a host login and a vault key", vault: { anthropic: KEY }, login: { anthropic: LOGIN }, env: {}, source: "vault" },
  { name: "ANTHROPIC_API_KEY only", vault: {}, env: { ANTHROPIC_API_KEY: "sk-ant-REAL-env" }, source: "env" },
  { name: "a host login and ANTHROPIC_API_KEY", vault: {}, login: { anthropic: LOGIN }, env: { ANTHROPIC_API_KEY: "sk-ant-REAL-env" }, source: "pi-login" }
]

describe("the box and the gateway agree on the credential", () => {
  for (const c of cases) {
    for (const daemonSays of [true, false]) {
      it.effect(`${c.name}: the box's sentinel goes in the header the gateway swaps (${daemonSays ? "the daemon's answer" : "no answer: the same chooser"})`, () => {
        const paths = tempPaths()
        writeFixture({ paths })
        if (c.login) {
          fs.mkdirSync(path.dirname(layout(paths).hostPiAuth), { recursive: true })
          fs.writeFileSync(layout(paths).hostPiAuth, JSON.stringify(c.login))
        }
        return Effect.gen(function*() {
          const chosen = yield* credentialFor("anthropic")
          expect(chosen?.source).toBe(c.source)
          const agent = path.join(paths.data, "agent")
          const home = yield* preparePiHome(agent, settings, daemonSays ? { anthropic: chosen?.source ?? "" } : undefined)
          const auth = fs.existsSync(path.join(agent, "auth.json"))
            ? JSON.parse(fs.readFileSync(path.join(agent, "auth.json"), "utf8")) as Record<string, Record<string, unknown>>
            : {}
          const injected = yield* resolveCredential(grant)
          expect(injected?.source).toBe(c.source)
          expect(piHeader(auth.anthropic, home.anthropicEnvKey)).toBe(injected?.kind)
          // Never the real value in the box's home.
          expect(JSON.stringify(auth)).not.toMatch(/REAL/)
        }).pipe(Effect.provide(unitLayer(paths, { vault: c.vault, env: c.env })))
      })
    }
  }

  it.effect("a key in this shell but not in the daemon's environment is refused with the fix", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const failed = yield* Effect.flip(preparePiHome(path.join(paths.data, "agent"), settings, {}))
      expect(failed.message).toMatch(/set in this shell but not in the roster daemon's environment.*roster server stop && roster server start/)
    }).pipe(Effect.provide(unitLayer(paths, { vault: {}, env: { ANTHROPIC_API_KEY: "sk-ant-only-here" } })))
  })
})
