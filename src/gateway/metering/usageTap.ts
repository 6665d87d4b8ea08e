import { Transform, type TransformCallback } from "node:stream"
import { StringDecoder } from "node:string_decoder"
import { NO_TOKENS, type TokenCount } from "../../config/prices.js"
import { type ModelUsage, readModelAnswer } from "../../contract/modelAnswer.js"

/** What the tap asks after each complete event: go on, or stop the answer here. */
export type Verdict = "go" | "cut"

export interface TapHooks {
  /** The answer's running count; "cut" ends it at this event boundary. */
  readonly onProgress: (count: TokenCount) => Verdict
  /** The last event the box gets when an answer is cut (an SSE `error` event). */
  readonly cutEvent: () => string
  /** Called once when cutting, to stop the upstream. */
  readonly onCut: () => void
  /** Awaited before the box is sent the cut event (the run's stop is recorded first: the box acts on that event at once). */
  readonly beforeCutEvent?: () => Promise<void>
  /** Called once with the final count, before the box is sent the answer's end. */
  readonly onEnd?: (count: TokenCount) => void
}

const MAX_JSON = 4 * 1024 * 1024
const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined)

type Usage = ModelUsage

/** An Anthropic usage object over what is known so far: a field it does not carry keeps its value. */
const withUsage = (t: TokenCount, u: Usage | undefined): TokenCount =>
  u === undefined ? t : {
    input: num(u.input_tokens) ?? t.input,
    output: num(u.output_tokens) ?? t.output,
    cache_read: num(u.cache_read_input_tokens) ?? t.cache_read,
    cache_write: num(u.cache_creation_input_tokens) ?? t.cache_write
  }

/**
 * Reads a model answer's token usage as it passes, changing nothing: Anthropic Messages SSE
 * (`message_start` and `message_delta` usage; output estimated from the deltas in between, since
 * the real count comes only at the end) or a plain JSON answer. SSE is forwarded a whole event at
 * a time — never waiting for more than the event being written — so an answer can be cut on an
 * event boundary, ending with a terminal error event the SDKs understand.
 */
export class UsageTap extends Transform {
  count: TokenCount = NO_TOKENS
  cut = false
  private pending = ""
  private readonly decoder = new StringDecoder("utf8")
  private json: Array<Buffer> = []
  private jsonSize = 0
  private estimatedChars = 0
  private reportedOutput = false

  constructor(private readonly kind: "sse" | "json", private readonly hooks: TapHooks) {
    super()
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    if (this.cut) return done()
    if (this.kind === "json") {
      if (this.jsonSize + chunk.length <= MAX_JSON) this.json.push(chunk)
      this.jsonSize += chunk.length
      return done(null, chunk)
    }
    this.pending += this.decoder.write(chunk)
    const end = Math.max(this.pending.lastIndexOf("\n\n"), this.pending.lastIndexOf("\r\n\r\n"))
    if (end < 0) return done()
    const cutAt = this.pending.startsWith("\r\n\r\n", end) ? end + 4 : end + 2
    const complete = this.pending.slice(0, cutAt)
    this.pending = this.pending.slice(cutAt)
    for (const event of complete.split(/\r?\n\r?\n/)) {
      if (event.trim() === "") continue
      this.push(`${event}\n\n`)
      this.readEvent(event)
      if (this.hooks.onProgress(this.count) === "cut") return this.stop(done)
    }
    done()
  }

  override _flush(done: TransformCallback) {
    if (this.kind === "json") this.readJson()
    else if (!this.cut) {
      this.pending += this.decoder.end()
      if (this.pending !== "") {
        this.push(this.pending)
        this.readEvent(this.pending)
      }
    }
    if (!this.cut) this.hooks.onEnd?.(this.count)
    done()
  }

  private stop(done: TransformCallback) {
    this.cut = true
    this.hooks.onEnd?.(this.count)
    this.hooks.onCut()
    const send = () => {
      this.push(this.hooks.cutEvent())
      this.push(null)
      done()
    }
    if (this.hooks.beforeCutEvent) void this.hooks.beforeCutEvent().then(send, send)
    else send()
  }

  private readEvent(event: string) {
    const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n")
    if (data === "") return
    const parsed = readModelAnswer(data)
    if (!parsed) return
    if (parsed.type === "message_start") this.count = withUsage(this.count, parsed.message?.usage)
    else if (parsed.type === "content_block_delta" && parsed.delta && !this.reportedOutput) {
      const d = parsed.delta
      for (const v of [d.text, d.partial_json, d.thinking]) if (typeof v === "string") this.estimatedChars += v.length
      // About four characters a token; an estimate only until the answer says its real count.
      this.count = { ...this.count, output: Math.max(this.count.output, Math.ceil(this.estimatedChars / 4)) }
    } else if (parsed.type === "message_delta") {
      this.count = withUsage(this.count, parsed.usage)
      if (num(parsed.usage?.output_tokens) !== undefined) this.reportedOutput = true
    }
  }

  private readJson() {
    // Not a message (an error answer, or over the size read): no usage to count.
    const body = readModelAnswer(Buffer.concat(this.json).toString("utf8"))
    if (body) this.count = withUsage(this.count, body.usage)
  }
}
