import { Clock, Effect, Schema } from "effect"
import * as http from "node:http"
import { splitHostPort } from "./peers.js"
import { signRequest } from "./sign.js"

/** Another node's runner RPC did not answer as it should: why, in a few words. */
export class RpcUnanswered extends Schema.TaggedError<RpcUnanswered>()("RpcUnanswered", { at: Schema.String, detail: Schema.String }) {
  override get message() {
    return `the runner RPC at ${this.at} ${this.detail}`
  }
}

export interface RpcCall {
  readonly method: "GET" | "POST"
  readonly path: string
  readonly body?: string
}

/** One signed call to the node advertised at `at` (host:port), from node `from`: its status and body, within `timeoutMs`. */
export const rpcCall = (at: string, key: Buffer, from: string, call: RpcCall, timeoutMs: number) =>
  Effect.gen(function*() {
    const body = call.body ?? ""
    const headers = {
      ...signRequest(key, { method: call.method, path: call.path, node: from, body }, yield* Clock.currentTimeMillis),
      ...(body === "" ? {} : { "content-type": "application/json" }),
      "content-length": String(Buffer.byteLength(body))
    }
    return yield* Effect.async<{ readonly status: number; readonly body: string }, RpcUnanswered>((resume, signal) => {
      const req = http.request({ ...splitHostPort(at), method: call.method, path: call.path, headers, signal, agent: false }, (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (c: string) => (text += c))
        res.once("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, body: text })))
        res.once("error", (e) => resume(Effect.fail(new RpcUnanswered({ at, detail: `broke off its answer (${e.message})` }))))
      })
      req.once("error", (e: NodeJS.ErrnoException) => {
        if (e.name !== "AbortError") resume(Effect.fail(new RpcUnanswered({ at, detail: `cannot be reached (${e.code ?? e.message})` })))
      })
      req.end(body)
    }).pipe(
      Effect.timeoutFail({ duration: timeoutMs, onTimeout: () => new RpcUnanswered({ at, detail: `did not answer in ${timeoutMs} ms` }) })
    )
  })
