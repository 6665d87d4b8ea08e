import { FileSystem, Path } from "@effect/platform"
import { Cause, Effect, FiberSet, Option, Schema, Stream } from "effect"
import * as http from "node:http"
import { viaDaemon } from "../api/controlClient.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { Paths, layout } from "../config/Paths.js"
import { runFiles } from "../contract/runFiles.js"
import type { Docker } from "../docker/Docker.js"
import { packageRoot } from "../image/packageRoot.js"
import { findRun, pageOfRuns } from "../run/query.js"
import { listWorkers, readIdentity, readWorkerSettings } from "../worker/workers.js"
import { MemoryStore } from "../memory/MemoryStore.js"
import { workerBody, workersBody } from "./workerPage.js"
import { TaskStatus } from "../task/TaskRecord.js"
import { makeSessions, type Session, webToken } from "./auth.js"
import { gatewayBody, gatewayView } from "./gatewayPage.js"
import { type Html, html } from "./html.js"
import { loginPage, page } from "./layout.js"
import { makeNowHub } from "./nowHub.js"
import { nowBody } from "./nowPage.js"
import { RUNS_PER_PAGE, runBody, runsBody } from "./runsPage.js"
import { tasksBody } from "./tasksPage.js"
import { timelineOf } from "./timeline.js"
import { makeConversations } from "./talk.js"
import { talkBody, talkIndex } from "./talkPage.js"
import type { runSession } from "../session/runSession.js"

export class WebListenError extends Schema.TaggedError<WebListenError>()("WebListenError", { port: Schema.Number, detail: Schema.String }) {
  override get message() {
    return `roster web cannot listen on 127.0.0.1:${this.port} (${this.detail}) — pick a free port: roster web --port 7311`
  }
}

/** What a page handler may use: the deployment's files and config, the engine (box stats), and what a session runs on. */
export type WebEnv = Paths | FileSystem.FileSystem | Path.Path | OrgConfig | Docker | MemoryStore | Effect.Effect.Context<ReturnType<typeof runSession>>

/** Every answer: nothing from elsewhere runs, frames or loads; nothing is cached or referred. */
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  // same-origin, not no-referrer: under no-referrer a browser sends a form POST with `Origin: null`, and the Origin check refuses it.
  "referrer-policy": "same-origin",
  "x-frame-options": "DENY",
  "cache-control": "no-store"
}

const send = (res: http.ServerResponse, status: number, type: string, body: string | Buffer, extra: http.OutgoingHttpHeaders = {}) =>
  Effect.sync(() => {
    if (res.headersSent) return void res.end()
    res.writeHead(status, { ...SECURITY_HEADERS, "content-type": type, "content-length": Buffer.byteLength(body), ...extra }).end(body)
  })

const sendHtml = (res: http.ServerResponse, status: number, body: Html, extra: http.OutgoingHttpHeaders = {}) =>
  send(res, status, "text/html; charset=utf-8", body.text, extra)

const redirect = (res: http.ServerResponse, to: string, extra: http.OutgoingHttpHeaders = {}) =>
  Effect.sync(() => res.writeHead(303, { ...SECURITY_HEADERS, location: to, ...extra }).end())

/** The most a form may be: a task's prompt or a turn of talk, not a file. */
const FORM_MAX = 64 * 1024

class BodyTooLarge {
  readonly _tag = "BodyTooLarge"
}

/**
 * A form body, as fields: read to its end, or refused once it passes FORM_MAX (the caller answers
 * 413 and the connection is closed), or cut when the client goes away — the handler always ends.
 */
const formOf = (req: http.IncomingMessage) =>
  Effect.async<URLSearchParams, BodyTooLarge>((resume) => {
    let body = ""
    let done = false
    const finish = (e: Effect.Effect<URLSearchParams, BodyTooLarge>) => {
      if (done) return
      done = true
      resume(e)
    }
    req.setEncoding("utf8")
    req.on("data", (c: string) => {
      body += c
      if (body.length > FORM_MAX) {
        req.pause()
        finish(Effect.fail(new BodyTooLarge()))
      }
    })
    req.once("end", () => finish(Effect.succeed(new URLSearchParams(body))))
    req.once("error", () => finish(Effect.succeed(new URLSearchParams())))
    req.once("close", () => finish(Effect.succeed(new URLSearchParams(body))))
  })

/** A request whose declared body is already over the limit: refused before a byte of it is read. */
const declaredTooLarge = (req: http.IncomingMessage) => Number(req.headers["content-length"] ?? 0) > FORM_MAX

