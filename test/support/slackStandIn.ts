/**
 * A stand-in for Slack (not Slack): a local server speaking the parts of Slack's Web API
 * (`auth.test`, `apps.connections.open`, `chat.postMessage` with message metadata,
 * `conversations.replies` / `conversations.history` with `include_all_metadata`, `reactions.add` / `reactions.remove`
 * with Slack's `already_reacted` / `no_reaction`, file downloads that need the bot token, the external upload flow
 * `files.getUploadURLExternal` / upload URL / `files.completeUploadExternal`, `chat.update`, `chat.postEphemeral`) and the
 * Socket Mode websocket (events and `interactive` block_actions envelopes, with their acks) that
 * the real @slack/web-api and @slack/socket-mode clients use, with their base URL pointed here.
 * Records every post; pushes events as Socket Mode envelopes and records their acks.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { multipart } from "./multipart.js"
import { WebSocketServer, type WebSocket } from "ws"

export interface SlackPost {
  readonly channel: string
  readonly thread_ts: string | undefined
  readonly text: string
  readonly ts: string
  readonly token: string
  /** When it arrived (ms since the epoch). */
  readonly at: number
  readonly metadata?: { readonly event_type: string; readonly event_payload: Record<string, unknown> }
  /** Block Kit blocks, as posted (a held request's card carries its buttons here). */
  readonly blocks?: ReadonlyArray<{ readonly type: string; readonly elements?: ReadonlyArray<{ readonly action_id?: string; readonly value?: string }> }>
}

export interface SlackStandIn {
  /** The Web API base to put in `[[chat]] api_url`. */
  readonly apiUrl: string
  readonly posts: Array<SlackPost>
  /** Every Web API call: its method and the token it carried. */
  readonly calls: Array<{ readonly method: string; readonly token: string }>
  readonly acks: Set<string>
  /** Every reaction change, in order: `+name channel/ts` or `-name channel/ts`. */
  readonly reactions: Array<string>
  /** Sockets opened so far (a reconnect opens another). */
  readonly connections: () => number
  readonly connected: () => boolean
  /**
   * A message event from a user in a channel (in a thread when `thread_ts` is given); its ts. Its
   * files are served as Slack serves them: at url_private_download, to the bot token only (anyone
   * else gets a sign-in page, as from Slack).
   */
  readonly say: (m: {
    readonly channel: string
    readonly user: string
    readonly text: string
    readonly thread_ts?: string
    readonly bot_id?: string
    readonly files?: ReadonlyArray<{ readonly name: string; readonly mimetype: string; readonly bytes: Buffer; readonly size?: number }>
  }) => string
  /** Every file download: the file's id and the token it carried. */
  readonly downloads: Array<{ readonly id: string; readonly token: string }>
  /** Every file said so far, as its event lists it (id and url_private_download), in order. */
  readonly shared: Array<{ readonly id: string; readonly url: string }>
  /** Files uploaded through the external flow and completed into a channel: where, their bytes, the token that completed them. */
  readonly uploads: Array<{ readonly channel: string; readonly thread_ts: string | undefined; readonly name: string; readonly bytes: Buffer; readonly token: string }>
  /**
   * How long chat.postMessage takes to answer once it has posted (a slow Slack), or "never": the
   * message is in the channel and the answer never comes (its caller killed with the post in flight).
   */
  postDelay: number | "never"
  /** A person pressing a button of a posted message: a `block_actions` payload in a Socket Mode `interactive` envelope; its envelope id. */
  readonly press: (p: { readonly user: string; readonly post: SlackPost; readonly action_id: string; readonly value: string }) => string
  /** chat.update calls, in order: the message and its new text. */
  readonly updates: Array<{ readonly channel: string; readonly ts: string; readonly text: string }>
  /** chat.postEphemeral calls: who alone sees it, and what. */
  readonly ephemerals: Array<{ readonly channel: string; readonly user: string; readonly text: string }>
  /** Drops every open socket, as Slack does when it rotates connections. */
  readonly drop: () => void
  readonly close: () => Promise<void>
}

export const BOT_USER = "UROSTERBOT"

