import { Effect } from "effect"
import type { GrantRule } from "../../config/schema.js"
import { type ChosenCredential, credentialFor, type CredentialSource } from "../../vault/credentialFor.js"
import type { Credential } from "../../vault/entries.js"
import type { InjectKind } from "./inject.js"

export interface RealCredential {
  readonly value: string
  readonly kind: InjectKind
  readonly source: CredentialSource
}

/** The header a connection's key travels in unless it says otherwise: Anthropic's own, else a Bearer token. */
export const defaultKind = (name: string): InjectKind => (name === "anthropic" ? "x-api-key" : "bearer")

/** The secret of a login or a key, and the header it travels in. */
export const fromCredential = (name: string, credential: Credential): Omit<RealCredential, "source"> =>
  credential.type === "oauth" ? { value: credential.access, kind: "bearer" } : { value: credential.key, kind: credential.kind ?? defaultKind(name) }

/**
 * The real value behind a grant's credential, from the one chooser the box's pi home also uses
 * (vault, then the host's pi login, then the daemon's ANTHROPIC_API_KEY). The grant's `header` wins.
 * Untraced: it runs on every request the gateway handles, and a traced step (a span and a stack
 * capture per call) measured 13–26 µs against 1–3 µs untraced (docs/PERFORMANCE.md).
 */
export const resolveCredential = Effect.fnUntraced(function*(grant: Injecting) {
  return asInjected(grant, yield* credentialFor(grant.credential))
})

/** What of a grant says how its credential goes: whose it is, and the header it goes in when the grant names one. */
export type Injecting = Pick<GrantRule, "credential" | "header">

/** The value and header of a chosen credential for a grant (the grant's `header` wins). */
export const asInjected = (grant: Injecting, chosen: ChosenCredential | undefined) => {
  const c = chosen ? fromCredential(grant.credential, chosen.credential) : undefined
  return c ? ({ ...c, kind: grant.header ?? c.kind, source: chosen?.source ?? "vault" } satisfies RealCredential) : undefined
}
