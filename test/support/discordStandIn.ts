/**
 * A stand-in for Discord (not Discord): a local server speaking the parts of Discord's REST API
 * (`/gateway/bot`, `/users/@me`, `/channels/:id`, `/channels/:id/messages`) and its gateway
 * websocket (HELLO, heartbeats, IDENTIFY → READY, RESUME → a new session, MESSAGE_CREATE) that
 * the real @discordjs/rest and @discordjs/ws clients use, with their base URL pointed here.
 * Records every post; a post whose `nonce` is enforced and already seen is the same message
 * again, as Discord answers it; GET `/channels/:id/messages` lists what was posted there.
 * PUT/DELETE `/channels/:id/messages/:id/reactions/:emoji/@me` (204, as Discord answers either
 * way) and POST `/channels/:id/typing` are recorded in order. A message with files is read as
 * Discord reads it (multipart: payload_json and files[n]); attachments of said messages are served
 * at a CDN-like path without a token, as Discord's signed attachment URLs are. A button press is an
 * INTERACTION_CREATE; its answer (POST /interactions/:id/:token/callback) and message edits (PATCH)
 * are recorded.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { multipart } from "./multipart.js"
import { WebSocketServer, type WebSocket } from "ws"

export interface DiscordPost {
  readonly channel: string
  readonly content: string
  readonly reply_to: string | undefined
  readonly allowed_mentions: unknown
  readonly token: string
  readonly id: string
  readonly nonce: string | undefined
  readonly timestamp: string
  /** A multipart message's files, as uploaded. */
  readonly files?: ReadonlyArray<{ readonly name: string; readonly bytes: Buffer }>
  /** Message components (a held request's card carries its buttons here). */
  readonly components?: ReadonlyArray<{ readonly type: number; readonly components?: ReadonlyArray<{ readonly custom_id?: string; readonly label?: string }> }>
}


export interface DiscordStandIn {
  /** The REST base to put in `[[chat]] api_url`. */
  readonly apiUrl: string
  readonly posts: Array<DiscordPost>
  /** Every reaction change and typing call, in order: `+emoji channel/message`, `-emoji channel/message`, `typing channel`. */
  readonly marks: Array<string>
  readonly identified: () => number
  readonly connected: () => boolean
  /** A thread in a channel: messages in it name the thread as their channel. */
  readonly thread: (parent: string) => string
  /** A MESSAGE_CREATE from a user in a channel (or thread); its id. */
  /** A MESSAGE_CREATE from a user; its attachments served from the stand-in's CDN path (no token, as Discord's signed URLs). */
  readonly say: (m: {
    readonly channel: string
    readonly user: string
    readonly text: string
    readonly mentionBot?: boolean
    readonly bot?: boolean
    readonly files?: ReadonlyArray<{ readonly name: string; readonly type: string; readonly bytes: Buffer }>
  }) => string
  /** Every attachment download: its id and the Authorization header it carried ("" for none). */
  readonly downloads: Array<{ readonly id: string; readonly authorization: string }>
  /** The URL of every attachment said so far, in order. */
  readonly attachmentUrls: Array<string>
  /** A person pressing a button of a posted message: an INTERACTION_CREATE on the gateway; the interaction's id. */
  readonly press: (p: { readonly user: string; readonly post: DiscordPost; readonly custom_id: string }) => string
  /** Interaction callbacks, in order: which interaction, and the answer (type, and data when it has some). */
  readonly callbacks: Array<{ readonly id: string; readonly token: string; readonly body: { readonly type: number; readonly data?: { readonly content?: string; readonly flags?: number } } }>
  /** Message edits (PATCH), in order. */
  readonly edits: Array<{ readonly channel: string; readonly id: string; readonly content: string; readonly components: unknown }>
  readonly drop: () => void
  readonly close: () => Promise<void>
}

export const DISCORD_BOT_ID = "900000000000000001"

