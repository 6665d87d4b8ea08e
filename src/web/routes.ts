import { type FileSystem, HttpRouter, HttpServerRequest, type HttpServerResponse, type Path } from "@effect/platform"
import { Context, Effect, Option, Schema } from "effect"
import { ceilingProblem } from "../config/ceiling.js"
import { viaDaemon } from "../api/controlClient.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { Paths, layout } from "../config/Paths.js"
import { ApprovalDecision } from "../contract/approval.js"
import { runFiles } from "../contract/runFiles.js"
import type { BoxBackend } from "../backend/BoxBackend.js"
import { MemoryStore } from "../memory/MemoryStore.js"
import type { Runner } from "../runner/Runner.js"
import { findRun, pageOfRuns } from "../run/query.js"
import { TaskStatus } from "../task/TaskRecord.js"
import { listWorkers, readIdentity, readWorkerSettings } from "../worker/workers.js"
import type { Session } from "./auth.js"
import { gatewayBody, gatewayView } from "./gatewayPage.js"
import { isWorkerName } from "../config/names.js"
import { workerSubject } from "../contract/scope.js"
import { checkPolicy } from "../gateway/policy/policyCheck.js"
import { type Html, html } from "./html.js"
import { page } from "./layout.js"
import type { makeNowHub } from "./nowHub.js"
import { nowBody } from "./nowPage.js"
import { fileDownload, redirectTo, respond, respondHtml } from "./respond.js"
import { RUNS_PER_PAGE, runBody, runsBody } from "./runsPage.js"
import type { Conversations } from "./talk.js"
import { talkBody, talkIndex } from "./talkPage.js"
import { tasksBody } from "./tasksPage.js"
import { timelineOf } from "./timeline.js"
import { workerBody, workersBody } from "./workerPage.js"

/** What a page handler may use: the deployment's files and config, the engine (box stats), and what a session runs on. */
export type WebEnv = Paths | FileSystem.FileSystem | Path.Path | OrgConfig | BoxBackend | MemoryStore | Runner

/** The request a page answers, once the guard let it through: its session, its form (a POST's), its URL. */
export class WebCall extends Context.Tag("roster/web/WebCall")<WebCall, {
  readonly session: Session
  readonly form: URLSearchParams | null
  readonly url: URL
}>() {}

/** What the pages share with the server: the Now page's hub, the Talk page's conversations, and where a session runs. */
export interface PageDeps {
  readonly hub: Effect.Effect.Success<typeof makeNowHub>
  readonly talks: Conversations
  readonly runInServer: <A, E>(session: Effect.Effect<A, E, WebEnv>) => void
}

const pageFor = (title: string, current: string, body: Html, status = 200) =>
  Effect.map(WebCall, ({ session }) => respondHtml(status, page(title, current, body, session.csrf)))

const notFound = (title: string, current: string, body: Html) => pageFor(title, current, body, 404)

/** A path parameter that is what `pattern` says, or none (a page answers 404 for anything else). */
const param = (name: string, pattern: RegExp) =>
  Effect.map(HttpRouter.params, (p) => {
    const value = p[name] ?? ""
    return pattern.test(value) ? Option.some(value) : Option.none()
  })

const isStatus = Schema.is(TaskStatus)

const errorText = (e: unknown) =>
  typeof e === "object" && e !== null && "message" in e ? String((e as { message: unknown }).message) : String(e)

const runPage = (transcript: boolean) =>
  Effect.gen(function*() {
    const id = yield* param("id", /^[0-9a-f-]+$/)
    const r = Option.isSome(id) ? yield* findRun(id.value) : undefined
    if (!r) return yield* notFound("No such run", "/runs", html`<p>No run ${Option.getOrElse(id, () => "")}. <a href="/runs">All runs</a></p>`)
    const dir = layout(yield* Paths).runDir(r.worker, r.run_id)
    if (transcript) return yield* fileDownload(runFiles(dir).transcript, "application/x-ndjson", { "content-disposition": `attachment; filename="${r.run_id}.jsonl"` })
    const t = yield* timelineOf(r, dir)
    return yield* pageFor(`Run ${r.run_id}`, "/runs", runBody(r, t.entries, t.more))
  })

const workerPage = Effect.gen(function*() {
  const name = Option.getOrElse(yield* param("name", /^[a-z][a-z0-9-]{0,31}$/), () => "")
  if (!(yield* listWorkers).includes(name)) return yield* notFound("No such worker", "/workers", html`<p>There is no worker ${name}. <a href="/workers">Workers</a></p>`)
  // The page shows what it can: what could not be read is said where it would be.
  const identity = yield* readIdentity(name).pipe(Effect.catchAll((e) => Effect.succeed(`(identity.md could not be read: ${e.message})`)))
  const settings = yield* readWorkerSettings(name).pipe(Effect.option)
  const memory = yield* (yield* MemoryStore).list(name).pipe(
    Effect.catchAll((e) => Effect.logWarning(`web: ${name}'s memory could not be read for the worker page (${e.message})`).pipe(Effect.as([])))
  )
  const { runs } = yield* pageOfRuns(0, 20, Option.some(name))
  const model = settings._tag === "Some" ? settings.value.model ?? null : null
  return yield* pageFor(`Worker ${name}`, "/workers", workerBody({ name, identity, model }, memory, runs))
})

