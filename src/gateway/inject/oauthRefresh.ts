import { Clock, Deferred, Effect, Schema } from "effect"
import * as http from "node:http"
import type * as net from "node:net"
import type { Policy } from "../../config/policy.js"
import { Paths, layout } from "../../config/Paths.js"
import { readJsonOptional, writeJson } from "../../fs/atomic.js"
import { type ChosenCredential, credentialFor } from "../../vault/credentialFor.js"
import type { OAuthLogin } from "../../vault/entries.js"
import { asJsonObject, Vault, type VaultEntry } from "../../vault/Vault.js"
import { dialChecked } from "../egress/dial.js"
import { Gateway } from "../egress/Gateway.js"
import type { Caller } from "../base/identify.js"
import { decide } from "../policy/decide.js"
import { Refusal } from "../base/refusal.js"
import { upstreamTls } from "../upstream/upstreamTls.js"

/**
 * Where each provider's OAuth login is refreshed, as pi itself does it (pi-ai's auth/oauth). An
 * entry may name its own `token_url` and `client_id` for a provider not listed here.
 */
const TOKEN_ENDPOINTS: Readonly<Record<string, { readonly url: string; readonly clientId: string; readonly body: "json" | "form" }>> = {
  anthropic: { url: "https://platform.claude.com/v1/oauth/token", clientId: "9d1c250a-e61b-44d9-88ed-5944d1962f5e", body: "json" },
  "openai-codex": { url: "https://auth.openai.com/oauth/token", clientId: "app_EMoamEEZ73f0CkXaXp7hrann", body: "form" }
}

/** A login is refreshed this long before it expires: a request never goes out with a token about to lapse. */
const MARGIN_MS = 5 * 60_000

const TokenAnswer = Schema.Struct({
  access_token: Schema.NonEmptyString,
  refresh_token: Schema.optional(Schema.NonEmptyString),
  expires_in: Schema.Number.pipe(Schema.positive())
})

const failed = (name: string, detail: string) =>
  new Refusal(
    502,
    `the OAuth login "${name}" expires and could not be refreshed (${detail}) — ` +
      (name === "anthropic"
        ? "sign in again: roster connection login anthropic"
        : `sign in again with pi on this host (pi, then /login), then: roster connection add ${name} --from-pi-login`),
    { why: "credential_refresh" }
  )

/** The gateway itself, as the caller of a refresh: a host-side subject, no run. */
const GATEWAY_ITSELF: Caller = { subject: "org", runId: null, worker: null, taskId: null }

/** POSTs the refresh to the token endpoint through the gateway's own decision: its rules, routes, the address checks, verified TLS. */
const postRefresh = (policy: Policy, endpoint: URL, body: string, contentType: string) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    const host = endpoint.hostname.toLowerCase()
    const port = Number(endpoint.port || (endpoint.protocol === "https:" ? 443 : 80))
    const verdict = decide(policy, GATEWAY_ITSELF, { _tag: "Connect", host, port })
    if (verdict._tag === "Refuse") {
      return yield* Effect.fail(`${verdict.refusal.reason}; allow it for the gateway itself: ${(verdict.refusal.detail.fix ?? []).join(" ")}`)
    }
    if (verdict._tag !== "Tunnel" && verdict._tag !== "Intercept") return yield* Effect.fail(`the token endpoint ${host}:${port} is not one the gateway reaches on its own`)
    const up = { ...verdict.dial, protocol: verdict.dial.routed ? verdict.dial.protocol : endpoint.protocol === "https:" ? "https:" as const : "http:" as const }
    const dialled = yield* dialChecked(up).pipe(Effect.mapError((r) => r.reason))
    const socket: net.Socket = up.protocol === "https:"
      ? yield* Effect.flatMap(self.upstreamTrust(policy.org.gateway.upstream_ca_file), (trust) => upstreamTls(dialled.socket, up.host, trust)).pipe(
        Effect.mapError((r) => r.reason)
      )
      : dialled.socket
    return yield* Effect.async<string, string>((resume) => {
      const req = http.request({
        method: "POST", path: `${endpoint.pathname}${endpoint.search}`, createConnection: () => socket,
        headers: { host: endpoint.host, "content-type": contentType, accept: "application/json", "content-length": Buffer.byteLength(body) }
      }, (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (c: string) => (text += c.length < 65_536 ? c : ""))
        res.on("end", () =>
          res.statusCode === 200 ? resume(Effect.succeed(text)) : resume(Effect.fail(`the token endpoint answered ${res.statusCode}`)))
      })
      req.once("error", (e) => resume(Effect.fail(e.message)))
      req.setTimeout(30_000, () => req.destroy(new Error("the token endpoint did not answer in 30 s")))
      req.end(body)
      return Effect.sync(() => req.destroy())
    })
  })