export const startDiscordStandIn = async (token: string): Promise<DiscordStandIn> => {
  const posts: Array<DiscordPost> = []
  const marks: Array<string> = []
  const said: Array<{ readonly id: string; readonly channel: string; readonly user: string; readonly content: string; readonly timestamp: string }> = []
  const threads = new Map<string, string>()
  const attachments = new Map<string, Buffer>()
  const downloads: Array<{ id: string; authorization: string }> = []
  const attachmentUrls: Array<string> = []
  const callbacks: DiscordStandIn["callbacks"] = []
  const edits: DiscordStandIn["edits"] = []
  const sockets = new Set<WebSocket>()
  let identified = 0
  let ids = 1_000_000_000_000_000n
  const nextId = () => String(++ids)
  let seq = 0
  let port = 0

  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const whole = Buffer.concat(chunks)
      const type = String(req.headers["content-type"] ?? "")
      const parts = type.startsWith("multipart/form-data") ? multipart(whole, type) : []
      // A message with files carries its JSON in payload_json, beside files[n].
      const raw = parts.length > 0 ? parts.find((p) => p.name === "payload_json")?.bytes.toString("utf8") ?? "" : whole.toString("utf8")
      const uploaded = parts.filter((p) => p.filename !== undefined).map((p) => ({ name: p.filename ?? "", bytes: Buffer.from(p.bytes) }))
      const answer = (status: number, o: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(o))
      const auth = String(req.headers.authorization ?? "")
      const attachment = /^\/attachments\/\d+\/(\d+)\//.exec(req.url ?? "")?.[1]
      if (attachment !== undefined) {
        downloads.push({ id: attachment, authorization: auth })
        const bytes = attachments.get(attachment)
        return bytes ? res.writeHead(200, { "content-type": "application/octet-stream" }).end(bytes) : answer(404, { message: "404: Not Found" })
      }
      // An interaction's answer is authorised by its token, not the bot's.
      const callback = /^\/api\/v10\/interactions\/(\d+)\/([^/]+)\/callback$/.exec((req.url ?? "").split("?")[0] ?? "")
      if (callback && req.method === "POST") {
        callbacks.push({ id: callback[1] ?? "", token: callback[2] ?? "", body: JSON.parse(raw || "{}") })
        return res.writeHead(204).end()
      }
      if (auth !== `Bot ${token}`) return answer(401, { message: "401: Unauthorized", code: 0 })
      const url = (req.url ?? "").replace(/^\/api\/v10/, "").split("?")[0] ?? ""
      if (req.method === "GET" && url === "/gateway/bot") {
        return answer(200, { url: `ws://127.0.0.1:${port}/gateway`, shards: 1, session_start_limit: { total: 1000, remaining: 999, reset_after: 0, max_concurrency: 1 } })
      }
      if (req.method === "GET" && url === "/users/@me") return answer(200, { id: DISCORD_BOT_ID, username: "roster", discriminator: "0", bot: true })
      const channel = /^\/channels\/(\d+)$/.exec(url)?.[1]
      if (req.method === "GET" && channel) {
        const parent = threads.get(channel)
        return answer(200, parent ? { id: channel, type: 11, parent_id: parent } : { id: channel, type: 0, parent_id: null })
      }
      const reaction = /^\/channels\/(\d+)\/messages\/(\d+)\/reactions\/([^/]+)\/@me$/.exec(url)
      if (reaction && (req.method === "PUT" || req.method === "DELETE")) {
        marks.push(`${req.method === "PUT" ? "+" : "-"}${decodeURIComponent(reaction[3] ?? "")} ${reaction[1]}/${reaction[2]}`)
        return res.writeHead(204).end()
      }
      const typing = /^\/channels\/(\d+)\/typing$/.exec(url)?.[1]
      if (req.method === "POST" && typing) {
        marks.push(`typing ${typing}`)
        return res.writeHead(204).end()
      }
      const target = /^\/channels\/(\d+)\/messages$/.exec(url)?.[1]
      if (req.method === "POST" && target) {
        const body = JSON.parse(raw || "{}") as {
          content?: string; message_reference?: { message_id?: string }; allowed_mentions?: unknown; nonce?: string; enforce_nonce?: boolean
          components?: DiscordPost["components"]
        }
        const again = body.enforce_nonce && body.nonce !== undefined ? posts.find((p) => p.nonce === body.nonce) : undefined
        if (again) return answer(200, { id: again.id, channel_id: again.channel, content: again.content, nonce: again.nonce })
        const id = nextId()
        posts.push({
          channel: target, content: body.content ?? "", reply_to: body.message_reference?.message_id, allowed_mentions: body.allowed_mentions, token,
          id, nonce: body.nonce, timestamp: new Date().toISOString(), ...(uploaded.length > 0 ? { files: uploaded } : {}),
          ...(body.components ? { components: body.components } : {})
        })
        return answer(200, { id, channel_id: target, content: body.content, ...(body.nonce ? { nonce: body.nonce } : {}) })
      }
      const edited = /^\/channels\/(\d+)\/messages\/(\d+)$/.exec(url)
      if (req.method === "PATCH" && edited) {
        const body = JSON.parse(raw || "{}") as { content?: string; components?: unknown }
        edits.push({ channel: edited[1] ?? "", id: edited[2] ?? "", content: body.content ?? "", components: body.components })
        return answer(200, { id: edited[2], channel_id: edited[1], content: body.content })
      }
      if (req.method === "GET" && target) {
        // Newest first, as Discord lists them, people's messages beside the bot's; a stored message keeps no nonce.
        const query = new URL(req.url ?? "/", "http://stand-in.test").searchParams
        const before = query.get("before")
        const all = [
          ...posts.map((p) => ({ id: p.id, channel_id: p.channel, content: p.content, timestamp: p.timestamp, author: { id: DISCORD_BOT_ID, username: "roster", bot: true } })),
          ...said.map((m) => ({ id: m.id, channel_id: m.channel, content: m.content, timestamp: m.timestamp, author: { id: m.user, username: `user-${m.user}` } }))
        ].filter((m) => m.channel_id === target && (before === null || BigInt(m.id) < BigInt(before)))
        return answer(200, all.sort((a, b) => (BigInt(b.id) > BigInt(a.id) ? 1 : -1)).slice(0, Number(query.get("limit") ?? 50)))
      }
      return answer(404, { message: "404: Not Found", code: 0 })
    })
  })
  const wss = new WebSocketServer({ noServer: true })
  const send = (ws: WebSocket, op: number, d: unknown, t: string | null = null) =>
    ws.send(JSON.stringify({ op, d, s: op === 0 ? ++seq : null, t }))
  server.on("upgrade", (req, socket, head) => {
    if (!(req.url ?? "").startsWith("/gateway")) return socket.destroy()
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on("close", () => sockets.delete(ws))
      ws.on("message", (data) => {
        const m = JSON.parse(String(data)) as { op: number; d: { token?: string } | null }
        if (m.op === 1) return send(ws, 11, null)
        if (m.op === 2) {
          if (m.d?.token !== token) return ws.close(4004, "Authentication failed.")
          identified++
          sockets.add(ws)
          return send(ws, 0, {
            v: 10, user: { id: DISCORD_BOT_ID, username: "roster", discriminator: "0", bot: true }, guilds: [],
            session_id: `session-${identified}`, resume_gateway_url: `ws://127.0.0.1:${port}/gateway`, shard: [0, 1], application: { id: DISCORD_BOT_ID, flags: 0 }
          }, "READY")
        }
        // A resume is refused (not resumable): the client identifies again, as Discord makes it do.
        if (m.op === 6) return send(ws, 9, false)
      })
      send(ws, 10, { heartbeat_interval: 41_250 })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  port = (server.address() as AddressInfo).port

  return {
    apiUrl: `http://127.0.0.1:${port}/api/`,
    posts,
    marks,
    downloads,
    attachmentUrls,
    callbacks,
    edits,
    press: (p) => {
      const id = nextId()
      const d = {
        id, application_id: "900000000000000009", type: 3, token: `interaction-token-${id}`, version: 1,
        channel_id: p.post.channel, guild_id: "800000000000000001",
        member: { user: { id: p.user, username: `user-${p.user}` } },
        message: { id: p.post.id, channel_id: p.post.channel, content: p.post.content },
        data: { custom_id: p.custom_id, component_type: 2 }
      }
      for (const s of sockets) send(s, 0, d, "INTERACTION_CREATE")
      return id
    },
    identified: () => identified,
    connected: () => sockets.size > 0,
    thread: (parent) => {
      const id = nextId()
      threads.set(id, parent)
      return id
    },
    say: (m) => {
      const id = nextId()
      const content = m.mentionBot === false ? m.text : `<@${DISCORD_BOT_ID}> ${m.text}`
      const d = {
        id, channel_id: m.channel, guild_id: "800000000000000001", type: 0, content, timestamp: new Date().toISOString(),
        author: { id: m.user, username: `user-${m.user}`, discriminator: "0", ...(m.bot ? { bot: true } : {}) },
        mentions: m.mentionBot === false ? [] : [{ id: DISCORD_BOT_ID, username: "roster" }],
        attachments: (m.files ?? []).map((f) => {
          const aid = nextId()
          attachments.set(aid, f.bytes)
          const url = `http://127.0.0.1:${port}/attachments/${m.channel}/${aid}/${encodeURIComponent(f.name)}`
          attachmentUrls.push(url)
          return { id: aid, filename: f.name, content_type: f.type, size: f.bytes.length, url }
        })
      }
      if (!m.bot) said.push({ id, channel: m.channel, user: m.user, content, timestamp: d.timestamp })
      for (const s of sockets) send(s, 0, d, "MESSAGE_CREATE")
      return id
    },
    drop: () => sockets.forEach((s) => s.terminate()),
    close: async () => {
      sockets.forEach((s) => s.terminate())
      wss.close()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}
