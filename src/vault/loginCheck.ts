import { Clock, Effect, Option } from "effect"
import { storedEntryOf } from "./entries.js"
import { Vault } from "./Vault.js"

/** A subscription login in the vault as `roster doctor` sees it: when its access token ends, and whether it can be renewed. */
export interface LoginState {
  readonly name: string
  readonly expires_at: string | null
  readonly expired: boolean
  /** It has expired and cannot be renewed (no refresh token): only a new sign-in brings it back. */
  readonly stuck: boolean
  readonly fix: string | null
}

/**
 * Each OAuth login in the vault: expired ones are said, and one that expired with no refresh token
 * is stuck, with the fix. (One whose refresh failed is said by the gateway when it fails, to the run
 * and in its log; its next refresh is tried at its next use.)
 */
export const checkLogins = Effect.gen(function*() {
  const now = yield* Clock.currentTimeMillis
  const out: Array<LoginState> = []
  for (const { entry, name } of yield* (yield* Vault).list) {
    const e = storedEntryOf(entry)
    if (Option.isNone(e) || e.value.type !== "oauth") continue
    const login = e.value
    const expired = login.expires !== undefined && login.expires < now
    const stuck = expired && (login.refresh === undefined || login.refresh === "")
    out.push({
      name,
      expires_at: login.expires === undefined ? null : new Date(login.expires).toISOString(),
      expired,
      stuck,
      fix: stuck ? `sign in again: roster connection login ${name}` : expired ? `the gateway refreshes it at its next use; if that fails (the gateway's log says why): roster connection login ${name}` : null
    })
  }
  return out
})
