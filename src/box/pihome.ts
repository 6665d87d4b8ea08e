import { FileSystem, Path } from "@effect/platform"
import { Clock, Config, Effect, Option, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import type { WorkerSettings } from "../config/schema.js"
import { readJsonOptional, writeJson } from "../fs/atomic.js"
import { isConnectionName, Vault } from "../vault/Vault.js"
import { LLM_PROVIDERS } from "../contract/constants.js"
import { sentinelize } from "./sentinel.js"

export class NoModelCredential extends Schema.TaggedError<NoModelCredential>()("NoModelCredential", {}) {
  override get message() {
    return "no model credential — connect one: roster connection add anthropic (or openai-codex). " +
      "Also honoured: a host pi login (~/.pi/agent/auth.json) or ANTHROPIC_API_KEY in roster's environment"
  }
}

export interface PiHome {
  /** A credential reaches the box only as the sentinel; this says the gateway has one to inject. */
  readonly hasAuth: boolean
  /** True when the only credential is a host ANTHROPIC_API_KEY: the box gets the sentinel in its env. */
  readonly envKeyOnly: boolean
}

const asObject = (v: unknown): Record<string, unknown> =>
  v && typeof v === "object" && !Array.isArray(v) ? v as Record<string, unknown> : {}

/**
 * The box's pi home (`agent/`): sentinel logins shaped like the real ones (the host pi login,
 * then vault logins for providers it lacks) and settings that carry only the model selection.
 */
export const preparePiHome = Effect.fn("pihome.prepare")(function*(agentDir: string, worker: WorkerSettings) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const files = layout(yield* Paths)
  const vault = yield* Vault
  const now = yield* Clock.currentTimeMillis
  yield* fs.makeDirectory(agentDir, { recursive: true })

  const sentinel: Record<string, unknown> = {}
  const hostAuth = asObject(yield* readJsonOptional(files.hostPiAuth))
  for (const [name, entry] of Object.entries(hostAuth)) {
    if (isConnectionName(name)) sentinel[name] = sentinelize(entry, now)
  }
  for (const name of LLM_PROVIDERS) {
    if (name in sentinel) continue
    const entry = yield* vault.get(name)
    if (entry) sentinel[name] = sentinelize(entry, now)
  }
  const hasAuth = Object.keys(sentinel).length > 0
  if (hasAuth) yield* writeJson(path.join(agentDir, "auth.json"), sentinel, 0o600)

  const hostSettings = asObject(yield* readJsonOptional(files.hostPiSettings))
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

  const envKey = yield* Config.option(Config.redacted("ANTHROPIC_API_KEY")).pipe(Effect.orElseSucceed(() => Option.none()))
  if (!hasAuth && Option.isNone(envKey)) return yield* Effect.fail(new NoModelCredential())
  return { hasAuth, envKeyOnly: !hasAuth } satisfies PiHome
})

/**
 * Can a box reach a model right now (reference `model_credentials_available`)? A vault login
 * for a model provider, a host pi login, or ANTHROPIC_API_KEY in roster's environment. The
 * supervisor holds its queue while this is false instead of burning each task on a failed run.
 */
export const modelCredentialAvailable = Effect.gen(function*() {
  const vault = yield* Vault
  for (const name of LLM_PROVIDERS) if (yield* vault.get(name)) return true
  const hostAuth = asObject(yield* readJsonOptional(layout(yield* Paths).hostPiAuth))
  if (Object.keys(hostAuth).length > 0) return true
  const envKey = yield* Config.option(Config.redacted("ANTHROPIC_API_KEY")).pipe(Effect.orElseSucceed(() => Option.none()))
  return Option.isSome(envKey)
})
