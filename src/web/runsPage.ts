import { knowledgeLine } from "../contract/knowledge.js"
import { taintLine } from "../contract/taint.js"
import type { RunRecord } from "../run/RunLog.js"
import { cut, html } from "./html.js"
import { nodeColumn } from "./nodeColumn.js"
import type { Entry } from "./timeline.js"

export const RUNS_PER_PAGE = 50

const usd = (r: RunRecord) => (r.usage ? `$${r.usage.usd.toFixed(4)}` : "—")

/** The runs, newest first, one page at a time. */
export const runsBody = (runs: ReadonlyArray<RunRecord>, page: number, total: number) => {
  const pages = Math.max(1, Math.ceil(total / RUNS_PER_PAGE))
  const node = nodeColumn(runs)
  return html`<p>${total} run${total === 1 ? "" : "s"}; page ${page} of ${pages}.</p>
<table>
<thead><tr><th scope="col">Run</th><th scope="col">Worker</th><th scope="col">Kind</th>${node.head}<th scope="col">Started</th><th scope="col">Ended by</th><th scope="col">Exit</th><th scope="col">Cost (est.)</th><th scope="col">Tainted</th></tr></thead>
<tbody>${runs.map((r) => html`<tr><td><a href="/runs/${r.run_id}">${r.run_id}</a></td><td>${r.worker}</td><td>${r.kind}</td>${node.cell(r)}<td>${r.started_at}</td><td>${r.ended_by ?? "running"}</td><td>${r.exit_code ?? "—"}</td><td>${usd(r)}</td><td>${(r.tainted?.length ?? 0) > 0 ? "yes" : "no"}</td></tr>`)}</tbody>
</table>
<nav aria-label="pages of runs">${page > 1 ? html`<a href="/runs?page=${page - 1}">Newer</a>` : ""} ${page < pages ? html`<a href="/runs?page=${page + 1}">Older</a>` : ""}</nav>`
}

const time = (at: number) => new Date(at).toISOString().slice(11, 23)

const entryHtml = (e: Entry) => {
  switch (e.kind) {
    case "turn":
      return html`<li class="turn"><span class="t">${time(e.at)}</span> <strong>turn</strong></li>`
    case "prompt":
      return html`<li class="prompt"><span class="t">${time(e.at)}</span> <strong>prompt</strong><pre>${cut(e.text)}</pre></li>`
    case "assistant":
      return html`<li class="assistant"><span class="t">${time(e.at)}</span> <strong>assistant</strong>${e.text ? html`<pre>${cut(e.text)}</pre>` : ""}${
        e.calls.map((c) => html`<div class="call">tool call: <code>${c.name}</code><pre>${cut(c.args)}</pre></div>`)
      }${e.error ? html`<p class="error">error: ${cut(e.error)}</p>` : ""}</li>`
    case "tool":
      return html`<li class="tool"><span class="t">${time(e.at)}</span> <strong>tool output</strong> <code>${e.name}</code>${e.isError ? " (error)" : ""}<pre>${cut(e.output)}</pre></li>`
    case "request":
      return html`<li class="request"><span class="t">${time(e.at)}</span> <strong>gateway</strong> ${e.method} <code>${e.target}</code> → ${e.status}${
        e.injected ? html` <span class="injected">credential injected</span>` : ""
      } · ${e.bytes} B · ${e.ms} ms${e.note ? html` · ${cut(e.note, 300)}` : ""}</li>`
    case "message":
      return html`<li class="message"><span class="t">${time(e.at)}</span> <strong>message_user</strong><pre>${cut(e.text)}</pre></li>`
  }
}

/** One run: how it ended, what it cost and kept, and its timeline; box text always as text. */
export const runBody = (r: RunRecord, entries: ReadonlyArray<Entry>, more: number) =>
  html`<dl class="facts">
<dt>Worker</dt><dd>${r.worker} (${r.kind}${r.task_id ? `, task ${r.task_id}` : ""}${r.channel ? `, channel ${r.channel}` : ""})</dd>
${r.node ? html`<dt>Node</dt><dd>${r.node}</dd>` : ""}
<dt>Started</dt><dd>${r.started_at}</dd>
<dt>Finished</dt><dd>${r.finished_at ?? "still running (or its runner died)"}</dd>
<dt>Ended by</dt><dd>${r.ended_by ?? "—"} (exit code ${r.exit_code ?? "none"})</dd>
${r.error ? html`<dt>Error</dt><dd class="error">${cut(r.error, 1000)}</dd>` : ""}
${r.usage ? html`<dt>Usage</dt><dd>${r.usage.answers} answers (${r.usage.models.join(", ")}): ${r.usage.input_tokens} in, ${r.usage.output_tokens} out, ${r.usage.cache_read_tokens} cache read, ${r.usage.cache_write_tokens} cache write — ${usd(r)} estimated</dd>` : ""}
${(r.tainted ?? []).map((t) => html`<dt>Tainted</dt><dd class="warn">${taintLine(t)}</dd>`)}
${r.untainted ? html`<dt>Untainted</dt><dd>${r.untainted.at}: ${r.untainted.reason}</dd>` : ""}
${r.store_snapshot ? html`<dt>Store snapshot</dt><dd>${r.store_snapshot}</dd>` : ""}
${(r.knowledge ?? []).map((k) => html`<dt>Repo</dt><dd>${knowledgeLine(k)}</dd>`)}
${(r.warnings ?? []).map((w) => html`<dt>Warning</dt><dd class="warn">${w}</dd>`)}
</dl>
<p><a href="/runs/${r.run_id}/transcript" download>Download the raw transcript</a></p>
<h2>Timeline</h2>
<ol class="timeline">${entries.map(entryHtml)}</ol>
${more > 0 ? html`<p>${more} more events: see the raw transcript.</p>` : ""}`
