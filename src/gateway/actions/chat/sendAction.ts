import { Effect, Either, Option, Schema } from "effect"
import { OrgConfig } from "../../../config/OrgConfig.js"
import { layout, Paths } from "../../../config/Paths.js"
import { chatFor } from "../../../config/schema.js"
import { uploadChat } from "../../../chat/uploadChat.js"
import { type BoxFile, readBoxFile } from "./boxFile.js"
import { chatChannelName, type ChatPlace } from "../../../contract/origin.js"
import { appendChannel } from "../../../journal/channel.js"
import { readRunContext, readRunContextOrWhy } from "../../../run/runContext.js"
import type { ActionAnswer, BoxCaller } from "../actionTypes.js"
import { placeText, postChat } from "../../../chat/postChat.js"

/** The most one send may carry; it is posted as several messages when the service needs. */
export const SEND_MAX = 12_000

/** Files one send may carry. */
const FILES_PER_SEND = 10

const Send = Schema.parseJson(Schema.Struct({ text: Schema.String, files: Schema.optional(Schema.Array(Schema.String)) }))

const refused = (status: number, error: string): ActionAnswer => ({ status, body: { ok: false, error } })

/** The thread a chat session's run answers in, from its saved context; undefined for any other run. */
export const chatSessionPlace = (caller: BoxCaller) =>
  readRunContextOrWhy(caller.worker, caller.runId).pipe(
    // A context that cannot be read leaves the message on the run's record only: said, so its thread's silence is explained.
    Effect.tap(({ problem }) =>
      problem === undefined ? Effect.void : Effect.logWarning(`gateway: run ${caller.runId}: ${problem}: what it says is kept on its record, not posted to a chat thread`)),
    Effect.map(({ context: ctx }) => (ctx?.surface === "chat-session" ? ctx.chat : undefined))
  )

/**
 * Posts a worker's words to its session's thread with the connection's token (the daemon posts;
 * no box holds it), and keeps them in the roster channel's history as the worker's own: the next
 * session of the channel reads both sides of the conversation.
 */
export const postAsWorker = (caller: BoxCaller, place: ChatPlace, text: string, tool: string) =>
  Effect.gen(function*() {
    const posted = yield* postChat(place, text).pipe(Effect.either)
    if (Either.isLeft(posted)) {
      yield* Effect.logWarning(`gateway: ${tool} of run ${caller.runId} failed: ${posted.left.message}`)
      return refused(502, `the message could not be posted: ${posted.left.detail}`)
    }
    yield* Effect.logInfo(`gateway: run ${caller.runId} of ${caller.worker} posted ${posted.right.length} message(s) to ${placeText(place)} (${tool})`)
    yield* appendChannel(chatChannelName(place), { author: caller.worker, text, run_id: caller.runId, role: "worker" })
    return { status: 200, body: { ok: true, messages: posted.right.length } } satisfies ActionAnswer
  })

/** The files a send names, read host-side from the run's own folders (each at most the chat's file_max), or why not. */
const readFiles = (caller: BoxCaller, place: ChatPlace, paths: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    if (paths.length === 0) return []
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.option)
    const mapped = Option.isSome(org) ? chatFor(org.value, place) : undefined
    const maxBytes = Math.floor((mapped?.chat.file_max ?? 20) * 1024 * 1024)
    const runDir = layout(yield* Paths).runDir(caller.worker, caller.runId)
    const files: Array<BoxFile> = []
    for (const p of paths) {
      const read = yield* readBoxFile(runDir, p, maxBytes)
      if (typeof read === "string") return read
      files.push(read)
    }
    return files
  })

/**
 * slack_send / discord_send { text, files? }: the worker's answer posted to its own chat session's
 * channel and the thread of the message it is answering — the place comes from the run's saved
 * context, never from the request, so a box cannot name another channel.
 */
export const chatSend = (provider: "slack" | "discord") => (caller: BoxCaller, body: string) =>
  Effect.gen(function*() {
    const decoded = Schema.decodeUnknownEither(Send)(body)
    if (Either.isLeft(decoded) || decoded.right.text.trim() === "") return refused(400, `the body is {"text": "...", "files"?: ["/pihome/..."]} with some text`)
    const text = decoded.right.text
    const paths = decoded.right.files ?? []
    if (paths.length > FILES_PER_SEND) return refused(400, `at most ${FILES_PER_SEND} files a send: send the rest in another`)
    if (text.length > SEND_MAX) return refused(413, `text is ${text.length} characters; one send takes at most ${SEND_MAX}: send it in parts`)
    const ctx = yield* readRunContext(caller.worker, caller.runId).pipe(Effect.either)
    if (Either.isLeft(ctx) || ctx.right === undefined) return refused(409, "this run has no saved context: it is not a chat session")
    const place = ctx.right.chat
    if (ctx.right.surface !== "chat-session" || place === undefined) {
      return refused(403, `this run is not a chat session (it is ${ctx.right.surface}): answer in your final message instead`)
    }
    if (place.provider !== provider) return refused(403, `this session is in ${place.provider}: use ${place.provider}_send`)
    // Every file is read (and refused) before anything is posted: a send lands whole or not at all.
    const files = yield* readFiles(caller, place, paths)
    if (typeof files === "string") return refused(400, files)
    const posted = yield* postAsWorker(caller, place, text, `${provider}_send`)
    if (posted.status !== 200 || files.length === 0) return posted
    const uploaded = yield* uploadChat(place, files).pipe(Effect.either)
    if (Either.isLeft(uploaded)) {
      yield* Effect.logWarning(`gateway: ${provider}_send of run ${caller.runId}: its files could not be uploaded: ${uploaded.left.message}`)
      return refused(502, `the text was posted, but the files could not be: ${uploaded.left.detail}`)
    }
    yield* Effect.logInfo(`gateway: run ${caller.runId} of ${caller.worker} uploaded ${files.length} file(s) to ${placeText(place)}`)
    return { status: 200, body: { ok: true, messages: (posted.body as { messages: number }).messages, files: files.length } } satisfies ActionAnswer
  })
