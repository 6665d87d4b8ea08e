import { FileSystem } from "@effect/platform"
import { Effect } from "effect"
import * as crypto from "node:crypto"
import { Paths, layout } from "../config/Paths.js"
import { writeAtomic } from "../fs/atomic.js"

/** The deployment's web login token (state/web-token, 0600): made once, read by `roster web` to print the URL. */
export const webToken = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const file = layout(yield* Paths).webToken
  // A token file that cannot be read (or holds no token) is made again: the old link stops working, and roster web prints the new one.
  const known = (yield* fs.readFileString(file).pipe(Effect.orElseSucceed(() => ""))).trim()
  if (/^[0-9a-f]{64}$/.test(known)) return known
  const token = crypto.randomBytes(32).toString("hex")
  yield* writeAtomic(file, `${token}\n`, 0o600)
  return token
})

const sameSecret = (a: string, b: string) => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && crypto.timingSafeEqual(x, y)
}

export interface Session {
  readonly id: string
  /** Sent back with every state-changing request (a form field or header): a page of another origin cannot know it. */
  readonly csrf: string
}

const COOKIE = "roster_session"

/** What the checks read of a request: its headers, names lower-case. */
export interface WithHeaders {
  readonly headers: Readonly<Record<string, string | undefined>>
}

/**
 * Sessions of the web UI, in memory (a restart logs everyone out): made by a login with the
 * token, carried by an HttpOnly SameSite=Strict cookie. Every request is checked for a Host
 * this server answers as (no DNS rebinding), every state-changing one for its own Origin
 * and the session's CSRF token.
 */
export const makeSessions = (token: string, port: () => number) => {
  const sessions = new Map<string, Session>()
  const hosts = () => new Set([`127.0.0.1:${port()}`, `localhost:${port()}`])
  return {
    login: (given: string): Session | undefined => {
      if (!sameSecret(given.trim(), token)) return undefined
      const s = { id: crypto.randomBytes(32).toString("hex"), csrf: crypto.randomBytes(24).toString("hex") }
      sessions.set(s.id, s)
      return s
    },
    cookie: (s: Session) => `${COOKIE}=${s.id}; HttpOnly; SameSite=Strict; Path=/`,
    of: (req: WithHeaders): Session | undefined => {
      const raw = String(req.headers.cookie ?? "").split(/;\s*/).find((c) => c.startsWith(`${COOKIE}=`))
      return raw ? sessions.get(raw.slice(COOKIE.length + 1)) : undefined
    },
    hostOk: (req: WithHeaders) => hosts().has(String(req.headers.host ?? "")),
    /** A state-changing request from a page of this server: its Origin ours, and (with a session) its CSRF token. */
    originOk: (req: WithHeaders) => {
      const origin = req.headers.origin
      return typeof origin === "string" && [...hosts()].some((h) => origin === `http://${h}`)
    },
    csrfOk: (s: Session, given: string | undefined) => given !== undefined && sameSecret(given, s.csrf)
  }
}
export type Sessions = ReturnType<typeof makeSessions>
