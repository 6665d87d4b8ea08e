import { Args, Command, Options, Prompt } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import { Clock, Config, Console, Effect, Option, Redacted, Schema } from "effect"
import { layout, Paths } from "../config/Paths.js"
import { ANTHROPIC_SIGN_IN, exchangeCode, pastedCode, pkcePair, signInUrl } from "../vault/subscriptionLogin.js"
import { LLM_PROVIDERS } from "../contract/constants.js"
import { defaultKind } from "../gateway/secrets/credentials.js"
import { DB_CONNECTION } from "../fleet/connect.js"
import { chatProviderOf } from "../vault/chatTokens.js"
import { storedEntryOf } from "../vault/entries.js"
import { asJsonObject, JsonObject, Vault } from "../vault/Vault.js"

export class ConnectionError extends Schema.TaggedError<ConnectionError>()("ConnectionError", { detail: Schema.String }) {
  override get message() {
    return this.detail
  }
}

const nameArg = Args.text({ name: "name" }).pipe(
  Args.withDescription(`a connection name: ${LLM_PROVIDERS.join(", ")}, or your own (e.g. github)`)
)
const json = Options.boolean("json").pipe(Options.withDescription("print JSON for scripts"))

const readStdin = Effect.async<string>((resume) => {
  let data = ""
  process.stdin.setEncoding("utf8")
  process.stdin.on("data", (c: string) => (data += c))
  process.stdin.once("end", () => resume(Effect.succeed(data)))
  process.stdin.once("error", () => resume(Effect.succeed(data)))
})

/** The secret from the environment, a hidden prompt, or piped stdin — never from the command line. */
const readSecret = (name: string, fromEnv: Option.Option<string>, what = `secret for ${name}`) =>
  Effect.gen(function*() {
    if (Option.isSome(fromEnv)) {
      const v = yield* Config.redacted(fromEnv.value).pipe(
        Effect.mapError(() => new ConnectionError({ detail: `${fromEnv.value} is not set in this environment` }))
      )
      return Redacted.value(v)
    }
    if (process.stdin.isTTY) {
      const v = yield* Prompt.hidden({ message: `${what} (not echoed)` })
      return Redacted.value(v)
    }
    return yield* readStdin
  }).pipe(Effect.map((s) => s.trim()))

const refuse = (detail: string) => Effect.fail(new ConnectionError({ detail }))

/** A chat connection: Slack's bot and app-level tokens, or Discord's bot token, in one vault entry the daemon alone reads. */
const addChat = (name: string, provider: "slack" | "discord", fromEnv: Option.Option<string>, appFromEnv: Option.Option<string>) =>
  Effect.gen(function*() {
    const bot = yield* readSecret(name, fromEnv, provider === "slack" ? "bot token (xoxb-…)" : "bot token")
    if (bot === "" || /\s/.test(bot)) return yield* refuse("the bot token is empty or contains whitespace — nothing was stored")
    const added_at = new Date().toISOString()
    if (provider === "discord") {
      yield* (yield* Vault).put(name, { type: "discord", bot_token: bot, added_at })
    } else {
      if (!bot.startsWith("xoxb-")) return yield* refuse("a Slack bot token starts with xoxb- (OAuth & Permissions → Bot User OAuth Token) — nothing was stored")
      if (Option.isNone(appFromEnv) && !process.stdin.isTTY) {
        return yield* refuse("a Slack connection needs its app-level token too: pass --app-from-env VAR (stdin holds one secret only) — nothing was stored")
      }
      const app = yield* readSecret(name, appFromEnv, "app-level token (xapp-…)")
      if (!app.startsWith("xapp-") || /\s/.test(app)) {
        return yield* refuse("a Slack app-level token starts with xapp- (Basic Information → App-Level Tokens, scope connections:write) — nothing was stored")
      }
      yield* (yield* Vault).put(name, { type: "slack", bot_token: bot, app_token: app, added_at })
    }
    yield* Console.log(`stored ${provider} connection "${name}" in the vault; the daemon posts for workers, no box ever sees it.`)
    yield* Console.log(`map channels to workers with a [[chat]] provider = "${provider}", connection = "${name}" in org.toml, then: roster doctor`)
  })