/** Writes the refreshed login back where it came from, atomically: roster's vault, or the host's pi login file. */
const writeBack = (name: string, source: ChosenCredential["source"], entry: VaultEntry) =>
  Effect.gen(function*() {
    if (source === "vault") return yield* (yield* Vault).put(name, entry).pipe(Effect.mapError((e) => e.message))
    const file = layout(yield* Paths).hostPiAuth
    const all = yield* readJsonOptional(file)
    const logins = asJsonObject(all)
    yield* writeJson(file, { ...logins, [name]: entry }, 0o600).pipe(Effect.mapError((e) => e.message))
  })

const refresh = (policy: Policy, name: string, chosen: ChosenCredential, login: OAuthLogin) =>
  Effect.gen(function*() {
    const entry = chosen.entry
    const known = TOKEN_ENDPOINTS[name]
    const url = login.token_url ?? known?.url
    const clientId = login.client_id ?? known?.clientId
    if (login.refresh === undefined || login.refresh === "") return yield* Effect.fail(failed(name, "it has no refresh token"))
    if (!url || !clientId) return yield* Effect.fail(failed(name, "roster does not know this provider's token endpoint"))
    const fields = { grant_type: "refresh_token", client_id: clientId, refresh_token: login.refresh }
    const asForm = (known?.body ?? "json") === "form" && url === known?.url
    const text = yield* postRefresh(policy, new URL(url), asForm ? new URLSearchParams(fields).toString() : JSON.stringify(fields),
      asForm ? "application/x-www-form-urlencoded" : "application/json").pipe(Effect.mapError((d) => failed(name, d)))
    const answer = yield* Schema.decodeUnknown(Schema.parseJson(TokenAnswer))(text).pipe(
      Effect.mapError(() => failed(name, "the token endpoint's answer has no access_token and expires_in"))
    )
    const now = yield* Clock.currentTimeMillis
    const credential: OAuthLogin = { ...login, access: answer.access_token, refresh: answer.refresh_token ?? login.refresh, expires: now + answer.expires_in * 1000 }
    // Written back with every field the entry had (a pi login keeps what pi keeps in it).
    const next: VaultEntry = { ...entry, access: credential.access, refresh: credential.refresh, expires: credential.expires }
    yield* writeBack(name, chosen.source, next).pipe(Effect.mapError((d) => failed(name, `the new tokens could not be stored: ${d}`)))
    yield* Effect.logInfo(`gateway: refreshed the OAuth login "${name}" (${chosen.source}); it now expires at ${new Date(credential.expires ?? now).toISOString()}`)
    return { ...chosen, entry: next, credential } satisfies ChosenCredential
  })

/**
 * The credential a grant injects, an OAuth login refreshed first when it expires within five
 * minutes — once, however many requests need it at that moment; the rest wait and use the new
 * token. Keys and logins not near expiry come back as they are.
 */
export const freshCredential = (policy: Policy, name: string) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    const chosen: ChosenCredential | undefined = yield* credentialFor(name)
    const login = chosen?.credential.type === "oauth" ? chosen.credential : undefined
    if (!chosen || !login || login.expires === undefined || chosen.source === "env") return chosen
    if (login.expires - (yield* Clock.currentTimeMillis) > MARGIN_MS) return chosen
    const running = self.oauth.get(name)
    if (running) return yield* Deferred.await(running)
    const done = yield* Deferred.make<ChosenCredential, Refusal>()
    self.oauth.set(name, done)
    // Not cut short by the request that started it (others wait on it; it is bounded by its own timeout).
    return yield* refresh(policy, name, chosen, login).pipe(
      Effect.onExit((exit) => Deferred.done(done, exit).pipe(Effect.zipRight(Effect.sync(() => self.oauth.delete(name))))),
      Effect.uninterruptible
    )
  })
