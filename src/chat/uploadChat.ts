import { Effect } from "effect"
import type { ChatPlace } from "../contract/origin.js"
import { chatClient } from "./chatClient.js"
import { ChatPostError } from "./ChatPostError.js"

/** A file to upload: its name and bytes, read host-side. */
export interface UploadFile {
  readonly name: string
  readonly bytes: Uint8Array
}

/**
 * Files posted to a mapped chat place for a worker, in the thread it answers in, with the
 * connection's token (the daemon uploads; no box holds it): Slack's external upload flow
 * (files.getUploadURLExternal, the bytes to its upload URL, files.completeUploadExternal, as the
 * SDK's filesUploadV2 does it), Discord's multipart message.
 */
export const uploadChat = Effect.fn("chat.upload")(function*(place: ChatPlace, files: ReadonlyArray<UploadFile>) {
  const c = yield* chatClient(place)
  const where = `${place.provider} channel ${c.channel}`
  const fail = (e: unknown) => new ChatPostError({ where, detail: e instanceof Error ? e.message : String(e) })
  if (c.provider === "slack") {
    yield* Effect.tryPromise({
      try: () =>
        c.client.filesUploadV2({
          channel_id: c.channel,
          ...(place.thread ? { thread_ts: place.thread } : {}),
          file_uploads: files.map((f) => ({ file: Buffer.from(f.bytes), filename: f.name }))
        }),
      catch: fail
    })
    return files.length
  }
  const channel = place.thread ?? c.channel
  yield* Effect.tryPromise({
    try: () =>
      c.rest.post(`/channels/${channel}/messages`, {
        body: {
          allowed_mentions: { parse: [] },
          ...(place.message && !place.thread ? { message_reference: { message_id: place.message, fail_if_not_exists: false } } : {})
        },
        files: files.map((f) => ({ name: f.name, data: Buffer.from(f.bytes) }))
      }),
    catch: fail
  })
  return files.length
})
