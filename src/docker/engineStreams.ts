import * as NodeStream from "@effect/platform-node/NodeStream"
import { Effect, Option, Schema } from "effect"
import { PassThrough, type Readable } from "node:stream"
import type { Duplex } from "node:stream"
import { demux } from "./demux.js"
import { type Attached, type DockerApi, DockerError } from "./Docker.js"
import { describe, type EngineCall, type Modem } from "./engineCall.js"

/** The engine's answer to a container wait: the exit code, or why it could not wait. */
const WaitAnswer = Schema.Struct({
  StatusCode: Schema.optional(Schema.Number),
  Error: Schema.optional(Schema.NullOr(Schema.Struct({ Message: Schema.optional(Schema.String) })))
})
const decodeWaitAnswer = Schema.decodeUnknownOption(Schema.parseJson(WaitAnswer))

/** A container's streams: attach (stdin, and stdout/stderr demultiplexed with backpressure) and its next exit. */
export const streamCalls = (call: EngineCall): Pick<DockerApi, "containerAttach" | "containerWait"> => ({
  containerAttach: (id, attachOptions) =>
    Effect.acquireRelease(
      call("attach", (_engine, modem, abortSignal) =>
        new Promise<{ socket: Duplex; modem: Modem }>((resolve, reject) =>
          modem.dial({
            path: `/containers/${id}/attach?`,
            method: "POST",
            abortSignal,
            isStream: true,
            hijack: true,
            openStdin: true,
            statusCodes: { 101: true, 200: true, 404: "no such container", 500: "server error" },
            options: attachOptions?.replay
              ? { logs: true, stream: true, stdin: false, stdout: true, stderr: true }
              : { stream: true, stdin: true, stdout: true, stderr: true }
          }, (err, res) => (err ? reject(err) : resolve({ socket: res as unknown as Duplex, modem }))))),
      ({ socket }) => Effect.sync(() => socket.destroy())
    ).pipe(Effect.map(({ socket }): Attached => {
      const out = new PassThrough()
      const err = new PassThrough()
      demux(socket as unknown as Readable, out, err)
      // The outputs end when the raw stream does.
      const end = () => {
        out.end()
        err.end()
      }
      socket.once("end", end)
      socket.once("close", end)
      socket.once("error", end)
      const toStream = (s: PassThrough) =>
        NodeStream.fromReadable<DockerError>(() => s, (cause) => new DockerError({ operation: "attach", ...describe(cause) }))
      return {
        stdout: toStream(out),
        stderr: toStream(err),
        write: (chunk) =>
          Effect.async<void, DockerError>((resume) => {
            socket.write(chunk, (e) => resume(e ? Effect.fail(new DockerError({ operation: "stdin", ...describe(e) })) : Effect.void))
          }),
        closeStdin: Effect.sync(() => {
          socket.end()
        })
      }
    })),

  containerWait: (id) =>
    call("wait", (_engine, modem, abortSignal) =>
      new Promise<Readable>((resolve, reject) =>
        modem.dial({
          path: `/containers/${id}/wait?`,
          method: "POST",
          abortSignal,
          isStream: true,
          statusCodes: { 200: true, 400: "bad parameter", 404: "no such container", 500: "server error" },
          options: { condition: "next-exit" }
        }, (err, res) => (err ? reject(err) : resolve(res))))).pipe(
        Effect.map((res) =>
          Effect.async<number, DockerError>((resume) => {
            let body = ""
            res.setEncoding("utf8")
            res.on("data", (c: string) => (body += c))
            res.once("error", (e) => resume(Effect.fail(new DockerError({ operation: "wait", ...describe(e) }))))
            res.once("end", () => {
              const parsed = Option.getOrUndefined(decodeWaitAnswer(body))
              if (!parsed) return resume(Effect.fail(new DockerError({ operation: "wait", detail: `unreadable answer: ${body.slice(0, 200)}` })))
              if (parsed.Error?.Message) {
                return resume(Effect.fail(new DockerError({ operation: "wait", detail: parsed.Error.Message })))
              }
              resume(Effect.succeed(parsed.StatusCode ?? -1))
            })
            return Effect.sync(() => res.destroy())
          })
        )
      )
})
