import { Args, Command, Options, Prompt } from "@effect/cli"
import { Config, Console, Effect, Option, Redacted, Schema } from "effect"
import { LLM_PROVIDERS } from "../contract/constants.js"
import { defaultKind } from "../gateway/secrets/credentials.js"
import { DB_CONNECTION } from "../fleet/connect.js"
import { chatProviderOf } from "../vault/chatTokens.js"
import { storedEntryOf } from "../vault/entries.js"
import { Vault } from "../vault/Vault.js"

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
  )
}, ({ appFromEnv, fromEnv, kind, name }) =>
  Effect.gen(function*() {
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
        onNone: () => ({ name, type: "unknown", kind: "unknown", added_at: null }),
        onSome: (e) => ({
          name,
          type: e.type ?? "unknown",
          kind: e.type === "oauth" ? "bearer" : e.type === "slack" || e.type === "discord" ? "chat" : e.kind ?? "x-api-key",
          added_at: e.added_at ?? null
        })
      }))
    if (json) return yield* Console.log(JSON.stringify(entries, null, 2))
    if (entries.length === 0) return yield* Console.log("no connections — add one: roster connection add anthropic")
    for (const e of entries) yield* Console.log(`${e.name.padEnd(16)} ${e.type.padEnd(8)} ${e.kind.padEnd(10)} ${e.added_at ?? ""}`)
  })).pipe(Command.withDescription("List stored connections: names and kinds, never values."))

const rm = Command.make("rm", { name: nameArg }, ({ name }) =>
  Effect.gen(function*() {
    const removed = yield* (yield* Vault).remove(name)
    if (!removed) return yield* Effect.fail(new ConnectionError({ detail: `no connection "${name}" — see: roster connection list` }))
    yield* Console.log(`removed connection "${name}"`)
  })).pipe(Command.withDescription("Remove a stored connection."))

export const connectionCommand = Command.make("connection").pipe(
  Command.withDescription("Credentials the gateway injects in transit (the vault)."),
  Command.withSubcommands([add, list, rm])
)
