import { Path } from "@effect/platform"
import { Clock, Effect } from "effect"
import { Paths, layout } from "../config/Paths.js"
import type { Org } from "../config/schema.js"
import type { RequestRule } from "../config/requestRule.js"
import { foldFileLines } from "../fs/lines.js"
import { cut, html } from "./html.js"
import { readAuditLine } from "../contract/auditLine.js"
import { decisionsFor, type PendingApproval } from "../contract/approval.js"
import type { PolicyAnswer } from "../gateway/policy/policyCheck.js"
import { readOr } from "../fs/notFound.js"

const HOURS = 24
const REFUSALS_SHOWN = 50

interface Refused {
  readonly time: string
  readonly run: string
  readonly subject: string
  readonly target: string
  readonly status: number
  readonly note: string
  /** The refusal's code (request_rule, ambiguous, no_rule, …), where the line has one. */
  readonly why: string
}

export interface GatewayView {
  /** Requests per host in each of the last 24 hours (oldest first). */
  readonly perHost: ReadonlyMap<string, ReadonlyArray<number>>
  readonly refusals: ReadonlyArray<Refused>
}

/** The last day of the audit log, read line by line: requests per host per hour, and the latest refusals. */
export const gatewayView = Effect.gen(function*() {
  const path = yield* Path.Path
  const dir = layout(yield* Paths).auditDir
  const now = yield* Clock.currentTimeMillis
  const since = now - HOURS * 3_600_000
  const days = new Set([new Date(since).toISOString().slice(0, 10), new Date(now).toISOString().slice(0, 10)])
  const perHost = new Map<string, Array<number>>()
  const refusals: Array<Refused> = []
  for (const day of [...days].sort()) {
    yield* foldFileLines(path.join(dir, `${day}.jsonl`), 0, (n, line) => {
      const r = readAuditLine(line)
      if (!r) return n
      const at = Date.parse(r.time)
      if (!(at >= since)) return n
      const host = r.host
      const bucket = perHost.get(host) ?? Array.from({ length: HOURS }, () => 0)
      bucket[Math.min(HOURS - 1, Math.floor((at - since) / 3_600_000))]! += 1
      perHost.set(host, bucket)
      const status = r.status
      if (status >= 400 && status < 500) {
        refusals.push({
          time: r.time, run: r.run_id ?? "—", subject: r.subject,
          target: `${r.method} ${host}:${r.port}${r.path}`, status, note: r.note ?? "", why: r.why ?? ""
        })
        if (refusals.length > REFUSALS_SHOWN) refusals.shift()
      }
      return n + 1
      // The page shows the days it could read; one it could not is said in the log (readOr), not as a failed page.
    }).pipe(readOr(path.join(dir, `${day}.jsonl`), 0, "web: "))
  }
  return { perHost, refusals: refusals.reverse() } satisfies GatewayView
})

/** A small bar chart of one host's day, drawn server-side (no script, no style: the CSP allows neither inline). */
const chart = (host: string, counts: ReadonlyArray<number>) => {
  const max = Math.max(1, ...counts)
  const total = counts.reduce((a, b) => a + b, 0)
  return html`<svg class="chart" viewBox="0 0 ${HOURS * 6} 30" width="${HOURS * 6}" height="30" role="img" aria-label="${host}: ${total} requests in the last 24 hours, by hour">${
    counts.map((c, i) => html`<rect x="${i * 6}" y="${30 - Math.round((c / max) * 30)}" width="5" height="${Math.round((c / max) * 30)}" fill="currentColor"><title>${c}</title></rect>`)
  }</svg>`
}

const scopes = (s: ReadonlyArray<string>) => s.join(", ")

/** One rule as a line: its action, methods, paths, and what of the request it reads (the operation, the call, an upgrade). */
const ruleLine = (r: RequestRule) =>
  [
    r.action,
    r.websocket ? "WebSocket upgrade on" : (r.methods ?? ["any method"]).join(", "),
    (r.paths ?? ["any path"]).join(", "),
    ...(r.case === "insensitive" ? ["(in any case)"] : []),
    ...(r.graphql ? [`GraphQL ${(r.operations ?? ["any operation"]).join(", ")}`] : []),
    ...(r.jsonrpc ? [`JSON-RPC ${(r.calls ?? ["any call"]).join(", ")}`] : [])
  ].join(" ")