const tooLarge = (res: http.ServerResponse) =>
  send(res, 413, "text/plain", `roster web: the request body is over ${FORM_MAX / 1024} KiB\n`, { connection: "close" })

/** A file sent as it is read, at the pace the client takes it (a transcript may be hundreds of MB). */
const streamFile = (res: http.ServerResponse, file: string, headers: http.OutgoingHttpHeaders) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const size = yield* fs.stat(file).pipe(Effect.map((i) => Number(i.size)), Effect.orElseSucceed(() => 0))
    res.writeHead(200, { ...SECURITY_HEADERS, ...headers, "content-length": size })
    if (size === 0) return void res.end()
    yield* fs.stream(file, { bytesToRead: size }).pipe(
      Stream.runForEach((chunk) =>
        res.write(chunk) ? Effect.void : Effect.async<void>((resume) => {
          const go = () => {
            res.off("close", go)
            res.off("drain", go)
            resume(Effect.void)
          }
          res.once("drain", go)
          res.once("close", go)
        })
      ),
      Effect.catchAll(() => Effect.sync(() => res.destroy()))
    )
    res.end()
  })

/** The shipped assets (web/ in the package), read once. */
const loadAssets = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const dir = path.join(yield* packageRoot, "web")
  return {
    "/assets/app.js": { type: "text/javascript; charset=utf-8", body: yield* fs.readFileString(path.join(dir, "app.js")) },
    "/assets/style.css": { type: "text/css; charset=utf-8", body: yield* fs.readFileString(path.join(dir, "style.css")) },
    "/assets/icon.svg": { type: "image/svg+xml", body: yield* fs.readFileString(path.join(dir, "icon.svg")) }
  } as Record<string, { readonly type: string; readonly body: string }>
})

/**
 * `roster web`: the browser UI, on 127.0.0.1 only (a box's network has no route to the host's
 * loopback). A login with the deployment's token makes a session (HttpOnly, SameSite=Strict);
 * every request must name this server as its Host, every state-changing one must come from a
 * page of this server (Origin) and carry the session's CSRF token. Every page and request is a
 * fiber of this scope.
 */
