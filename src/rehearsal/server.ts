import { Effect, Schema } from "effect"
import * as http from "node:http"
import * as zlib from "node:zlib"
import { nextStep, type Step } from "./script.js"

/** What the rehearsal reads of a Messages API request: the conversation, the tools' names, and a thread to continue. */
const Block = Schema.Struct({
  type: Schema.String,
  text: Schema.optional(Schema.String),
  tool_use_id: Schema.optional(Schema.String),
  content: Schema.optional(Schema.Unknown)
})
const RequestMessage = Schema.Struct({ role: Schema.String, content: Schema.Union(Schema.String, Schema.Array(Block)) })
type RequestMessage = typeof RequestMessage.Type
const MessagesRequest = Schema.parseJson(Schema.Struct({
  model: Schema.optional(Schema.String),
  messages: Schema.optional(Schema.Array(RequestMessage)),
  tools: Schema.optional(Schema.Array(Schema.Struct({ name: Schema.optional(Schema.String) }))),
  thread: Schema.optional(Schema.Struct({ type: Schema.optional(Schema.String), previous_message_id: Schema.optional(Schema.String) }))
}))

export interface RehearsalOptions {
  readonly port: number
  readonly host?: string
  /** Answer every request with this status (500, 529, ...) to rehearse a model failure. */
  readonly failWith?: number
  /** Think this long before answering (to rehearse a slow turn, e.g. for Ctrl-C). */
  readonly delayMs?: number
  /** Stream every answer compressed (`content-encoding: zstd`, flushed event by event), as some upstreams do even when asked not to. */
  readonly encoding?: "zstd"
}

export interface Received {
  /** When its headers arrived (ms since the epoch). */
  readonly at: number
  readonly path: string
  readonly apiKey: string | undefined
  readonly authorization: string | undefined
}

/** Where an answer's bytes go: the response itself, or a compressor in front of it. */
interface Out {
  readonly write: (text: string) => void
  readonly end: () => void
}

const sse = (out: Out, event: string, data: unknown) => out.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)

/** The answer's head, and where its body goes: compressed (each event flushed at once) when the rehearsal is asked to. */
const open = (res: http.ServerResponse, encoding: RehearsalOptions["encoding"]): Out => {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...(encoding ? { "content-encoding": encoding } : {}) })
  if (!encoding) return { write: (t) => void res.write(t), end: () => void res.end() }
  const z = zlib.createZstdCompress({ flush: zlib.constants.ZSTD_e_flush })
  z.pipe(res)
  return { write: (t) => void z.write(t), end: () => void z.end() }
}

/** The assistant message a step streams, as it joins the conversation of a thread. */
const assistantMessage = (step: Step) => ({
  role: "assistant",
  content: step.kind === "final"
    ? [{ type: "text", text: step.text }]
    : [{ type: "text", text: step.intro }, { type: "tool_use", id: step.id, name: step.name, input: step.input }]
})

const stream = (res: http.ServerResponse, model: string, step: Step, id: string, encoding: RehearsalOptions["encoding"]) => {
  const out = open(res, encoding)
  sse(out, "message_start", {
    type: "message_start",
    message: {
      id, type: "message", role: "assistant", model, content: [],
      stop_reason: null, stop_sequence: null, usage: { input_tokens: 12, output_tokens: 1 }
    }
  })
  const text = step.kind === "final" ? step.text : step.intro
  sse(out, "content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } })
  for (const piece of text.match(/.{1,24}/gs) ?? []) {
    sse(out, "content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: piece } })
  }
  sse(out, "content_block_stop", { type: "content_block_stop", index: 0 })
  if (step.kind === "tool") {
    sse(out, "content_block_start", { type: "content_block_start", index: 1, content_block: { type: "tool_use", id: step.id, name: step.name, input: {} } })
    sse(out, "content_block_delta", { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: JSON.stringify(step.input) } })
    sse(out, "content_block_stop", { type: "content_block_stop", index: 1 })
  }
  sse(out, "message_delta", {
    type: "message_delta",
    delta: { stop_reason: step.kind === "tool" ? "tool_use" : "end_turn", stop_sequence: null },
    usage: { output_tokens: 24 }
  })
  sse(out, "message_stop", { type: "message_stop" })
  out.end()
}

/**
 * The rehearsal model: a small Anthropic-Messages-compatible server (streaming SSE) that the
 * gateway routes api.anthropic.com to when there is no real model to call. It records which
 * credential each request carried, so a test can prove the real key arrived by injection.
 */
export const serveRehearsal = (options: RehearsalOptions) =>
  Effect.acquireRelease(
    Effect.async<{ server: http.Server; port: number; received: Array<Received> }, Error>((resume) => {
      const received: Array<Received> = []
      // Message threads (pi sends them to api.anthropic.com): a `continue` carries only the new
      // messages and names the reply it builds on; the server keeps the rest, tools included.
      const threads = new Map<string, { readonly tools: ReadonlyArray<string>; readonly messages: ReadonlyArray<RequestMessage> }>()
      let counter = 0
      const server = http.createServer((req, res) => {
        const at = Date.now()
        let body = ""
        req.setEncoding("utf8")
        req.on("data", (c: string) => (body += c))
        req.on("end", () => {
          const key = req.headers["x-api-key"]
          received.push({
            at,
            path: req.url ?? "",
            apiKey: typeof key === "string" ? key : undefined,
            authorization: req.headers.authorization
          })
          if (req.method !== "POST" || !(req.url ?? "").startsWith("/v1/messages")) {
            res.writeHead(404, { "content-type": "application/json" })
            return res.end(JSON.stringify({ type: "error", error: { type: "not_found_error", message: "rehearsal model: only /v1/messages" } }))
          }
          if (options.failWith) {
            res.writeHead(options.failWith, { "content-type": "application/json" })
            return res.end(JSON.stringify({
              type: "error",
              error: { type: options.failWith === 529 ? "overloaded_error" : "api_error", message: `rehearsal model: rehearsed failure ${options.failWith}` }
            }))
          }
          try {
            const request = Schema.decodeUnknownSync(MessagesRequest)(body)
            let tools = (request.tools ?? []).map((t) => t.name ?? "")
            let messages: ReadonlyArray<RequestMessage> = request.messages ?? []
            if (request.thread?.type === "continue") {
              const previous = threads.get(request.thread.previous_message_id ?? "")
              if (!previous) {
                res.writeHead(400, { "content-type": "application/json" })
                return res.end(JSON.stringify({
                  type: "error",
                  error: { type: "invalid_request_error", message: "rehearsal model: no such thread", details: { error_code: "thread_not_found" } }
                }))
              }
              tools = [...previous.tools]
              messages = [...previous.messages, ...messages]
            }
            const step = nextStep(messages, tools)
            const id = `msg_rehearsal_${Date.now()}_${++counter}`
            if (request.thread) threads.set(id, { tools, messages: [...messages, assistantMessage(step)] })
            const answer = () => {
              if (!res.destroyed) stream(res, request.model ?? "rehearsal", step, id, options.encoding)
            }
            if (options.delayMs) setTimeout(answer, options.delayMs)
            else answer()
          } catch (e) {
            res.writeHead(400, { "content-type": "application/json" })
            res.end(JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: `rehearsal model: ${String(e)}` } }))
          }
        })
      })
      server.once("error", (e) => resume(Effect.fail(e)))
      server.listen(options.port, options.host ?? "127.0.0.1", () => {
        const a = server.address()
        resume(Effect.succeed({ server, port: typeof a === "object" && a ? a.port : options.port, received }))
      })
    }),
    ({ server }) => Effect.sync(() => server.close())
  )
