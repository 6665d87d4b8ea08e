import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import { SENTINEL } from "../../src/contract/constants.js"
import { preparePiHome } from "../../src/box/pihome.js"
import { sentinelize, sentinelJwt } from "../../src/box/sentinel.js"
import { layout } from "../../src/config/Paths.js"
import { tempPaths, unitLayer } from "../support/harness.js"

const secret = fc.string({ minLength: 12, maxLength: 80 }).filter((s) => s.trim().length >= 12 && !SENTINEL.includes(s))
const jwtLike = fc.tuple(fc.base64String({ minLength: 8 }), fc.base64String({ minLength: 8 }), fc.base64String({ minLength: 8 }))
  .map(([a, b, c]) => `${a}.${b}.${c}`)

describe("sentinelized logins", () => {
  it("never contain a byte sequence of a real secret (property)", () => {
    fc.assert(fc.property(
      fc.record({
        type: fc.constantFrom("oauth", "api_key"),
        access: fc.oneof(secret, jwtLike),
        refresh: secret,
        key: secret,
        accountId: secret,
        expires: fc.integer(),
        extra: secret,
        nested: fc.record({ token: secret })
      }, { requiredKeys: ["type"] }),
      (entry) => {
        const out = JSON.stringify(sentinelize(entry, 1_700_000_000_000))
        for (const [k, v] of Object.entries(entry)) {
          if (k === "type" || k === "expires") continue
          const values = typeof v === "object" ? Object.values(v as object) : [v]
          for (const s of values) expect(out.includes(String(s)), `${k} leaked`).toBe(false)
        }
        expect(Object.keys(JSON.parse(out)).every((k) => ["type", "access", "refresh", "accountId", "expires", "key"].includes(k))).toBe(true)
      }
    ), { numRuns: 300 })
  })

  it("a JWT access token becomes a structurally valid sentinel JWT", () => {
    const out = sentinelize({ type: "oauth", access: "aaa.bbb.ccc", expires: 1 }, 1_700_000_000_000)
    const parts = String(out.access).split(".")
    expect(parts).toHaveLength(3)
    const payload = JSON.parse(Buffer.from(parts[1] ?? "", "base64url").toString("utf8"))
    expect(payload.exp).toBeGreaterThan(1_700_000_000)
    expect(payload["https://api.openai.com/auth"].chatgpt_account_id).toBe("roster-sentinel-account")
    expect(out.expires).toBeGreaterThan(1_700_000_000_000)
    expect(sentinelJwt(0).split(".")).toHaveLength(3)
  })

  it.effect("the pi home holds only sentinels and the model selection", () => {
    const paths = tempPaths()
    const files = layout(paths)
    fs.mkdirSync(path.dirname(files.hostPiAuth), { recursive: true })
    fs.writeFileSync(files.hostPiAuth, JSON.stringify({
      anthropic: { type: "oauth", access: "sk-ant-oat-REAL-ACCESS", refresh: "REAL-REFRESH-TOKEN", expires: 5 },
      "../evil": { type: "api_key", key: "REAL-KEY-2" }
    }))
    fs.writeFileSync(files.hostPiSettings, JSON.stringify({ defaultProvider: "anthropic", defaultModel: "m1", theme: "dark", apiKey: "REAL-SETTINGS-KEY" }))
    const agent = path.join(paths.data, "agent")
    return Effect.gen(function*() {
      const home = yield* preparePiHome(agent, { store: { snapshots: 5 }, thinking: "high" })
      expect(home).toEqual({ hasAuth: true, anthropicEnvKey: false })
      const auth = fs.readFileSync(path.join(agent, "auth.json"), "utf8")
      const settings = JSON.parse(fs.readFileSync(path.join(agent, "settings.json"), "utf8"))
      for (const real of ["REAL-ACCESS", "REAL-REFRESH", "REAL-KEY", "REAL-OPENAI", "sk-ant-real-key"]) expect(auth).not.toContain(real)
      expect(JSON.parse(auth)).toHaveProperty("anthropic")
      expect(JSON.parse(auth)).toHaveProperty(["openai-codex"])
      expect(JSON.parse(auth)).not.toHaveProperty(["../evil"])
      expect(settings).toEqual({ defaultProvider: "anthropic", defaultModel: "m1", defaultThinkingLevel: "high" })
      expect((fs.statSync(path.join(agent, "auth.json")).mode & 0o777).toString(8)).toBe("600")
    }).pipe(Effect.provide(unitLayer(paths, { vault: { "openai-codex": { type: "oauth", access: "REAL-OPENAI.x.y", refresh: "REAL-OPENAI-R", accountId: "acct", apiExtra: "REAL-OPENAI-EXTRA" } } })))
  })

  it.effect("a host ANTHROPIC_API_KEY alone counts, but its value is written nowhere", () => {
    const paths = tempPaths()
    const agent = path.join(paths.data, "agent")
    return Effect.gen(function*() {
      const home = yield* preparePiHome(agent, { store: { snapshots: 5 } })
      expect(home).toEqual({ hasAuth: false, anthropicEnvKey: true })
      expect(fs.existsSync(path.join(agent, "auth.json"))).toBe(false)
      expect(fs.readFileSync(path.join(agent, "settings.json"), "utf8")).not.toContain("sk-ant-real-key")
    }).pipe(Effect.provide(unitLayer(paths)))
  })
})