const add = Command.make("add", {
  name: nameArg,
  fromEnv: Options.text("from-env").pipe(Options.optional, Options.withDescription("read the secret (a chat connection: its bot token) from this environment variable")),
  appFromEnv: Options.text("app-from-env").pipe(
    Options.optional,
    Options.withDescription("slack only: read the app-level token (xapp-…, for Socket Mode) from this environment variable")
  ),
  kind: Options.choice("kind", ["x-api-key", "bearer", "basic"]).pipe(
    Options.optional,
    Options.withDescription("the header the gateway puts it in (default: x-api-key for anthropic, bearer otherwise; basic for git over HTTPS)")
  ),
  fromPiLogin: Options.boolean("from-pi-login").pipe(
    Options.withDescription("import this host's pi login for the connection (pi's auth.json, ~/.pi/agent/auth.json unless a path follows): a subscription sign-in, kept in the vault so no box needs the host's file")
  ),
  authFile: Args.file({ name: "auth.json", exists: "yes" }).pipe(Args.optional, Args.withDescription("with --from-pi-login: pi's auth.json to import from"))
}, ({ appFromEnv, authFile, fromEnv, fromPiLogin, kind, name }) =>
  Effect.gen(function*() {
    if (fromPiLogin) return yield* importPiLogin(name, authFile)
    if (Option.isSome(authFile)) return yield* refuse(`${authFile.value}: a file goes only after --from-pi-login (roster connection add ${name} --from-pi-login ${authFile.value})`)
    // pi signs in to Codex with a ChatGPT subscription: an API key stored under its name is one it cannot use.
    if (name === "openai-codex") return yield* refuse(CODEX_HOW)
    const chat = chatProviderOf(name)
    if (chat !== null) return yield* addChat(name, chat, fromEnv, appFromEnv)
    if (Option.isSome(appFromEnv)) return yield* refuse("--app-from-env is for a slack connection (a name slack or slack-…)")
    const secret = yield* readSecret(name, fromEnv)
    if (secret === "" || /\s/.test(secret)) {
      return yield* Effect.fail(new ConnectionError({ detail: "the secret is empty or contains whitespace — nothing was stored" }))
    }
    const chosen = Option.getOrElse(kind, () => defaultKind(name))
    yield* (yield* Vault).put(name, { type: "api_key", key: secret, kind: chosen, added_at: new Date().toISOString() })
    if (name === DB_CONNECTION) {
      return yield* Console.log(`stored connection "${name}" in the vault: the password the daemon gives the fleet's database ([cluster] database); no box ever sees it.`)
    }
    yield* Console.log(`stored connection "${name}" (${chosen}) in the vault; boxes only ever see a sentinel.`)
    yield* Console.log(`the gateway injects it for a [[grant]] with credential = "${name}" in org.toml`)
  })).pipe(Command.withDescription(
    "Store a credential in roster's vault. The secret is read from a hidden prompt, --from-env VAR, or stdin — never from the command line. " +
      "Example: roster connection add anthropic (then paste the key), or: roster connection add github --kind basic --from-env GITHUB_TOKEN. " +
      "Chat: roster connection add slack (a bot token xoxb-… and an app-level token xapp-…; or --from-env BOT_VAR --app-from-env APP_VAR), " +
      "roster connection add discord (a bot token). " +
      "A fleet's database password ([cluster] database): roster connection add postgres"
  ))

const list = Command.make("list", { json }, ({ json }) =>
  Effect.gen(function*() {
    const entries = (yield* (yield* Vault).list).map(({ entry, name }) =>
      Option.match(storedEntryOf(entry), {
        onNone: () => ({ name, type: "unknown", kind: "unknown", added_at: null, expires_at: null }),
        onSome: (e) => ({
          name,
          type: e.type ?? "unknown",
          kind: e.type === "oauth" ? "bearer" : e.type === "slack" || e.type === "discord" ? "chat" : e.kind ?? "x-api-key",
          added_at: e.added_at ?? null,
          // A login's access token ends; the gateway refreshes it before then (a key has no end).
          expires_at: e.type === "oauth" && e.expires !== undefined ? new Date(e.expires).toISOString() : null
        })
      }))
    if (json) return yield* Console.log(JSON.stringify(entries, null, 2))
    if (entries.length === 0) return yield* Console.log("no connections — add one: roster connection add anthropic")
    const now = yield* Clock.currentTimeMillis
    for (const e of entries) {
      const ends = e.expires_at === null ? "" : `  ${Date.parse(e.expires_at) < now ? "expired" : "expires"} ${e.expires_at}`
      yield* Console.log(`${e.name.padEnd(16)} ${e.type.padEnd(8)} ${e.kind.padEnd(10)} ${e.added_at ?? ""}${ends}`)
    }
  })).pipe(Command.withDescription("List stored connections: names and kinds, never values."))

/** How a Codex login reaches the vault: through pi's own sign-in on this host, then imported. */
const CODEX_HOW = "openai-codex is a ChatGPT subscription sign-in, not a key: sign in with pi on this host (pi, then /login → OpenAI Codex), " +
  "then import it: roster connection add openai-codex --from-pi-login"

