import type Dockerode from "dockerode"
import { Effect } from "effect"
import type { PassThrough, Readable } from "node:stream"
import { DockerError, type PullProgress } from "./Docker.js"

interface EngineError {
  readonly statusCode?: number
  readonly message?: string
  readonly json?: { readonly message?: string }
}

export const describe = (cause: unknown): { detail: string; statusCode?: number } => {
  const e = cause as EngineError
  const detail = e?.json?.message ?? e?.message ?? String(cause)
  return typeof e?.statusCode === "number" ? { detail, statusCode: e.statusCode } : { detail }
}

/** What roster uses of dockerode's modem: raw dials (attach, wait) and progress streams. */
export interface Modem {
  readonly dial: (opts: object, cb: (err: unknown, res: Readable) => void) => void
  readonly demuxStream: (src: Readable, out: PassThrough, err: PassThrough) => void
  readonly followProgress: (s: Readable, done: (e: unknown) => void, progress: (p: PullProgress) => void) => void
}

/** 404 (gone) and 304/409 (not running) are answers, not failures, for the calls that use this. */
export const absent = (e: DockerError) => e.statusCode === 404 || e.statusCode === 409 || e.statusCode === 304

/** One engine call: dockerode loaded on first use, its failure a DockerError naming the operation, a span per call. */
export type EngineCall = <A>(operation: string, f: (engine: Dockerode, modem: Modem, signal: AbortSignal) => Promise<A>) => Effect.Effect<A, DockerError>

/**
 * Engine calls over the dockerode `load` makes. dockerode (with its ssh and grpc stack) loads on
 * the first call, so commands that never reach the engine (help, init, runs) start without it.
 */
export const makeEngineCall = (load: () => Promise<Dockerode>): EngineCall => {
  let loaded: Promise<Dockerode> | undefined
  return (operation, f) =>
    Effect.tryPromise({
      try: async (signal) => {
        const engine = await (loaded ??= load())
        return f(engine, engine.modem as unknown as Modem, signal)
      },
      catch: (cause) => new DockerError({ operation, ...describe(cause) })
    }).pipe(Effect.withSpan(`docker.${operation}`))
}
