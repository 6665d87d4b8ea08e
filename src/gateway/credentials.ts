import { Config, Effect, Option, Redacted } from "effect"
import { Paths, layout } from "../config/Paths.js"
import type { GrantRule } from "../config/schema.js"
import { readJsonOptional } from "../fs/atomic.js"
import { Vault, type VaultEntry } from "../vault/Vault.js"
import type { InjectKind } from "./inject.js"

export interface RealCredential {
  readonly value: string
  readonly kind: InjectKind
  readonly source: "vault" | "pi-login" | "env"
}

/** The header a connection's key travels in unless it says otherwise: Anthropic's own, else a Bearer token. */
export const defaultKind = (name: string): InjectKind => (name === "anthropic" ? "x-api-key" : "bearer")

const isKind = (k: unknown): k is InjectKind => k === "x-api-key" || k === "bearer" || k === "basic"

/** The secret of a login or key entry, and the header it travels in. */
export const fromEntry = (name: string, entry: VaultEntry): Omit<RealCredential, "source"> | undefined => {
  if (entry.type === "oauth" && typeof entry.access === "string" && entry.access !== "") {
    return { value: entry.access, kind: "bearer" }
  }
  if (typeof entry.key === "string" && entry.key !== "") {
    return { value: entry.key, kind: isKind(entry.kind) ? entry.kind : defaultKind(name) }
  }
  return undefined
}

/**
 * The real value behind a grant's credential: the vault first, then the host's pi login, then
 * (for anthropic) ANTHROPIC_API_KEY in the daemon's environment. The grant's `header` wins.
 */
export const resolveCredential = Effect.fn("gateway.resolveCredential")(function*(grant: GrantRule) {
  const name = grant.credential
  const pick = (c: Omit<RealCredential, "source"> | undefined, source: RealCredential["source"]) =>
    c ? ({ ...c, kind: grant.header ?? c.kind, source } satisfies RealCredential) : undefined
  const fromVault = yield* (yield* Vault).get(name)
  if (fromVault) {
    const c = pick(fromEntry(name, fromVault), "vault")
    if (c) return c
  }
  const login = yield* readJsonOptional(layout(yield* Paths).hostPiAuth)
  if (login && typeof login === "object" && name in login) {
    const c = pick(fromEntry(name, (login as Record<string, VaultEntry>)[name] ?? {}), "pi-login")
    if (c) return c
  }
  if (name === "anthropic") {
    const env = yield* Config.option(Config.redacted("ANTHROPIC_API_KEY")).pipe(Effect.orElseSucceed(() => Option.none()))
    if (Option.isSome(env)) return pick({ value: Redacted.value(env.value), kind: "x-api-key" }, "env")
  }
  return undefined
})