const tasksPage = (note: string | null) =>
  Effect.gen(function*() {
    const { session, url } = yield* WebCall
    const filter = { worker: url.searchParams.get("worker") ?? "", status: url.searchParams.get("status") ?? "" }
    const listed = yield* viaDaemon((c) =>
      c.tasks.list({ urlParams: { ...(filter.worker ? { worker: filter.worker } : {}), ...(isStatus(filter.status) ? { status: filter.status } : {}) } })
      // No daemon to ask (or it did not answer): the page says the server is not running, with the command (tasksBody).
    ).pipe(Effect.orElseSucceed(() => Option.none()))
    return yield* pageFor("Tasks", "/tasks", tasksBody(Option.getOrNull(listed), yield* listWorkers, filter, session.csrf, note))
  })

const addTask = Effect.gen(function*() {
  const form = (yield* WebCall).form ?? new URLSearchParams()
  const given = (form.get("ceiling") ?? "").trim()
  // The one rule every surface uses: a ceiling the CLI would refuse is refused here too, never dropped.
  const bad = given === "" ? undefined : ceilingProblem(Number(given))
  if (bad) return yield* tasksPage(`not queued: ${bad}`)
  const payload = {
    worker: form.get("worker") ?? "",
    prompt: form.get("prompt") ?? "",
    ...(given !== "" ? { ceiling_min: Number(given) } : {}),
    via: "web" as const
  }
  const added = yield* viaDaemon((c) => c.tasks.add({ payload })).pipe(Effect.either)
  const note = added._tag === "Left"
    ? `not queued: ${errorText(added.left)}`
    : Option.isNone(added.right) ? "the roster server is not running: start it (roster server start)" : `task ${added.right.value.task_id} queued`
  return yield* tasksPage(note)
})

const cancelTask = Effect.gen(function*() {
  const id = yield* param("id", /^t-[0-9a-f]{8}$/)
  if (Option.isNone(id)) return yield* notFound("Not found", "", html`<p>There is no such task.</p>`)
  const done = yield* viaDaemon((c) => c.tasks.cancel({ path: { id: id.value } })).pipe(Effect.either)
  const note = done._tag === "Left" ? `not cancelled: ${errorText(done.left)}` : Option.isNone(done.right) ? "the roster server is not running" : `task ${id.value} cancelled`
  return yield* tasksPage(note)
})

const gatewayPage = (note: string | null) =>
  Effect.gen(function*() {
    // An org.toml that does not decode is said on the page itself (its rules section), not as a failed page.
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.orElseSucceed(() => null))
    // No daemon to ask: nothing is held (held requests live in its gateway), which the page says.
    const pending = yield* viaDaemon((c) => c.approvals.list()).pipe(Effect.orElseSucceed(() => Option.none()))
    const check = yield* checkOf((yield* WebCall).url.searchParams)
    return yield* pageFor("Gateway", "/gateway", gatewayBody(yield* gatewayView, org, Option.getOrNull(pending), (yield* WebCall).session.csrf, note, check))
  })

/** The page's "Check a request" form, answered by roster policy check's own function (the gateway's decision). */
const checkOf = (q: URLSearchParams) =>
  Effect.gen(function*() {
    const url = q.get("check_url")
    if (url === null) return null
    const view = { worker: q.get("check_worker") ?? "", method: (q.get("check_method") ?? "GET").trim() || "GET", url, headers: q.get("check_headers") ?? "", body: q.get("check_body") ?? "" }
    if (!isWorkerName(view.worker)) return { ...view, answer: { error: `"${view.worker}" is not a worker's name` } }
    const policy = yield* (yield* OrgConfig).policy.pipe(Effect.either)
    if (policy._tag === "Left") return { ...view, answer: { error: `org.toml does not decode: ${policy.left.message}` } }
    const answer = checkPolicy(policy.right, workerSubject(view.worker), url, {
      method: view.method, headers: view.headers.split(/\r?\n/).filter((l) => l.trim() !== ""), ...(view.body !== "" ? { body: Buffer.from(view.body) } : {})
    })
    return { ...view, answer }
  })

/** A person's decision on a held request, from the Gateway page's buttons (the guard checked its CSRF token). */
const decideApproval = Effect.gen(function*() {
  const id = yield* param("id", /^ap-[0-9a-f]{8}$/)
  if (Option.isNone(id)) return yield* notFound("Not found", "", html`<p>There is no such request.</p>`)
  const decision = (yield* WebCall).form?.get("decision") ?? ""
  if (!isDecision(decision)) return yield* gatewayPage(`unknown decision "${decision}"`)
  const done = yield* viaDaemon((c) => c.approvals.decide({ path: { id: id.value }, payload: { decision, by: "a person at roster web" } })).pipe(Effect.either)
  const note = done._tag === "Left"
    ? `not decided: ${errorText(done.left)}`
    : Option.isNone(done.right)
    ? "the roster server is not running"
    : `${decision === "deny" ? "denied" : `approved (${decision})`}: ${done.right.value.approval.method} ${done.right.value.approval.host}:${done.right.value.approval.port}`
  return yield* gatewayPage(note)
})
const isDecision = Schema.is(ApprovalDecision)