/** `--from-pi-login`: the host pi's login for `name`, decoded as the kind it is, into the vault (0600) with when it was added. */
const importPiLogin = (name: string, file: Option.Option<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const paths = yield* Paths
    const from = Option.getOrElse(file, () => layout(paths).hostPiAuth)
    const text = yield* fs.readFileString(from).pipe(Effect.mapError(() => new ConnectionError({ detail: `cannot read ${from}: sign in with pi on this host first (pi, then /login), or name pi's auth.json after --from-pi-login` })))
    const all = yield* Schema.decodeUnknown(Schema.parseJson(JsonObject))(text).pipe(Effect.mapError(() => new ConnectionError({ detail: `${from} is not pi's auth.json (not a JSON object)` })))
    const entry = all[name]
    if (entry === undefined) {
      return yield* refuse(`${from} has no login for "${name}" (it has: ${Object.keys(all).join(", ") || "none"}) — sign in with pi: pi, then /login`)
    }
    const login = storedEntryOf(entry)
    if (Option.isNone(login) || (login.value.type !== "oauth" && login.value.type !== "api_key" && login.value.type !== undefined)) {
      return yield* refuse(`${from}'s "${name}" is not a login roster can use (an OAuth sign-in or an API key) — nothing was stored`)
    }
    // Every field pi keeps (a Codex login's account id among them) is kept: the box's pi gets them back, sentinelized.
    yield* (yield* Vault).put(name, { ...asJsonObject(entry), added_at: new Date(yield* Clock.currentTimeMillis).toISOString(), imported_from: from })
    const expires = login.value.type === "oauth" ? login.value.expires : undefined
    yield* Console.log(`stored connection "${name}" (${login.value.type === "oauth" ? "oauth" : "api_key"}) from ${from} in the vault; boxes only ever see a sentinel.` +
      (expires !== undefined ? ` Its access token ${expires < (yield* Clock.currentTimeMillis) ? "has expired: the gateway refreshes it on its next use" : `expires ${new Date(expires).toISOString()}; the gateway refreshes it before then`}.` : ""))
  })

const login = Command.make("login", {
  provider: Args.text({ name: "provider" }).pipe(Args.withDescription("anthropic (Claude Pro/Max); openai-codex is signed in with pi, then imported")),
  tokenUrl: Options.text("token-url").pipe(
    Options.optional,
    Options.withDescription("the token endpoint to exchange the code at (default: Anthropic's; another for a proxy or a stand-in), kept for its refreshes")
  )
}, ({ provider, tokenUrl }) =>
  Effect.gen(function*() {
    if (provider === "openai-codex") return yield* refuse(CODEX_HOW)
    if (provider !== "anthropic") return yield* refuse(`there is no subscription sign-in for "${provider}": store its API key with roster connection add ${provider}`)
    const { challenge, verifier } = pkcePair()
    yield* Console.log(`Sign in to Anthropic (Claude Pro/Max) in a browser, on any machine:\n\n  ${signInUrl(challenge, verifier)}\n`)
    yield* Console.log("Anthropic then shows a code: paste it here (code#state).")
    const pasted = pastedCode(yield* readSecret("anthropic", Option.none(), "the code"), verifier)
    if ("problem" in pasted) return yield* refuse(`${pasted.problem} — nothing was stored`)
    const entry = yield* exchangeCode(Option.getOrElse(tokenUrl, () => ANTHROPIC_SIGN_IN.tokenUrl), pasted, verifier)
    yield* (yield* Vault).put("anthropic", entry)
    yield* Console.log(`signed in: stored connection "anthropic" (oauth) in the vault; its access token expires ${new Date(entry.expires).toISOString()} and the gateway refreshes it before then. Boxes only ever see a sentinel.`)
  })).pipe(Command.withDescription(
    "Sign in with a subscription and keep the login in roster's vault (0600): the sign-in pi's own /login performs, for anthropic (Claude Pro/Max) — " +
      "it prints a URL to open in a browser, then reads the code you paste (not echoed). The gateway injects the login in transit and refreshes it; " +
      "no box ever holds it. Example: roster connection login anthropic"
  ))

const rm = Command.make("rm", { name: nameArg }, ({ name }) =>
  Effect.gen(function*() {
    const removed = yield* (yield* Vault).remove(name)
    if (!removed) return yield* Effect.fail(new ConnectionError({ detail: `no connection "${name}" — see: roster connection list` }))
    yield* Console.log(`removed connection "${name}"`)
  })).pipe(Command.withDescription("Remove a stored connection."))

export const connectionCommand = Command.make("connection").pipe(
  Command.withDescription("Credentials the gateway injects in transit (the vault)."),
  Command.withSubcommands([add, login, list, rm])
)
