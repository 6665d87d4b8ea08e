import { FileSystem, Path } from "@effect/platform"
import { Clock, Config, Effect, Option, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import type { WorkerSettings } from "../config/schema.js"
import { readJsonOptional, writeJson } from "../fs/atomic.js"
import { credentialFor } from "../vault/credentialFor.js"
import { asJsonObject, isConnectionName, Vault } from "../vault/Vault.js"
import { LLM_PROVIDERS } from "../contract/constants.js"
import { sentinelize } from "./sentinel.js"

export class NoModelCredential extends Schema.TaggedError<NoModelCredential>()("NoModelCredential", {
  /** Set when this process has ANTHROPIC_API_KEY but the daemon, which injects it, does not. */
  keyOnlyHere: Schema.optionalWith(Schema.Boolean, { default: () => false })
}) {
  override get message() {
    return this.keyOnlyHere
      ? "ANTHROPIC_API_KEY is set in this shell but not in the roster daemon's environment, and the daemon is what " +
        "injects it — restart the daemon with it exported (roster server stop && roster server start), " +
        "or store it: roster connection add anthropic"
      : "no model credential — connect one: an API key with roster connection add anthropic, or a Claude Pro/Max sign-in with " +
        "roster connection login anthropic (a ChatGPT sign-in: pi's /login on this host, then roster connection add openai-codex --from-pi-login). " +
        "Also honoured: a host pi login (~/.pi/agent/auth.json) or ANTHROPIC_API_KEY in the daemon's environment"
  }
}

export interface PiHome {
  /** A credential reaches the box only as the sentinel; this says the gateway has one to inject. */
  readonly hasAuth: boolean
  /** anthropic's credential is the daemon's ANTHROPIC_API_KEY: the box gets the sentinel in its env. */
  readonly anthropicEnvKey: boolean
}


/**
 * The box's pi home (`agent/`): sentinel logins shaped like the real ones and settings that
 * carry only the model selection. Which credential serves each connection is the daemon's
 * answer (`daemonCredentials`, from its /healthz) — the same chooser its gateway injects from —
 * so the header the box fills is the one the gateway swaps. Without that answer (an older
 * daemon) the same chooser runs here.
 */
export const preparePiHome = Effect.fn("pihome.prepare")(function*(
  agentDir: string,
  worker: WorkerSettings,
  daemonCredentials?: Readonly<Record<string, string>>
) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const files = layout(yield* Paths)
  const vault = yield* Vault
  const now = yield* Clock.currentTimeMillis
  yield* fs.makeDirectory(agentDir, { recursive: true })

  const hostAuth = asJsonObject(yield* readJsonOptional(files.hostPiAuth))
  const names = new Set([...Object.keys(hostAuth), ...LLM_PROVIDERS, ...Object.keys(daemonCredentials ?? {})].filter(isConnectionName))
  const sentinel: Record<string, unknown> = {}
  let anthropicEnvKey = false
  for (const name of names) {
    const source = daemonCredentials ? daemonCredentials[name] : (yield* credentialFor(name))?.source
    if (source === "env") anthropicEnvKey ||= name === "anthropic"
    const entry = source === "vault" ? yield* vault.get(name) : source === "pi-login" ? hostAuth[name] : undefined
    if (entry) sentinel[name] = sentinelize(entry, now)
  }
  const hasAuth = Object.keys(sentinel).length > 0
  if (hasAuth) yield* writeJson(path.join(agentDir, "auth.json"), sentinel, 0o600)

  const hostSettings = asJsonObject(yield* readJsonOptional(files.hostPiSettings))
  const settings: Record<string, unknown> = {}
  for (const k of ["defaultProvider", "defaultModel", "defaultThinkingLevel"]) {
    if (typeof hostSettings[k] === "string") settings[k] = hostSettings[k]
  }
  // The worker's own choice wins over what the host pi login last used.
  if (worker.model) {
    const slash = worker.model.indexOf("/")
    if (slash > 0) {
      settings.defaultProvider = worker.model.slice(0, slash)
      settings.defaultModel = worker.model.slice(slash + 1)
    } else {
      settings.defaultModel = worker.model
    }
  }
  if (worker.thinking) settings.defaultThinkingLevel = worker.thinking
  yield* writeJson(path.join(agentDir, "settings.json"), settings)

  if (!hasAuth && !anthropicEnvKey) {
    // Config.option of a string fails only on a malformed value, which a string cannot be: unset is the only none.
    const keyHere = Option.isSome(yield* Config.option(Config.redacted("ANTHROPIC_API_KEY")).pipe(Effect.orElseSucceed(() => Option.none())))
    return yield* Effect.fail(new NoModelCredential({ keyOnlyHere: keyHere && daemonCredentials !== undefined }))
  }
  return { hasAuth, anthropicEnvKey: anthropicEnvKey && !("anthropic" in sentinel) } satisfies PiHome
})

/**
 * Can a box reach a model right now (reference `model_credentials_available`)? A vault login
 * for a model provider, a host pi login, or ANTHROPIC_API_KEY in roster's environment. The
 * supervisor holds its queue while this is false instead of burning each task on a failed run.
 */
export const modelCredentialAvailable = Effect.gen(function*() {
  for (const name of LLM_PROVIDERS) if (yield* credentialFor(name)) return true
  return false
})
