import { Option, Schema } from "effect"
import { DiscordTokens, SlackTokens } from "./chatTokens.js"

/** The header a key travels in: Anthropic's own, a Bearer token, or Basic. */
export const InjectKind = Schema.Literal("x-api-key", "bearer", "basic")

/** An API key (`roster connection add`, or a pi login's `api_key`): the key, and the header it travels in when the entry says. */
export const ApiKey = Schema.Struct({
  type: Schema.optional(Schema.Literal("api_key")),
  key: Schema.NonEmptyString,
  kind: Schema.optional(InjectKind),
  added_at: Schema.optional(Schema.String)
})
export type ApiKey = typeof ApiKey.Type

/** A subscription login (OAuth): the access token injected, the refresh token and its end for the gateway's refresh. */
export const OAuthLogin = Schema.Struct({
  type: Schema.Literal("oauth"),
  access: Schema.NonEmptyString,
  refresh: Schema.optional(Schema.String),
  /** When the access token ends (ms since the epoch). */
  expires: Schema.optional(Schema.Number),
  /** Another token endpoint than the provider's known one (a self-hosted provider; a test's stand-in). */
  token_url: Schema.optional(Schema.String),
  client_id: Schema.optional(Schema.String),
  added_at: Schema.optional(Schema.String)
})
export type OAuthLogin = typeof OAuthLogin.Type

/** What can serve a request: a login, or a key. */
export const Credential = Schema.Union(OAuthLogin, ApiKey)
export type Credential = typeof Credential.Type

/** Every kind of entry the vault holds. */
export const StoredEntry = Schema.Union(OAuthLogin, ApiKey, SlackTokens, DiscordTokens)
export type StoredEntry = typeof StoredEntry.Type

const decodeCredential = Schema.decodeUnknownOption(Credential)

/** A stored entry (the vault's, a pi login's) as the credential it holds, decoded; none when it holds none usable. */
export const credentialOf = (entry: unknown): Option.Option<Credential> => decodeCredential(entry)

/** A stored entry decoded as the kind it is; none when it is no kind roster knows. */
export const storedEntryOf = Schema.decodeUnknownOption(StoredEntry)
