import { FileSystem } from "@effect/platform"
import { Console, Duration, Effect, Fiber, Stream } from "effect"
import { Docker, type ContainerSpec } from "../docker/Docker.js"

export interface BoxEnd {
  readonly endedBy: "exit" | "ceiling"
  readonly exitCode: number | null
}

/**
 * The container as a scoped resource: whatever ends the scope (exit, ceiling, interrupt, a
 * failure) kills and removes it, so a box never outlives its run.
 */
export const acquireContainer = (spec: ContainerSpec) =>
  Effect.flatMap(Docker, (docker) =>
    Effect.acquireRelease(
      docker.containerCreate(spec),
      (id) =>
        docker.containerKill(id).pipe(
          Effect.zipRight(docker.containerRemove(id)),
          Effect.catchAll((e) => Console.error(`warning: could not remove box ${spec.name}: ${e.message} — remove it with: docker rm -f ${spec.name}`))
        )
    ))

/**
 * Box stdout to a file. If the file can't be opened the output is still drained: dropping the
 * pipe would kill the box with EPIPE mid-run and report a failure nobody could explain.
 */
export const drainTo = (
  stdout: Stream.Stream<Uint8Array, unknown>,
  file: string,
  onLine?: (line: string) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const handle = yield* fs.open(file, { flag: "w" }).pipe(Effect.either)
    if (handle._tag === "Left") {
      yield* Console.error(`warning: could not open ${file} (${handle.left.message}); the transcript will be missing`)
    }
    const decoder = new TextDecoder()
    let partial = ""
    // Complete lines go to the watcher as they arrive; the file gets the bytes as they are.
    const lines = (chunk: Uint8Array) => {
      if (!onLine) return Effect.void
      partial += decoder.decode(chunk, { stream: true })
      const complete = partial.split("\n")
      partial = complete.pop() ?? ""
      return Effect.forEach(complete, onLine, { discard: true })
    }
    yield* Stream.runForEach(stdout, (chunk) =>
      (handle._tag === "Right" ? handle.right.writeAll(chunk).pipe(Effect.ignore) : Effect.void).pipe(Effect.zipRight(lines(chunk))))
    if (onLine && partial !== "") yield* onLine(partial)
  }).pipe(Effect.scoped, Effect.ignore)

/** Created, attached, started; then the exit raced against the ceiling. Kill on ceiling, kill on interrupt. */
export const runContainer = Effect.fn("box.runContainer")(function*(
  spec: ContainerSpec,
  options: {
    readonly stdoutFile: string
    readonly ceiling: Duration.Duration
    readonly onStderr?: (chunk: Uint8Array) => Effect.Effect<void>
    readonly onLine?: (line: string) => Effect.Effect<void>
  }
) {
  const docker = yield* Docker
  const id = yield* acquireContainer(spec)
  const attached = yield* docker.containerAttach(id)
  const exited = yield* docker.containerWait(id)
  const out = yield* Effect.forkScoped(drainTo(attached.stdout, options.stdoutFile, options.onLine))
  const err = yield* Effect.forkScoped(
    Stream.runForEach(attached.stderr, options.onStderr ?? (() => Effect.void)).pipe(Effect.ignore)
  )
  yield* docker.containerStart(id)
  const waiting = yield* Effect.forkScoped(exited)

  const end = yield* Effect.raceFirst(
    Fiber.join(waiting).pipe(Effect.map((code): BoxEnd => ({ endedBy: "exit", exitCode: code }))),
    Effect.sleep(options.ceiling).pipe(Effect.as<BoxEnd>({ endedBy: "ceiling", exitCode: null }))
  )
  if (end.endedBy === "ceiling") {
    yield* docker.containerKill(id)
    const code = yield* Fiber.join(waiting).pipe(Effect.timeout("10 seconds"), Effect.option)
    // The transcript is flushed before the result is reported.
    yield* Fiber.join(out).pipe(Effect.timeout("5 seconds"), Effect.ignore)
    return { endedBy: "ceiling", exitCode: code._tag === "Some" ? code.value : null } satisfies BoxEnd
  }
  yield* Fiber.join(out).pipe(Effect.zipRight(Fiber.join(err)), Effect.timeout("10 seconds"), Effect.ignore)
  return end
})
