import type { Deferred } from "effect"
import type { ChosenCredential } from "../../vault/credentialFor.js"
import type { Refusal } from "./refusal.js"

/** Logins being refreshed right now, by connection: every request that needs one waits on the one refresh. */
export const makeOAuthRefresher = () => new Map<string, Deferred.Deferred<ChosenCredential, Refusal>>()
export type OAuthRefresher = ReturnType<typeof makeOAuthRefresher>
