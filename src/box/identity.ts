import { FileSystem } from "@effect/platform"
import { Effect } from "effect"
import * as crypto from "node:crypto"
import { Paths, layout } from "../config/Paths.js"
import { identityFile, type IdentityRecord } from "../contract/identity.js"
import { workerSubject } from "../contract/scope.js"
import { writeJson } from "../fs/atomic.js"

export interface Identity {
  readonly token: string
  readonly file: string
}

/**
 * The run's gateway credential: a 0600 file under state/identity, removed when the scope
 * closes — on success, failure, ceiling and interrupt alike.
 */
export const mintIdentity = (worker: string, runId: string, taskId: string | null) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const token = crypto.randomBytes(32).toString("hex")
      const file = identityFile(layout(yield* Paths).identityDir, token)
      const record: IdentityRecord = { subject: workerSubject(worker), run_id: runId, worker, task_id: taskId }
      yield* writeJson(file, record, 0o600)
      return { token, file } satisfies Identity
    }),
    ({ file }) => Effect.flatMap(FileSystem.FileSystem, (fs) => fs.remove(file)).pipe(Effect.ignore)
  )
