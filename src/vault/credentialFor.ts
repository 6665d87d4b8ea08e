import { Config, Effect, Option, Redacted, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { readJsonOptional } from "../fs/atomic.js"
import { asJsonObject, JsonObject, Vault, type VaultEntry } from "./Vault.js"
import { type Credential, credentialOf } from "./entries.js"

/** Where a connection's credential comes from: roster's vault, the host's pi login, or the daemon's environment. */
export const CredentialSource = Schema.Literal("vault", "pi-login", "env")
export type CredentialSource = typeof CredentialSource.Type

export interface ChosenCredential {
  readonly source: CredentialSource
  /** The entry as stored (a refresh writes it back with every field it had). */
  readonly entry: VaultEntry
  /** What it holds, decoded: a login with an access token, or a key. */
  readonly credential: Credential
}

/** An entry as a chosen credential from `source`, when it holds one that can serve a request. */
const chosenFrom = (source: CredentialSource, entry: VaultEntry | undefined): ChosenCredential | undefined =>
  entry === undefined ? undefined : Option.getOrUndefined(Option.map(credentialOf(entry), (credential) => ({ source, entry, credential })))

/**
 * The one answer to "which credential serves this connection": the vault first, then the host's
 * pi login, then (anthropic only) ANTHROPIC_API_KEY in this process's environment. The box's
 * sentinel is shaped from the same entry the gateway injects, so the header the box fills is the
 * header the gateway swaps — never a login's Bearer sentinel beside a vault key's x-api-key.
 * Untraced: it runs on every request the gateway handles, and a traced step (a span and a stack
 * capture per call) measured 13–26 µs against 1–3 µs untraced (docs/PERFORMANCE.md).
 */
export const credentialFor = Effect.fnUntraced(function*(name: string) {
  const fromVault = chosenFrom("vault", yield* (yield* Vault).get(name))
  if (fromVault) return fromVault
  const login = yield* readJsonOptional(layout(yield* Paths).hostPiAuth)
  const fromLogin = chosenFrom("pi-login", Option.getOrUndefined(Schema.decodeUnknownOption(JsonObject)(asJsonObject(login)[name])))
  if (fromLogin) return fromLogin
  if (name === "anthropic") {
    // Config.option of a string fails only on a malformed value, which a string cannot be: unset is the only none.
  const env = yield* Config.option(Config.redacted("ANTHROPIC_API_KEY")).pipe(Effect.orElseSucceed(() => Option.none()))
    if (Option.isSome(env) && Redacted.value(env.value) !== "") {
      const credential = { type: "api_key", key: Redacted.value(env.value) } as const
      return { source: "env", entry: credential, credential } satisfies ChosenCredential
    }
  }
  return undefined
})
