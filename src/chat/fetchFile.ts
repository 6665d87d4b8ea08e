import { FileSystem } from "@effect/platform"
import { Effect } from "effect"
import type { ChatRule } from "../config/schema.js"
import type { MessageFile } from "../contract/messageFile.js"

/** Where each service serves a message's files: the only hosts a fetch goes to (and the only one a token goes to). */
const FILE_HOSTS = { slack: ["https://files.slack.com"], discord: ["https://cdn.discordapp.com", "https://media.discordapp.net"] } as const
const DEFAULT_API = { slack: "https://slack.com/api/", discord: "https://discord.com/api/" } as const
const MAX_REDIRECTS = 3

const failed = (message: string) => ({ message })

/** The origins a `[[chat]]`'s files may come from: the service's file hosts, and its API's (Enterprise Grid, a proxy, a stand-in). */
export const fileOrigins = (chat: Pick<ChatRule, "provider" | "api_url">) =>
  new Set<string>([...FILE_HOSTS[chat.provider], new URL(chat.api_url ?? DEFAULT_API[chat.provider]).origin])

/** The body, read as it comes and given up past `maxBytes`: a file larger than the service said never fills the disk. */
const readCapped = async (body: ReadableStream<Uint8Array> | null, maxBytes: number, stop: () => void) => {
  const chunks: Array<Uint8Array> = []
  let total = 0
  if (!body) return { chunks, total }
  const reader = body.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return { chunks, total }
    total += value.byteLength
    if (total > maxBytes) {
      stop()
      throw new Error(`it is larger than [[chat]] file_max (${maxBytes} bytes)`)
    }
    chunks.push(value)
  }
}

/**
 * A chat file fetched host-side into `dest` (0644: the box user reads it through its read-only
 * inbox). Only from the service's own file hosts; Slack's needs the bot token, which goes to no
 * other origin — a redirect elsewhere is refused, never followed with it. Discord's attachment
 * URLs are signed and fetched without a token.
 */
export const fetchChatFile = (chat: Pick<ChatRule, "provider" | "api_url">, botToken: Effect.Effect<string, string>) =>
(file: MessageFile, dest: string, maxBytes: number) =>
  Effect.gen(function*() {
    const allowed = fileOrigins(chat)
    const token = chat.provider === "slack" ? yield* botToken.pipe(Effect.mapError(failed)) : undefined
    const bytes = yield* Effect.tryPromise({
      try: async (signal) => {
        let url = new URL(file.url)
        for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
          if (!allowed.has(url.origin)) throw new Error(`${url.origin} is not where ${chat.provider} serves files`)
          const controller = new AbortController()
          signal.addEventListener("abort", () => controller.abort())
          const res = await fetch(url, {
            redirect: "manual",
            signal: controller.signal,
            headers: token !== undefined ? { authorization: `Bearer ${token}` } : {}
          })
          const next = res.headers.get("location")
          if (res.status >= 300 && res.status < 400 && next) {
            await res.body?.cancel()
            url = new URL(next, url)
            continue
          }
          if (!res.ok) throw new Error(`${chat.provider} answered ${res.status}`)
          // Without files:read Slack answers a file's URL with its sign-in page, not the file.
          if (chat.provider === "slack" && (res.headers.get("content-type") ?? "").includes("text/html") && !file.type.includes("html")) {
            await res.body?.cancel()
            throw new Error("Slack answered with a web page, not the file: give the app the files:read scope and reinstall it")
          }
          return await readCapped(res.body, maxBytes, () => controller.abort())
        }
        throw new Error(`more than ${MAX_REDIRECTS} redirects`)
      },
      catch: (e) => failed(e instanceof Error ? e.message : String(e))
    })
    const whole = new Uint8Array(bytes.total)
    let at = 0
    for (const c of bytes.chunks) {
      whole.set(c, at)
      at += c.byteLength
    }
    yield* (yield* FileSystem.FileSystem).writeFile(dest, whole, { mode: 0o644 }).pipe(Effect.mapError((e) => failed(e.message)))
    return bytes.total
  })
