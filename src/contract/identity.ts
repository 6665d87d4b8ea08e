import { Schema } from "effect"
import * as path from "node:path"
import { RunId, TaskId, WorkerName } from "../config/names.js"

/** What the gateway learns from a run's token: who is calling, for which run. */
export const IdentityRecord = Schema.Struct({
  subject: Schema.String,
  run_id: RunId,
  worker: WorkerName,
  task_id: Schema.NullOr(TaskId),
  /** The chat channel the run's spending is charged to (`slack:<id>`), for its budget. */
  chat_channel: Schema.optional(Schema.String),
  /**
   * A warm box's token, bound to no run yet: the gateway takes only the box's preflight report under it.
   * A claim rewrites the record without it (and with the run's task and channel).
   */
  warm: Schema.optional(Schema.Literal(true)),
  /**
   * A warm box's maker (the daemon: pid and start time): its token is written before its box exists,
   * so while the maker lives a warm token with no box is one still being made, never a stray.
   */
  maker: Schema.optional(Schema.Struct({ pid: Schema.Number, start: Schema.String }))
})
export type IdentityRecord = typeof IdentityRecord.Type

/** 256 random bits, hex: the only form of token the gateway will look up (no path tricks). */
export const TOKEN_PATTERN = /^[0-9a-f]{64}$/

/** Where a token's record lives: one 0600 file per live run under state/identity. */
export const identityFile = (identityDir: string, token: string) => path.join(identityDir, `${token}.json`)

// The ":x" password is a placebo (the gateway reads only the token), but git refuses a proxy
// URL whose user has no password: it tries to prompt and dies in the headless box.
export const proxyUrl = (token: string, port: number) => `http://${token}:x@host.docker.internal:${port}`