/** The Talk pages: conversations started, watched, spoken to, aborted and ended. */
const talkRoutes = ({ runInServer, talks }: PageDeps) => {
  const conversation = Effect.map(param("id", /^[0-9a-f]{16}$/), (id) => Option.flatMap(id, (i) => Option.fromNullable(talks.get(i))))
  const noSuch = notFound("No such conversation", "/talk", html`<p>No such conversation. <a href="/talk">Talk</a></p>`)
  // A fetch from the page wants no page back; a plain form post goes back to the conversation.
  const done = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const { url } = yield* WebCall
    return request.headers["x-requested-with"] === "fetch" ? respond(204, "text/plain", "") : redirectTo(url.pathname.replace(/\/(say|abort|end)$/, ""))
  })
  const withConversation = <E, R>(f: (c: NonNullable<ReturnType<Conversations["get"]>>) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    Effect.flatMap(conversation, (c): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | WebCall> => (Option.isSome(c) ? f(c.value) : noSuch))
  return HttpRouter.empty.pipe(
    HttpRouter.get("/talk", Effect.gen(function*() {
      return yield* pageFor("Talk", "/talk", talkIndex(yield* listWorkers, talks.list(), (yield* WebCall).session.csrf))
    })),
    HttpRouter.post("/talk", Effect.gen(function*() {
      const worker = (yield* WebCall).form?.get("worker") ?? ""
      if (!(yield* listWorkers).includes(worker)) return yield* pageFor("Talk", "/talk", html`<p class="error">There is no worker ${worker}.</p>`, 400)
      const started = yield* talks.start(worker)
      runInServer(started.session)
      return redirectTo(`/talk/${started.c.id}`)
    })),
    HttpRouter.get("/talk/:id", withConversation((c) => Effect.flatMap(WebCall, ({ session }) => pageFor(`Talk with ${c.worker}`, "/talk", talkBody(c, session.csrf))))),
    HttpRouter.get("/talk/:id/events", withConversation((c) => Effect.succeed(talks.watch(c)))),
    HttpRouter.post("/talk/:id/say", withConversation((c) =>
      Effect.gen(function*() {
        const text = ((yield* WebCall).form?.get("text") ?? "").trim()
        if (text !== "") yield* talks.say(c, text, "you")
        return yield* done
      }))),
    HttpRouter.post("/talk/:id/abort", withConversation((c) => talks.abort(c).pipe(Effect.zipRight(done)))),
    HttpRouter.post("/talk/:id/end", withConversation((c) => talks.end(c).pipe(Effect.zipRight(done)))),
    HttpRouter.all("/talk/:id/:action", withConversation(() => Effect.succeed(respond(405, "text/plain", "roster web: not here\n"))))
  )
}

/** Every page of roster web, behind the guard in server.ts (Host, Origin, login, CSRF). */
export const makePages = (deps: PageDeps) =>
  HttpRouter.empty.pipe(
    HttpRouter.get("/", Effect.gen(function*() {
      return yield* pageFor("Now", "/", nowBody(yield* deps.hub.current))
    })),
    HttpRouter.get("/events", deps.hub.subscribe),
    HttpRouter.get("/runs", Effect.gen(function*() {
      const n = Math.max(1, Number((yield* WebCall).url.searchParams.get("page")) || 1)
      const { runs, total } = yield* pageOfRuns((n - 1) * RUNS_PER_PAGE, RUNS_PER_PAGE)
      return yield* pageFor("Runs", "/runs", runsBody(runs, n, total))
    })),
    HttpRouter.get("/runs/:id", runPage(false)),
    HttpRouter.get("/runs/:id/transcript", runPage(true)),
    HttpRouter.get("/workers", Effect.gen(function*() {
      return yield* pageFor("Workers", "/workers", workersBody(yield* listWorkers))
    })),
    HttpRouter.get("/workers/:name", workerPage),
    HttpRouter.get("/tasks", tasksPage(null)),
    HttpRouter.post("/tasks", addTask),
    HttpRouter.post("/tasks/:id/cancel", cancelTask),
    HttpRouter.concat(talkRoutes(deps)),
    HttpRouter.get("/gateway", gatewayPage(null)),
    HttpRouter.post("/gateway/approvals/:id", decideApproval),
    // Anything else is a page that is not there.
    Effect.catchTag("RouteNotFound", () =>
      Effect.flatMap(WebCall, ({ url }) => notFound("Not found", "", html`<p>There is no page ${url.pathname}.</p>`)))
  )