const bodyOf = (req: http.IncomingMessage) =>
  new Promise<Record<string, unknown>>((resolve) => {
    let raw = ""
    req.setEncoding("utf8")
    req.on("data", (c: string) => (raw += c))
    req.on("end", () => {
      const type = String(req.headers["content-type"] ?? "")
      if (type.includes("json")) {
        try {
          resolve(JSON.parse(raw) as Record<string, unknown>)
        } catch {
          resolve({})
        }
        return
      }
      resolve(Object.fromEntries(new URLSearchParams(raw)))
    })
  })

export const startSlackStandIn = async (tokens: { readonly bot: string; readonly app: string }): Promise<SlackStandIn> => {
  const posts: Array<SlackPost> = []
  const calls: Array<{ method: string; token: string }> = []
  const acks = new Set<string>()
  const reactions: Array<string> = []
  /** What people said, as the channel's past (a history lists them beside the bot's posts). */
  const said: Array<{ readonly channel: string; readonly user: string; readonly text: string; readonly ts: string; readonly thread_ts: string | undefined }> = []
  const reacted = new Set<string>()
  const files = new Map<string, Buffer>()
  const downloads: Array<{ id: string; token: string }> = []
  let fileIds = 0
  const sharedFiles: Array<{ id: string; url: string }> = []
  /** Bytes sent to an upload URL, by file id, until completeUploadExternal puts them in a channel. */
  const pending = new Map<string, { name: string; length: number; bytes?: Buffer }>()
  const uploads: SlackStandIn["uploads"] = []
  const updates: SlackStandIn["updates"] = []
  const ephemerals: SlackStandIn["ephemerals"] = []
  const sockets = new Set<WebSocket>()
  let opened = 0
  let clock = 1_700_000_000
  const nextTs = () => `${++clock}.000100`
  let port = 0

  const server = http.createServer(async (req, res) => {
    const method = /^\/api\/([\w.]+)/.exec(req.url ?? "")?.[1] ?? ""
    const token = /^Bearer (.+)$/.exec(String(req.headers.authorization ?? ""))?.[1] ?? ""
    const upload = /^\/upload\/v1\/(F\w+)$/.exec(req.url ?? "")?.[1]
    if (upload !== undefined) {
      // The bytes of getUploadURLExternal's file, exactly as many as it was told.
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const job = pending.get(upload)
        const raw = Buffer.concat(chunks)
        // The SDK sends the bytes as a multipart form (its one field the file); a raw body is read as is.
        const type = String(req.headers["content-type"] ?? "")
        const bytes = type.startsWith("multipart/form-data") ? multipart(raw, type)[0]?.bytes ?? Buffer.alloc(0) : raw
        if (!job || bytes.length !== job.length) return res.writeHead(400).end("bad upload")
        job.bytes = bytes
        res.writeHead(200, { "content-type": "text/plain" }).end(`OK - ${bytes.length}`)
      })
      return
    }
    const file = /^\/files-pri\/(F\w+)\//.exec(req.url ?? "")?.[1]
    if (file !== undefined) {
      downloads.push({ id: file, token })
      const bytes = files.get(file)
      if (token !== tokens.bot || !bytes) return res.writeHead(200, { "content-type": "text/html" }).end("<html>sign in to Slack</html>")
      return res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(bytes.length) }).end(bytes)
    }
    const body = await bodyOf(req)
    calls.push({ method, token })
    const answer = (o: Record<string, unknown>) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(o))
    switch (method) {
      case "auth.test":
        return answer(token === tokens.bot ? { ok: true, user_id: BOT_USER, user: "roster", team: "Stand-in team", team_id: "T0STANDIN" } : { ok: false, error: "invalid_auth" })
      case "apps.connections.open":
        return answer(token === tokens.app ? { ok: true, url: `ws://127.0.0.1:${port}/link/?ticket=${opened + 1}` } : { ok: false, error: "invalid_auth" })
      case "chat.postMessage": {
        if (token !== tokens.bot) return answer({ ok: false, error: "invalid_auth" })
        const ts = nextTs()
        // The SDK sends an object argument form-encoded, as a JSON string.
        const metadata = typeof body.metadata === "string" ? JSON.parse(body.metadata) : body.metadata
        const blocks = typeof body.blocks === "string" ? JSON.parse(body.blocks) : body.blocks
        posts.push({
          channel: String(body.channel ?? ""), thread_ts: body.thread_ts === undefined ? undefined : String(body.thread_ts), text: String(body.text ?? ""), ts, token, at: Date.now(),
          ...(metadata ? { metadata } : {}),
          ...(blocks ? { blocks } : {})
        })
        const delay = self.postDelay
        if (delay === "never") return
        return void setTimeout(() => answer({ ok: true, channel: body.channel, ts }), delay)
      }
      case "files.getUploadURLExternal": {
        if (token !== tokens.bot) return answer({ ok: false, error: "invalid_auth" })
        const id = `F0UP${++fileIds}`
        pending.set(id, { name: String(body.filename ?? ""), length: Number(body.length) })
        return answer({ ok: true, upload_url: `http://127.0.0.1:${port}/upload/v1/${id}`, file_id: id })
      }
      case "files.completeUploadExternal": {
        if (token !== tokens.bot) return answer({ ok: false, error: "invalid_auth" })
        const listed = (typeof body.files === "string" ? JSON.parse(body.files) : body.files) as Array<{ id: string; title?: string }>
        for (const f of listed) {
          const job = pending.get(f.id)
          if (!job?.bytes) return answer({ ok: false, error: "file_not_found" })
          uploads.push({ channel: String(body.channel_id ?? ""), thread_ts: body.thread_ts === undefined ? undefined : String(body.thread_ts), name: job.name, bytes: job.bytes, token })
        }
        return answer({ ok: true, files: listed.map((f) => ({ id: f.id })) })
      }
      case "chat.update":
        if (token !== tokens.bot) return answer({ ok: false, error: "invalid_auth" })
        updates.push({ channel: String(body.channel), ts: String(body.ts), text: String(body.text ?? "") })
        return answer({ ok: true, channel: body.channel, ts: body.ts })
      case "chat.postEphemeral":
        if (token !== tokens.bot) return answer({ ok: false, error: "invalid_auth" })
        ephemerals.push({ channel: String(body.channel), user: String(body.user), text: String(body.text ?? "") })
        return answer({ ok: true, message_ts: nextTs() })
      case "reactions.add":
      case "reactions.remove": {
        if (token !== tokens.bot) return answer({ ok: false, error: "invalid_auth" })
        const key = `${String(body.name)} ${String(body.channel)}/${String(body.timestamp)}`
        const adding = method === "reactions.add"
        if (adding === reacted.has(key)) return answer({ ok: false, error: adding ? "already_reacted" : "no_reaction" })
        if (adding) reacted.add(key)
        else reacted.delete(key)
        reactions.push(`${adding ? "+" : "-"}${key}`)
        return answer({ ok: true })
      }
      case "conversations.replies":
      case "conversations.history": {
        if (token !== tokens.bot) return answer({ ok: false, error: "invalid_auth" })
        const withMeta = String(body.include_all_metadata) === "true"
        const latest = body.latest === undefined ? Infinity : Number(body.latest)
        const inclusive = String(body.inclusive) === "true"
        const all = [
          ...posts.map((p) => ({ ...p, user: BOT_USER })),
          ...said.map((m) => ({ channel: m.channel, thread_ts: m.thread_ts, text: m.text, ts: m.ts, user: m.user, metadata: undefined }))
        ].sort((a, b) => Number(a.ts) - Number(b.ts))
        const inPlace = all.filter((p) =>
          p.channel === String(body.channel) && (inclusive ? Number(p.ts) <= latest : Number(p.ts) < latest) &&
          (method === "conversations.replies"
            ? p.thread_ts === String(body.ts) || p.ts === String(body.ts)
            // A channel's history holds its top-level messages, not the replies in their threads.
            : Number(p.ts) >= Number(body.oldest ?? 0) && (p.thread_ts === undefined || p.thread_ts === p.ts)))
        // A thread is listed oldest first (its parent first); a channel newest first, up to its limit.
        const listed = method === "conversations.replies" ? inPlace : inPlace.reverse().slice(0, Number(body.limit ?? 100))
        return answer({
          ok: true,
          messages: listed.map((p) => ({ type: "message", user: p.user, text: p.text, ts: p.ts, ...(withMeta && p.metadata ? { metadata: p.metadata } : {}) }))
        })
      }
      default:
        return answer({ ok: false, error: "unknown_method" })
    }
  })
  const wss = new WebSocketServer({ noServer: true })
  server.on("upgrade", (req, socket, head) => {
    if (!(req.url ?? "").startsWith("/link/")) return socket.destroy()
    wss.handleUpgrade(req, socket, head, (ws) => {
      opened++
      sockets.add(ws)
      ws.on("close", () => sockets.delete(ws))
      ws.on("message", (data) => {
        try {
          const m = JSON.parse(String(data)) as { envelope_id?: string }
          if (m.envelope_id) acks.add(m.envelope_id)
        } catch {
          // not an ack
        }
      })
      ws.send(JSON.stringify({ type: "hello", num_connections: 1, debug_info: { host: "stand-in" }, connection_info: { app_id: "A0STANDIN" } }))
    })
  })
  // Slack pings its clients; a client that hears nothing for 30 s reconnects.
  const pinger = setInterval(() => sockets.forEach((s) => s.ping()), 5000)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  port = (server.address() as AddressInfo).port

  let envelopes = 0
  const self: SlackStandIn = {
    postDelay: 0,
    apiUrl: `http://127.0.0.1:${port}/api/`,
    posts,
    calls,
    downloads,
    shared: sharedFiles,
    uploads,
    acks,
    reactions,
    connections: () => opened,
    connected: () => sockets.size > 0,
    say: (m) => {
      const ts = nextTs()
      said.push({ channel: m.channel, user: m.user, text: m.text, ts, thread_ts: m.thread_ts })
      const shared = (m.files ?? []).map((f) => {
        const id = `F0${++fileIds}`
        files.set(id, f.bytes)
        sharedFiles.push({ id, url: `http://127.0.0.1:${port}/files-pri/${id}/download/${encodeURIComponent(f.name)}` })
        return {
          id, name: f.name, mimetype: f.mimetype, size: f.size ?? f.bytes.length,
          url_private: `http://127.0.0.1:${port}/files-pri/${id}/${encodeURIComponent(f.name)}`,
          url_private_download: `http://127.0.0.1:${port}/files-pri/${id}/download/${encodeURIComponent(f.name)}`
        }
      })
      const event = {
        type: "message", channel: m.channel, user: m.user, text: m.text, ts, ...(m.thread_ts ? { thread_ts: m.thread_ts } : {}), ...(m.bot_id ? { bot_id: m.bot_id } : {}),
        ...(shared.length > 0 ? { subtype: "file_share", files: shared } : {}),
        channel_type: "channel"
      }
      const envelope = {
        envelope_id: `env-${++envelopes}`,
        type: "events_api",
        accepts_response_payload: false,
        retry_attempt: 0,
        retry_reason: "",
        payload: { team_id: "T0STANDIN", api_app_id: "A0STANDIN", type: "event_callback", event_id: `Ev${envelopes}`, event_time: clock, event }
      }
      for (const s of sockets) s.send(JSON.stringify(envelope))
      return ts
    },
    updates,
    ephemerals,
    press: (p) => {
      const envelope = {
        envelope_id: `env-${++envelopes}`,
        type: "interactive",
        accepts_response_payload: false,
        payload: {
          type: "block_actions",
          user: { id: p.user },
          team: { id: "T0STANDIN" },
          channel: { id: p.post.channel },
          container: { type: "message", message_ts: p.post.ts, channel_id: p.post.channel },
          message: { ts: p.post.ts, ...(p.post.thread_ts ? { thread_ts: p.post.thread_ts } : {}), text: p.post.text },
          actions: [{ type: "button", action_id: p.action_id, block_id: "roster_approval", value: p.value, action_ts: nextTs() }],
          response_url: `http://127.0.0.1:${port}/respond`
        }
      }
      for (const s of sockets) s.send(JSON.stringify(envelope))
      return envelope.envelope_id
    },
    drop: () => sockets.forEach((s) => s.terminate()),
    close: async () => {
      clearInterval(pinger)
      sockets.forEach((s) => s.terminate())
      wss.close()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
  return self
}
