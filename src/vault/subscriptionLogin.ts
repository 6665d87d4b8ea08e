import { Clock, Effect, Schema } from "effect"
import * as crypto from "node:crypto"
import type { OAuthLogin } from "./entries.js"

/**
 * Anthropic's subscription sign-in (Claude Pro/Max), as pi's own `/login` performs it — read from
 * pi 1.6's package (pi-coding-agent's anthropic OAuth, the "copy code" method): PKCE with S256,
 * the person signs in in a browser, Anthropic shows a code (`code#state`) to paste back, and the
 * code is exchanged at the token endpoint for an access and a refresh token.
 */
export const ANTHROPIC_SIGN_IN = {
  authorizeUrl: "https://claude.ai/oauth/authorize",
  tokenUrl: "https://platform.claude.com/v1/oauth/token",
  clientId: "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
  redirectUri: "https://platform.claude.com/oauth/code/callback",
  scopes: "org:create_api_key user:profile user:inference user:sessions:claude_code user:mcp_servers user:file_upload"
} as const

/** A sign-in that did not end in tokens, with why and what to do. */
export class SignInFailed extends Schema.TaggedError<SignInFailed>()("SignInFailed", { detail: Schema.String }) {
  override get message() {
    return `the sign-in failed: ${this.detail} — nothing was stored; try again: roster connection login anthropic`
  }
}

const base64url = (bytes: Buffer) => bytes.toString("base64").replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")

/** A PKCE pair: the verifier kept here, its S256 challenge sent with the sign-in URL. */
export const pkcePair = () => {
  const verifier = base64url(crypto.randomBytes(32))
  return { verifier, challenge: base64url(crypto.createHash("sha256").update(verifier).digest()) }
}

/** Where the person signs in: the verifier doubles as the state, as pi does. */
export const signInUrl = (challenge: string, verifier: string) =>
  `${ANTHROPIC_SIGN_IN.authorizeUrl}?${new URLSearchParams({
    code: "true",
    client_id: ANTHROPIC_SIGN_IN.clientId,
    response_type: "code",
    redirect_uri: ANTHROPIC_SIGN_IN.redirectUri,
    scope: ANTHROPIC_SIGN_IN.scopes,
    code_challenge: challenge,
    code_challenge_method: "S256",
    state: verifier
  }).toString()}`

/**
 * What the person pasted — `code#state` or the redirect URL — as its code and state. The state
 * must be this sign-in's: a code without one (a bare code) could be from a sign-in this command did
 * not start, and one with another state is; both are refused with what to paste instead.
 */
export const pastedCode = (input: string, verifier: string): { readonly code: string; readonly state: string } | { readonly problem: string } => {
  const value = input.trim()
  let code: string | null | undefined
  let state: string | null | undefined
  try {
    const url = new URL(value)
    code = url.searchParams.get("code")
    state = url.searchParams.get("state")
  } catch {
    ;[code, state] = value.includes("#") ? value.split("#", 2) : value.includes("code=") ? [new URLSearchParams(value).get("code"), new URLSearchParams(value).get("state")] : [value, undefined]
  }
  if (!code) return { problem: "nothing was pasted: paste the code Anthropic shows after you sign in (code#state)" }
  if (!state) {
    return { problem: "that is a code without its state, so it cannot be told from another sign-in's: paste the whole of what Anthropic shows (code#state), or the URL it sent you to" }
  }
  if (state !== verifier) return { problem: "that code is from another sign-in (its state does not match this one): start again" }
  return { code, state }
}

const TokenAnswer = Schema.parseJson(Schema.Struct({
  access_token: Schema.NonEmptyString,
  refresh_token: Schema.NonEmptyString,
  expires_in: Schema.Number.pipe(Schema.positive())
}))

/**
 * The code exchanged for tokens at `tokenUrl` (Anthropic's, or a stand-in's): the login as the
 * vault keeps it, its end five minutes early as pi keeps it, and the endpoint it refreshes at.
 */
export const exchangeCode = (tokenUrl: string, pasted: { readonly code: string; readonly state: string }, verifier: string) =>
  Effect.gen(function*() {
    const body = JSON.stringify({
      grant_type: "authorization_code",
      client_id: ANTHROPIC_SIGN_IN.clientId,
      code: pasted.code,
      state: pasted.state,
      redirect_uri: ANTHROPIC_SIGN_IN.redirectUri,
      code_verifier: verifier
    })
    const answer = yield* Effect.tryPromise({
      try: async (signal) => {
        const res = await fetch(tokenUrl, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json" },
          body,
          signal: AbortSignal.any([signal, AbortSignal.timeout(30_000)])
        })
        return { status: res.status, text: await res.text() }
      },
      catch: (e) => new SignInFailed({ detail: `the token endpoint (${tokenUrl}) did not answer: ${e instanceof Error ? e.message : String(e)}` })
    })
    if (answer.status !== 200) {
      return yield* new SignInFailed({ detail: `the token endpoint refused the code (HTTP ${answer.status}: ${answer.text.slice(0, 200)})` })
    }
    const tokens = yield* Schema.decodeUnknown(TokenAnswer)(answer.text).pipe(
      Effect.mapError(() => new SignInFailed({ detail: "the token endpoint's answer has no access_token, refresh_token and expires_in" }))
    )
    const now = yield* Clock.currentTimeMillis
    return {
      type: "oauth",
      access: tokens.access_token,
      refresh: tokens.refresh_token,
      expires: now + tokens.expires_in * 1000 - 5 * 60_000,
      added_at: new Date(now).toISOString(),
      ...(tokenUrl !== ANTHROPIC_SIGN_IN.tokenUrl ? { token_url: tokenUrl } : {})
    } satisfies OAuthLogin
  })
