import { FileSystem, HttpServerRequest, type HttpServerResponse, Path } from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Cause, Effect, FiberSet, Schema } from "effect"
import * as http from "node:http"
import { packageRoot } from "../image/packageRoot.js"
import { makeSessions, webToken } from "./auth.js"
import { loginPage } from "./layout.js"
import { makeNowHub } from "./nowHub.js"
import { redirectTo, respond, respondHtml } from "./respond.js"
import { makePages, WebCall, type WebEnv } from "./routes.js"
import { makeConversations } from "./talk.js"

export class WebListenError extends Schema.TaggedError<WebListenError>()("WebListenError", { port: Schema.Number, detail: Schema.String }) {
  override get message() {
    return `roster web cannot listen on 127.0.0.1:${this.port} (${this.detail}) — pick a free port: roster web --port 7311`
  }
}

export type { WebEnv }

/** The most a form may be: a task's prompt or a turn of talk, not a file. */
const FORM_MAX = 64 * 1024

const tooLarge = respond(413, "text/plain", `roster web: the request body is over ${FORM_MAX / 1024} KiB\n`, { connection: "close" })

/**
 * A form body, as fields: read to its end, or refused once it passes FORM_MAX (answered 413 and
 * the connection closed), or cut when the client goes away — the handler always ends. Read from
 * Node's request itself: the platform's limited read destroys the socket at the limit, and the
 * client would never see the 413; here the request is paused and the answer still goes out.
 */
const formOf = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.async<URLSearchParams, "too large">((resume) => {
    const req = NodeHttpServerRequest.toIncomingMessage(request)
    let body = ""
    let done = false
    const finish = (e: Effect.Effect<URLSearchParams, "too large">) => {
      if (done) return
      done = true
      resume(e)
    }
    req.setEncoding("utf8")
    req.on("data", (c: string) => {
      body += c
      if (body.length > FORM_MAX) {
        req.pause()
        finish(Effect.fail("too large"))
      }
    })
    req.once("end", () => finish(Effect.succeed(new URLSearchParams(body))))
    req.once("error", () => finish(Effect.succeed(new URLSearchParams())))
    req.once("close", () => finish(Effect.succeed(new URLSearchParams(body))))
  })

/** The shipped assets (web/ in the package), read once. */
const loadAssets = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const dir = path.join(yield* packageRoot, "web")
  const asset = (type: string, name: string) => Effect.map(fs.readFileString(path.join(dir, name)), (body) => ({ type, body }))
  return new Map([
    ["/assets/app.js", yield* asset("text/javascript; charset=utf-8", "app.js")],
    ["/assets/style.css", yield* asset("text/css; charset=utf-8", "style.css")],
    ["/assets/icon.svg", yield* asset("image/svg+xml", "icon.svg")]
  ])
})

/**
 * `roster web`: the browser UI on @effect/platform's HTTP server, on 127.0.0.1 only (a box's
 * network has no route to the host's loopback). A login with the deployment's token makes a
 * session (HttpOnly, SameSite=Strict); every request must name this server as its Host, every
 * state-changing one must come from a page of this server (Origin) and carry the session's CSRF
 * token — the guard below, before any page. Every request and talk session is a fiber of this scope.
 */
export const serveWeb = Effect.fn("web.serve")(function*(options: { readonly port: number }) {
  const runInServer = yield* FiberSet.makeRuntime<WebEnv>()
  const token = yield* webToken
  let bound = options.port
  const sessions = makeSessions(token, () => bound)
  const assets = yield* loadAssets
  const pages = makePages({ hub: yield* makeNowHub, talks: makeConversations(), runInServer: (session) => void runInServer(session) })

  const guard = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    // A name this server is not (a rebinding attacker's) gets nothing, not even the login page.
    if (!sessions.hostOk(request)) return respond(421, "text/plain", "roster web: wrong Host\n")
    const url = new URL(request.url, "http://127.0.0.1")
    // Browsers ask for /favicon.ico whatever the page says: the same icon.
    const asset = assets.get(url.pathname === "/favicon.ico" ? "/assets/icon.svg" : url.pathname)
    if (request.method === "GET" && asset) return respond(200, asset.type, asset.body)
    const post = request.method === "POST"
    if (Number(request.headers["content-length"] ?? 0) > FORM_MAX) return tooLarge
    // State changes only from this server's own pages: a foreign Origin (or none) is refused before anything is read.
    if (post && !sessions.originOk(request)) return respond(403, "text/plain", "roster web: refused (the request did not come from roster's own pages)\n")
    const read = post ? yield* formOf(request).pipe(Effect.either) : null
    if (read?._tag === "Left") return tooLarge
    const form = read?._tag === "Right" ? read.right : null
    if (url.pathname === "/login") {
      const given = form?.get("token") ?? url.searchParams.get("token")
      if (given === null) return respondHtml(200, loginPage(null))
      const s = sessions.login(given)
      if (!s) return respondHtml(401, loginPage("That is not this deployment's token: roster web prints it."))
      return redirectTo("/", { "set-cookie": sessions.cookie(s) })
    }
    const session = sessions.of(request)
    if (!session) {
      return url.pathname === "/events"
        ? respond(401, "text/plain", "roster web: log in first\n")
        : respondHtml(401, loginPage("Log in with the token roster web printed."))
    }
    if (post && !sessions.csrfOk(session, form?.get("csrf") ?? undefined)) return respond(403, "text/plain", "roster web: refused (stale or missing CSRF token: reload the page)\n")
    return yield* pages.pipe(Effect.provideService(WebCall, { session, form, url }))
  })

  const app = guard.pipe(Effect.catchAllCause((cause): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest> =>
    Cause.isInterruptedOnly(cause)
      ? Effect.succeed(respond(499, "text/plain", ""))
      : Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => Effect.logError(`roster web: ${request.method} ${request.url} failed`, cause)).pipe(
        Effect.as(respond(500, "text/plain", "roster web: internal error (see its log)\n"))
      )
  ))

  const server = yield* NodeHttpServer.make(() => http.createServer({ headersTimeout: 15_000, requestTimeout: 60_000 }), { port: options.port, host: "127.0.0.1" }).pipe(
    Effect.mapError((e) => new WebListenError({ port: options.port, detail: errorCode(e.cause) }))
  )
  bound = server.address._tag === "TcpAddress" ? server.address.port : options.port
  yield* server.serve(app)
  return { port: bound, url: `http://127.0.0.1:${bound}/login?token=${token}` }
})

const errorCode = (e: unknown) =>
  typeof e === "object" && e !== null && "code" in e ? String((e as { code: unknown }).code) : e instanceof Error ? e.message : String(e)
