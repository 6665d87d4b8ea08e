import { FileSystem, Path } from "@effect/platform"
import { Effect, Schema } from "effect"
import * as crypto from "node:crypto"
import { Paths, layout } from "../config/Paths.js"
import { writeJson } from "../fs/files.js"

/** What the gateway learns from a run's token: who is calling, for which run. */
export const IdentityRecord = Schema.Struct({
  subject: Schema.String,
  run_id: Schema.String,
  worker: Schema.String,
  task_id: Schema.NullOr(Schema.String)
})
export type IdentityRecord = typeof IdentityRecord.Type

/** 256 random bits, hex: the only form of token the gateway will look up (no path tricks). */
export const TOKEN_PATTERN = /^[0-9a-f]{64}$/

export interface Identity {
  readonly token: string
  readonly file: string
}

// The ":x" password is a placebo (the gateway reads only the token), but git refuses a proxy
// URL whose user has no password: it tries to prompt and dies in the headless box.
export const proxyUrl = (token: string, port: number) => `http://${token}:x@host.docker.internal:${port}`

/**
 * The run's gateway credential: a 0600 file under state/identity, removed when the scope
 * closes — on success, failure, ceiling and interrupt alike.
 */
export const mintIdentity = (worker: string, runId: string, taskId: string | null) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const token = crypto.randomBytes(32).toString("hex")
      const file = (yield* Path.Path).join(layout(yield* Paths).identityDir, `${token}.json`)
      const record: IdentityRecord = { subject: `org/${worker}`, run_id: runId, worker, task_id: taskId }
      yield* writeJson(file, record, 0o600)
      return { token, file } satisfies Identity
    }),
    ({ file }) => Effect.flatMap(FileSystem.FileSystem, (fs) => fs.remove(file)).pipe(Effect.ignore)
  )