/** An entry's request rules in order, then what decides the rest: every request, when it has none. */
const requestRules = (g: { readonly rules?: ReadonlyArray<RequestRule> | undefined; readonly default?: RequestRule["action"] | undefined }) => {
  const rules = g.rules ?? []
  const rest = g.default ?? (rules.length === 0 ? "allow" : "deny")
  if (rules.length === 0 && rest === "allow") return "every request"
  return html`<ol>${rules.map((r) => html`<li>${ruleLine(r)}</li>`)}</ol>the rest: ${rest}`
}
const ports = (p: ReadonlyArray<number> | undefined) => (p && p.length > 0 ? p.join(", ") : "443")

/** One held request's buttons: each a CSRF-checked form of its own. */
const decisions = (a: PendingApproval, csrf: string) =>
  decisionsFor(a).map((d) =>
    html`<form method="post" action="/gateway/approvals/${a.id}" class="inline"><input type="hidden" name="csrf" value="${csrf}"><input type="hidden" name="decision" value="${d}"><button type="submit">${
      d === "deny" ? "Deny" : d === "once" ? "Approve once" : d === "run" ? "Approve for the run" : "Approve always"
    }</button></form>`)

/** Requests held for a decision ([gateway] approvals = "ask"); null when the daemon does not answer. */
const pendingSection = (pending: ReadonlyArray<PendingApproval> | null, csrf: string, note: string | null) =>
  html`<h2>Waiting for a decision</h2>
${note ? html`<p class="note" role="status">${note}</p>` : ""}
${pending === null ? html`<p>The roster server is not running: nothing is held.</p>` : pending.length === 0 ? html`<p>No request is waiting.</p>` : html`<table>
<thead><tr><th scope="col">Run</th><th scope="col">Worker</th><th scope="col">Request</th><th scope="col">Waits until</th><th scope="col">Decide</th></tr></thead>
<tbody>${pending.map((a) => html`<tr><td><a href="/runs/${a.run_id}">${a.run_id}</a>${a.node ? html` on ${a.node}` : ""}</td><td>${a.worker}</td><td><code>${a.method} ${a.host}:${a.port}${a.path ?? ""}</code>${a.rule ? html`<br>asked by ${a.rule}` : ""}</td><td>${a.expires_at}</td><td>${decisions(a, csrf)}</td></tr>`)}</tbody>
</table>`}`

/** Gateway: held requests, requests per host over the last day, refusals with their reasons, and the rules in force. */
export const gatewayBody = (
  v: GatewayView, org: Org | null, pending: ReadonlyArray<PendingApproval> | null, csrf: string, note: string | null = null, check: CheckView | null = null
) => {
  const hosts = [...v.perHost].sort(([, a], [, b]) => b.reduce((x, y) => x + y, 0) - a.reduce((x, y) => x + y, 0))
  return html`${pendingSection(pending, csrf, note)}
${checkSection(check)}
<h2>Requests per host, last 24 hours</h2>
${hosts.length === 0 ? html`<p>No request in the last 24 hours.</p>` : html`<table>
<thead><tr><th scope="col">Host</th><th scope="col">Requests</th><th scope="col">By hour (oldest left)</th></tr></thead>
<tbody>${hosts.map(([host, counts]) => html`<tr><td>${host}</td><td>${counts.reduce((a, b) => a + b, 0)}</td><td>${chart(host, counts)}</td></tr>`)}</tbody>
</table>`}
<h2>Refusals (latest ${REFUSALS_SHOWN})</h2>
${v.refusals.length === 0 ? html`<p>No refusal in the last 24 hours.</p>` : html`<table>
<thead><tr><th scope="col">Time</th><th scope="col">Run</th><th scope="col">Subject</th><th scope="col">Request</th><th scope="col">Status</th><th scope="col">Why</th><th scope="col">Reason</th></tr></thead>
<tbody>${v.refusals.map((r) => html`<tr><td>${r.time}</td><td>${r.run === "—" || r.run === "null" ? "—" : html`<a href="/runs/${r.run}">${r.run}</a>`}</td><td>${r.subject}</td><td><code>${r.target}</code></td><td>${r.status}</td><td>${r.why ? html`<code>${r.why}</code>` : "—"}</td><td>${cut(r.note, 400)}</td></tr>`)}</tbody>
</table>`}
<h2>Rules in force</h2>
${org === null ? html`<p class="error">org.toml does not decode: nothing is allowed until it is fixed (roster doctor names the error).</p>` : html`<table>
<caption>[[grant]]: TLS terminated, the credential injected</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Hosts</th><th scope="col">Ports</th><th scope="col">Subjects</th><th scope="col">Credential</th><th scope="col">Server tools</th><th scope="col">Requests</th></tr></thead>
<tbody>${org.grant.map((g) => html`<tr><td>${g.name}</td><td>${g.hosts.join(", ")}</td><td>${ports(g.ports)}</td><td>${scopes(g.scope)}</td><td>${g.credential}</td><td>${(g.server_tools ?? []).join(", ") || "none"}</td><td>${requestRules(g)}</td></tr>`)}</tbody>
</table>
<table>
<caption>[[allow]]: tunnelled as is; one with rules intercepted and decided request by request, nothing injected</caption>
<thead><tr><th scope="col">Hosts</th><th scope="col">Ports</th><th scope="col">Subjects</th><th scope="col">Requests</th></tr></thead>
<tbody>${org.allow.map((a) => html`<tr><td>${a.hosts.join(", ")}</td><td>${ports(a.ports)}</td><td>${scopes(a.scope)}</td><td>${requestRules(a)}</td></tr>`)}</tbody>
</table>
${org.route.length > 0 ? html`<table><caption>[[route]]</caption><thead><tr><th scope="col">Host</th><th scope="col">Upstream</th></tr></thead><tbody>${org.route.map((r) => html`<tr><td>${r.host}</td><td>${r.upstream}</td></tr>`)}</tbody></table>` : ""}`}`
}

