import { FileSystem } from "@effect/platform"
import { Effect, Schema } from "effect"
import * as crypto from "node:crypto"
import { Paths, layout } from "../config/Paths.js"
import { identityFile, IdentityRecord } from "../contract/identity.js"
import { currentOwner } from "../contract/owner.js"
import { workerSubject } from "../contract/scope.js"
import { readJsonOptional, writeJson } from "../fs/atomic.js"
import { isNotFound } from "../fs/notFound.js"

export interface Identity {
  readonly token: string
  readonly file: string
}

/**
 * The run's gateway credential: a 0600 file under state/identity, removed when the scope
 * closes — on success, failure, ceiling and interrupt alike.
 */
export const mintIdentity = (worker: string, runId: string, taskId: string | null, chatChannel?: string, warm = false) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const token = crypto.randomBytes(32).toString("hex")
      const file = identityFile(layout(yield* Paths).identityDir, token)
      const record: IdentityRecord = { ...identityRecord(worker, runId, taskId, chatChannel), ...(warm ? { warm: true as const, maker: yield* currentOwner } : {}) }
      yield* writeJson(file, record, 0o600)
      return { token, file } satisfies Identity
    }),
    ({ file }) => Effect.flatMap(FileSystem.FileSystem, (fs) => fs.remove(file)).pipe(Effect.catchAll((e) => tokenLeft(file, runId, e)))
  )

/**
 * A token file that could not be removed: said with the fix. The gateway still refuses it once its
 * run has ended (checked on every request), so it opens nothing; the file is the only thing left.
 */
const tokenLeft = (file: string, runId: string, e: { readonly message: string }) =>
  Effect.logWarning(`run ${runId}: its gateway token could not be removed (${e.message}); the gateway refuses it as the run has ended — remove it: rm ${file}`)

const identityRecord = (worker: string, runId: string, taskId: string | null, chatChannel?: string): IdentityRecord => ({
  subject: workerSubject(worker),
  run_id: runId,
  worker,
  task_id: taskId,
  ...(chatChannel ? { chat_channel: chatChannel } : {})
})

/**
 * A warm box's token bound to the run that claimed it: its record rewritten (atomically) with the
 * run's task and channel and without the warm mark — from now on the gateway serves it as the run's.
 */
export const bindIdentity = (identity: Identity, worker: string, runId: string, taskId: string | null, chatChannel?: string) =>
  writeJson(identity.file, identityRecord(worker, runId, taskId, chatChannel), 0o600)

/**
 * Removes every token of a run whose owner is gone (a killed CLI, a daemon killed mid-task):
 * the adopter or reaper finds them by the run id inside, as the gateway would read them.
 */
export const revokeRunTokens = Effect.fn("identity.revokeRun")(function*(runId: string) {
  const fs = yield* FileSystem.FileSystem
  const dir = layout(yield* Paths).identityDir
  // No folder: no token was ever minted. Any other failure is said: the tokens stay (the gateway refuses them once their run has ended).
  const names = yield* fs.readDirectory(dir).pipe(Effect.catchAll((e) =>
    (isNotFound(e)
      ? Effect.succeed<ReadonlyArray<string>>([])
      : Effect.logWarning(`run ${runId}: its gateway tokens could not be looked for (${e.message}) — check ${dir}`).pipe(Effect.as<ReadonlyArray<string>>([])))))
  let removed = 0
  for (const name of names.filter((n) => n.endsWith(".json"))) {
    const file = `${dir}/${name}`
    const record = Schema.decodeUnknownOption(IdentityRecord)(yield* readJsonOptional(file))
    if (record._tag === "Some" && record.value.run_id === runId) {
      const gone = yield* fs.remove(file).pipe(Effect.as(true), Effect.catchAll((e) => Effect.as(tokenLeft(file, runId, e), false)))
      if (gone) removed++
    }
  }
  return removed
})
