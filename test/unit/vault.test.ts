import { describe, expect, it } from "@effect/vitest"
import { credentialOf, storedEntryOf } from "../../src/vault/entries.js"
import { ANTHROPIC_SIGN_IN, pastedCode, pkcePair, signInUrl } from "../../src/vault/subscriptionLogin.js"
import * as crypto from "node:crypto"
import { Effect, Option, TestClock } from "effect"
import * as fs from "node:fs"
import { layout } from "../../src/config/Paths.js"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import { Vault } from "../../src/vault/Vault.js"
import { lookAgainNow } from "../../src/fs/stamp.js"
import { makeWorkerSettingsCache } from "../../src/worker/workers.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

describe("files read once per change", () => {
  it.effect("the vault answers a changed connection at once, and a removed one as gone", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const vault = yield* Vault
      yield* vault.put("anthropic", { type: "api_key", key: "first" })
      expect(yield* vault.get("anthropic")).toEqual({ type: "api_key", key: "first" })
      yield* vault.put("anthropic", { type: "api_key", key: "second" })
      expect(yield* vault.get("anthropic")).toEqual({ type: "api_key", key: "second" })
      // An edit by another process (the CLI while the daemon runs), in place: seen within half a second.
      fs.writeFileSync(`${layout(paths).vaultDir}/anthropic.json`, JSON.stringify({ type: "api_key", key: "edited-elsewhere" }))
      yield* TestClock.adjust("500 millis")
      expect(yield* vault.get("anthropic")).toEqual({ type: "api_key", key: "edited-elsewhere" })
      expect(yield* vault.remove("anthropic")).toBe(true)
      expect(yield* vault.get("anthropic")).toBeUndefined()
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("org.toml: an edit is seen within half a second; a broken edit is an error, and its fix is seen too", () => {
    const paths = tempPaths()
    writeFixture({ paths, orgToml: "[gateway]\nport = 7301\n" })
    return Effect.gen(function*() {
      const org = yield* OrgConfig
      expect((yield* org.snapshot).gateway.port).toBe(7301)
      expect((yield* org.snapshot).gateway.port).toBe(7301)
      // Not before: the file is looked at twice a second at most.
      fs.writeFileSync(layout(paths).orgToml, "[gateway]\nport = 7309\n")
      expect((yield* org.snapshot).gateway.port).toBe(7301)
      fs.writeFileSync(layout(paths).orgToml, "[gateway]\nport = 7302\n")
      yield* TestClock.adjust("500 millis")
      expect((yield* org.snapshot).gateway.port).toBe(7302)
      fs.writeFileSync(layout(paths).orgToml, "[gateway]\nport = \"no\"\n")
      yield* TestClock.adjust("500 millis")
      expect((yield* org.snapshot.pipe(Effect.flip)).message).toContain("gateway.port")
      fs.writeFileSync(layout(paths).orgToml, "[gateway]\nport = 7303\n")
      yield* TestClock.adjust("500 millis")
      expect((yield* org.snapshot).gateway.port).toBe(7303)
      fs.rmSync(layout(paths).orgToml)
      yield* TestClock.adjust("500 millis")
      expect((yield* org.snapshot.pipe(Effect.flip)).message).toContain("roster init")
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("after lookAgainNow (a run a person just typed, handed to the daemon) an edit by another process is seen at once, not within half a second", () => {
    const paths = tempPaths()
    writeFixture({ paths, orgToml: "[box]\negress_lockdown = false\n" })
    return Effect.gen(function*() {
      const org = yield* OrgConfig
      const vault = yield* Vault
      yield* vault.put("anthropic", { type: "api_key", key: "kept" })
      expect((yield* org.snapshot).box.egress_lockdown).toBe(false)
      expect(yield* vault.get("anthropic")).toEqual({ type: "api_key", key: "kept" })
      fs.writeFileSync(layout(paths).orgToml, "[box]\negress_lockdown = true\n")
      fs.rmSync(`${layout(paths).vaultDir}/anthropic.json`)
      expect((yield* org.snapshot).box.egress_lockdown).toBe(false)
      yield* lookAgainNow
      expect((yield* org.snapshot).box.egress_lockdown).toBe(true)
      expect(yield* vault.get("anthropic")).toBeUndefined()
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("a worker's worker.toml as the gateway reads it on each model call: decoded once per change, an edit seen within half a second", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const file = layout(paths).workerToml("alice")
    fs.mkdirSync(layout(paths).workerDir("alice"), { recursive: true })
    fs.writeFileSync(file, "[budget]\nrun_usd = 1\n")
    return Effect.gen(function*() {
      const settings = makeWorkerSettingsCache()
      expect((yield* settings("alice")).budget?.run_usd).toBe(1)
      fs.writeFileSync(file, "[budget]\nrun_usd = 2\n")
      expect((yield* settings("alice")).budget?.run_usd).toBe(1)
      yield* TestClock.adjust("500 millis")
      expect((yield* settings("alice")).budget?.run_usd).toBe(2)
      // An edit that does not decode keeps the last good settings (issue 64: a half-saved edit does not lift a budget).
      fs.writeFileSync(file, "[budget]\nrun_usd = \"no\"\n")
      yield* lookAgainNow
      expect((yield* settings("alice")).budget?.run_usd).toBe(2)
      fs.rmSync(file)
      yield* lookAgainNow
      // No worker.toml: every setting its default.
      expect((yield* settings("alice")).budget?.run_usd).toBeUndefined()
    }).pipe(Effect.provide(unitLayer(paths)))
  })
})

describe("a vault entry, decoded where it is read", () => {
  it("a login and a key are credentials, each as its kind; a chat connection, an empty key or a login without its access token is none", () => {
    expect(Option.getOrUndefined(credentialOf({ type: "oauth", access: "at-1", refresh: "rt-1", expires: 5, extra: "kept by the store, not needed here" })))
      .toEqual({ type: "oauth", access: "at-1", refresh: "rt-1", expires: 5 })
    expect(Option.getOrUndefined(credentialOf({ type: "api_key", key: "k-1", kind: "bearer" }))).toEqual({ type: "api_key", key: "k-1", kind: "bearer" })
    expect(Option.getOrUndefined(credentialOf({ key: "k-2" }))).toEqual({ key: "k-2" })
    for (const none of [{ type: "slack", bot_token: "xoxb-1", app_token: "xapp-1" }, { type: "api_key", key: "" }, { type: "oauth", refresh: "rt" }, { type: "oauth", access: 7 }, "a string", null]) {
      expect(Option.isNone(credentialOf(none)), JSON.stringify(none)).toBe(true)
    }
    expect(Option.map(storedEntryOf({ type: "discord", bot_token: "b" }), (e) => e.type)).toEqual(Option.some("discord"))
  })
})

describe("the subscription sign-in's pieces (pi's /login, copy-code)", () => {
  it("a PKCE pair is S256; the sign-in URL carries the challenge and the verifier as its state; a pasted code is read in every form pi reads, and another sign-in's refused", () => {
    const { challenge, verifier } = pkcePair()
    expect(verifier).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(challenge).toBe(crypto.createHash("sha256").update(verifier).digest("base64url"))
    const url = new URL(signInUrl(challenge, verifier))
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      code: "true", client_id: ANTHROPIC_SIGN_IN.clientId, response_type: "code", redirect_uri: ANTHROPIC_SIGN_IN.redirectUri,
      code_challenge: challenge, code_challenge_method: "S256", state: verifier
    })
    expect(pastedCode(`abc#${verifier}`, verifier)).toEqual({ code: "abc", state: verifier })
    expect(pastedCode(`${ANTHROPIC_SIGN_IN.redirectUri}?code=abc&state=${verifier}`, verifier)).toEqual({ code: "abc", state: verifier })
    expect(pastedCode(`  abc#${verifier} \n`, verifier)).toEqual({ code: "abc", state: verifier })
    // A bare code could be any sign-in's: refused, saying what to paste.
    for (const bare of ["abc", "  abc \n", "code=abc", `${ANTHROPIC_SIGN_IN.redirectUri}?code=abc`]) {
      expect(pastedCode(bare, verifier), bare).toMatchObject({ problem: expect.stringContaining("paste the whole of what Anthropic shows (code#state)") })
    }
    expect(pastedCode("abc#someone-else", verifier)).toMatchObject({ problem: expect.stringContaining("another sign-in") })
    expect(pastedCode("", verifier)).toMatchObject({ problem: expect.stringContaining("nothing was pasted") })
  })
})