/** A request a person asked the Gateway page about, and the gateway's verdict on it (roster policy check's, the same decision). */
export interface CheckView {
  readonly worker: string
  readonly method: string
  readonly url: string
  readonly headers: string
  readonly body: string
  readonly answer: PolicyAnswer | { readonly error: string } | undefined
}

const verdictRows = (a: PolicyAnswer) => {
  const v = a.verdict
  const rows: Array<readonly [string, string]> = [
    ["Verdict", a.allowed ? (a.asked ? `${v.kind} (asked: held for a person)` : v.kind) : `refuse (${a.status})`],
    ...(v.entry ? [["Entry", v.entry] as const] : []),
    ...(v.by ? [["Decided by", v.by] as const] : []),
    ...(v.url ? [["Target the upstream gets", v.url] as const] : []),
    ...(v.injects ? [["Credential injected", v.injects] as const] : []),
    ...(v.dial ? [["Dialled", v.dial] as const] : []),
    ...(v.why ? [["Why", v.why] as const] : []),
    ...(a.allowed && a.request ? [["Request", a.request] as const] : []),
    ...(!a.allowed ? [["Reason", a.refusal.reason] as const] : []),
    ...(!a.allowed && a.refusal.detail.fix ? [["org.toml could add", a.refusal.detail.fix.join("\n")] as const] : []),
    ...(a.allowed ? a.notes.map((n) => ["Note", n] as const) : [])
  ]
  return html`<dl class="verdict">${rows.map(([k, val]) => html`<dt>${k}</dt><dd><code>${val}</code></dd>`)}</dl>`
}

/** "Check a request": what the gateway would do with a box's request, decided as the gateway decides it, sending nothing. */
const checkSection = (c: CheckView | null) =>
  html`<h2>Check a request</h2>
<form method="get" action="/gateway" class="check">
<label>Worker <input name="check_worker" value="${c?.worker ?? ""}" required pattern="[a-z][a-z0-9\\-]{0,31}"></label>
<label>Method <input name="check_method" value="${c?.method ?? "GET"}" size="8"></label>
<label>URL <input name="check_url" value="${c?.url ?? ""}" required size="60" placeholder="https://api.example.com/v1/…"></label>
<label>Headers (one "Name: value" a line) <textarea name="check_headers" rows="2" cols="60">${c?.headers ?? ""}</textarea></label>
<label>Body <textarea name="check_body" rows="2" cols="60">${c?.body ?? ""}</textarea></label>
<button type="submit">Check</button>
</form>
${c?.answer === undefined ? "" : "error" in c.answer ? html`<p class="error" role="status">${c.answer.error}</p>` : verdictRows(c.answer)}`