export const serveWeb = Effect.fn("web.serve")(function*(options: { readonly port: number }) {
  const run = yield* FiberSet.makeRuntime<WebEnv>()
  const token = yield* webToken
  let bound = options.port
  const sessions = makeSessions(token, () => bound)
  const assets = yield* loadAssets
  const hub = yield* makeNowHub
  const talks = makeConversations()

  const pageFor = (res: http.ServerResponse, s: Session, title: string, current: string, body: Html, status = 200) =>
    sendHtml(res, status, page(title, current, body, s.csrf))

  const routes = (req: http.IncomingMessage, res: http.ServerResponse, url: URL, s: Session, form: URLSearchParams | null) =>
    Effect.gen(function*() {
      const p = url.pathname
      if (req.method === "GET" && p === "/") return yield* pageFor(res, s, "Now", "/", nowBody(yield* hub.current))
      if (req.method === "GET" && p === "/events") return yield* hub.subscribe(res, SECURITY_HEADERS)
      if (req.method === "GET" && p === "/runs") {
        const n = Math.max(1, Number(url.searchParams.get("page")) || 1)
        const { runs, total } = yield* pageOfRuns((n - 1) * RUNS_PER_PAGE, RUNS_PER_PAGE)
        return yield* pageFor(res, s, "Runs", "/runs", runsBody(runs, n, total))
      }
      const runMatch = /^\/runs\/([0-9a-f-]+)(\/transcript)?$/.exec(p)
      if (req.method === "GET" && runMatch) {
        const r = yield* findRun(runMatch[1] ?? "")
        if (!r) return yield* pageFor(res, s, "No such run", "/runs", html`<p>No run ${runMatch[1]}. <a href="/runs">All runs</a></p>`, 404)
        const dir = layout(yield* Paths).runDir(r.worker, r.run_id)
        if (runMatch[2]) {
          return yield* streamFile(res, runFiles(dir).transcript, {
            "content-type": "application/x-ndjson",
            "content-disposition": `attachment; filename="${r.run_id}.jsonl"`
          })
        }
        const t = yield* timelineOf(r, dir)
        return yield* pageFor(res, s, `Run ${r.run_id}`, "/runs", runBody(r, t.entries, t.more))
      }
      if (req.method === "GET" && p === "/workers") return yield* pageFor(res, s, "Workers", "/workers", workersBody(yield* listWorkers))
      const workerMatch = /^\/workers\/([a-z][a-z0-9-]{0,31})$/.exec(p)
      if (req.method === "GET" && workerMatch) return yield* workerPage(res, s, workerMatch[1] ?? "")
      if (p === "/tasks" && req.method === "GET") return yield* tasksPage(res, s, url, null)
      if (p === "/tasks" && req.method === "POST" && form) return yield* addTask(res, s, url, form)
      const cancelMatch = /^\/tasks\/(t-[0-9a-f]{8})\/cancel$/.exec(p)
      if (cancelMatch && req.method === "POST") {
        const done = yield* viaDaemon((c) => c.tasks.cancel({ path: { id: cancelMatch[1] ?? "" } })).pipe(Effect.either)
        const note = done._tag === "Left" ? `not cancelled: ${errorText(done.left)}` : Option.isNone(done.right) ? "the roster server is not running" : `task ${cancelMatch[1]} cancelled`
        return yield* tasksPage(res, s, url, note)
      }
      if (p.startsWith("/talk")) return yield* talkRoutes(req, res, p, s, form)
      if (req.method === "GET" && p === "/gateway") {
        const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.orElseSucceed(() => null))
        return yield* pageFor(res, s, "Gateway", "/gateway", gatewayBody(yield* gatewayView, org))
      }
      return yield* pageFor(res, s, "Not found", "", html`<p>There is no page ${p}.</p>`, 404)
    })

  const talkRoutes = (req: http.IncomingMessage, res: http.ServerResponse, p: string, s: Session, form: URLSearchParams | null) =>
    Effect.gen(function*() {
      const done = () => (req.headers["x-requested-with"] === "fetch" ? send(res, 204, "text/plain", "") : redirect(res, p.replace(/\/(say|abort|end)$/, "")))
      if (p === "/talk" && req.method === "GET") return yield* pageFor(res, s, "Talk", "/talk", talkIndex(yield* listWorkers, talks.list(), s.csrf))
      if (p === "/talk" && req.method === "POST" && form) {
        const worker = form.get("worker") ?? ""
        if (!(yield* listWorkers).includes(worker)) return yield* pageFor(res, s, "Talk", "/talk", html`<p class="error">There is no worker ${worker}.</p>`, 400)
        const started = yield* talks.start(worker)
        run(started.session)
        return yield* redirect(res, `/talk/${started.c.id}`)
      }
      const m = /^\/talk\/([0-9a-f]{16})(\/events|\/say|\/abort|\/end)?$/.exec(p)
      const c = m ? talks.get(m[1] ?? "") : undefined
      if (!m || !c) return yield* pageFor(res, s, "No such conversation", "/talk", html`<p>No such conversation. <a href="/talk">Talk</a></p>`, 404)
      const action = m[2] ?? ""
      if (req.method === "GET" && action === "") return yield* pageFor(res, s, `Talk with ${c.worker}`, "/talk", talkBody(c, s.csrf))
      if (req.method === "GET" && action === "/events") return yield* talks.watch(c, res, SECURITY_HEADERS)
      if (req.method === "POST" && action === "/say" && form) {
        const text = (form.get("text") ?? "").trim()
        if (text !== "") yield* talks.say(c, text, "you")
        return yield* done()
      }
      if (req.method === "POST" && action === "/abort") return yield* talks.abort(c).pipe(Effect.zipRight(done()))
      if (req.method === "POST" && action === "/end") return yield* talks.end(c).pipe(Effect.zipRight(done()))
      return yield* send(res, 405, "text/plain", "roster web: not here\n")
    })

  const workerPage = (res: http.ServerResponse, s: Session, name: string) =>
    Effect.gen(function*() {
      if (!(yield* listWorkers).includes(name)) return yield* pageFor(res, s, "No such worker", "/workers", html`<p>There is no worker ${name}. <a href="/workers">Workers</a></p>`, 404)
      const identity = yield* readIdentity(name).pipe(Effect.orElseSucceed(() => ""))
      const settings = yield* readWorkerSettings(name).pipe(Effect.option)
      const memory = yield* (yield* MemoryStore).list(name).pipe(Effect.orElseSucceed(() => []))
      const { runs } = yield* pageOfRuns(0, 20, Option.some(name))
      const model = settings._tag === "Some" ? settings.value.model ?? null : null
      return yield* pageFor(res, s, `Worker ${name}`, "/workers", workerBody({ name, identity, model }, memory, runs))
    })

  const tasksPage = (res: http.ServerResponse, s: Session, url: URL, note: string | null) =>
    Effect.gen(function*() {
      const filter = { worker: url.searchParams.get("worker") ?? "", status: url.searchParams.get("status") ?? "" }
      const listed = yield* viaDaemon((c) =>
        c.tasks.list({ urlParams: { ...(filter.worker ? { worker: filter.worker } : {}), ...(isStatus(filter.status) ? { status: filter.status } : {}) } })
      ).pipe(Effect.orElseSucceed(() => Option.none()))
      return yield* pageFor(res, s, "Tasks", "/tasks", tasksBody(Option.getOrNull(listed), yield* listWorkers, filter, s.csrf, note))
    })

  const addTask = (res: http.ServerResponse, s: Session, url: URL, form: URLSearchParams) =>
    Effect.gen(function*() {
      const ceiling = Number(form.get("ceiling"))
      const payload = {
        worker: form.get("worker") ?? "",
        prompt: form.get("prompt") ?? "",
        ...(form.get("ceiling") && Number.isFinite(ceiling) ? { ceiling_min: ceiling } : {}),
        via: "web" as const
      }
      const added = yield* viaDaemon((c) => c.tasks.add({ payload })).pipe(Effect.either)
      const note = added._tag === "Left"
        ? `not queued: ${errorText(added.left)}`
        : Option.isNone(added.right) ? "the roster server is not running: start it (roster server start)" : `task ${added.right.value.task_id} queued`
      return yield* tasksPage(res, s, url, note)
    })

  const handle = (req: http.IncomingMessage, res: http.ServerResponse) =>
    Effect.gen(function*() {
      // A name this server is not (a rebinding attacker's) gets nothing, not even the login page.
      if (!sessions.hostOk(req)) return yield* send(res, 421, "text/plain", "roster web: wrong Host\n")
      const url = new URL(req.url ?? "/", "http://127.0.0.1")
      // Browsers ask for /favicon.ico whatever the page says: the same icon.
      const asset = assets[url.pathname === "/favicon.ico" ? "/assets/icon.svg" : url.pathname]
      if (req.method === "GET" && asset) return yield* send(res, 200, asset.type, asset.body)
      const post = req.method === "POST"
      if (declaredTooLarge(req)) return yield* tooLarge(res)
      // State changes only from this server's own pages: a foreign Origin (or none) is refused before anything is read.
      if (post && !sessions.originOk(req)) return yield* send(res, 403, "text/plain", "roster web: refused (the request did not come from roster's own pages)\n")
      const read = post ? yield* formOf(req).pipe(Effect.either) : null
      if (read?._tag === "Left") return yield* tooLarge(res)
      const form = read?._tag === "Right" ? read.right : null
      if (url.pathname === "/login") {
        const given = form?.get("token") ?? url.searchParams.get("token")
        if (given === null) return yield* sendHtml(res, 200, loginPage(null))
        const s = sessions.login(given)
        if (!s) return yield* sendHtml(res, 401, loginPage("That is not this deployment's token: roster web prints it."))
        return yield* redirect(res, "/", { "set-cookie": sessions.cookie(s) })
      }
      const s = sessions.of(req)
      if (!s) {
        return url.pathname === "/events"
          ? yield* send(res, 401, "text/plain", "roster web: log in first\n")
          : yield* sendHtml(res, 401, loginPage("Log in with the token roster web printed."))
      }
      if (post && !sessions.csrfOk(s, form?.get("csrf") ?? undefined)) return yield* send(res, 403, "text/plain", "roster web: refused (stale or missing CSRF token: reload the page)\n")
      return yield* routes(req, res, url, s, form)
    }).pipe(Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError(`roster web: ${req.method} ${req.url} failed`, cause).pipe(
        Effect.zipRight(send(res, 500, "text/plain", "roster web: internal error (see its log)\n"))
      )
    ))

  const server = http.createServer({ headersTimeout: 15_000, requestTimeout: 60_000 }, (req, res) => void run(handle(req, res)))
  yield* Effect.addFinalizer(() => Effect.sync(() => {
    server.closeAllConnections()
    server.close()
  }))
  bound = yield* Effect.async<number, WebListenError>((resume) => {
    server.once("error", (e: NodeJS.ErrnoException) => resume(Effect.fail(new WebListenError({ port: options.port, detail: e.code ?? e.message }))))
    server.listen(options.port, "127.0.0.1", () => {
      const a = server.address()
      resume(Effect.succeed(typeof a === "object" && a ? a.port : options.port))
    })
  })
  return { port: bound, url: `http://127.0.0.1:${bound}/login?token=${token}` }
})

const isStatus = Schema.is(TaskStatus)

const errorText = (e: unknown) =>
  typeof e === "object" && e !== null && "message" in e ? String((e as { message: unknown }).message) : String(e)
