import { promptLine } from "../contract/promptText.js"
import { type MemoryEntry, newestFirst } from "../memory/MemoryStore.js"
import type { RunRecord } from "../run/RunLog.js"
import { cut, html } from "./html.js"
import { nodeColumn } from "./nodeColumn.js"

/** What the worker page shows of the worker itself. */
export interface WorkerView {
  readonly name: string
  readonly identity: string
  readonly model: string | null
}

/** A worker: who it is, what it remembers (pending entries marked), and its recent runs; every text escaped. */
export const workerBody = (w: WorkerView, memory: ReadonlyArray<MemoryEntry>, runs: ReadonlyArray<RunRecord>) => {
  const newest = newestFirst(memory)
  const pending = newest.filter((e) => e.pending).length
  const node = nodeColumn(runs)
  return html`<dl class="facts">
<dt>Model</dt><dd>${w.model ?? "the deployment's default"}</dd>
</dl>
<h2>Identity</h2>
<pre>${cut(w.identity, 4000)}</pre>
<h2>Memory</h2>
<p>${newest.length} entr${newest.length === 1 ? "y" : "ies"}${pending > 0 ? html`, <strong class="warn">${pending} pending</strong> (written by a tainted run: not briefed until a person accepts it — <code>roster memory accept ${w.name} &lt;id&gt;</code>)` : ""}.</p>
${newest.length === 0 ? html`<p>Nothing yet: a run keeps notes with its remember tool.</p>` : html`<table class="memory">
<thead><tr><th scope="col">Entry</th><th scope="col">Written</th><th scope="col">Scope</th><th scope="col">Note</th><th scope="col">By run</th></tr></thead>
<tbody>${newest.map((e) => html`<tr${e.pending ? html` class="pending"` : ""}><td><code>${e.id}</code>${e.pending ? html` <span class="warn">pending</span>` : ""}</td><td>${e.time}</td><td>${e.scope}</td><td>${cut(promptLine(e.text), 2000)}${e.held_reason ? html`<br><span class="warn">held: ${cut(e.held_reason, 300)}</span>` : ""}</td><td>${e.run_id ? html`<a href="/runs/${e.run_id}">${e.run_id}</a>` : "a person"}</td></tr>`)}</tbody>
</table>`}
<h2>Recent runs</h2>
${runs.length === 0 ? html`<p>No runs yet.</p>` : html`<table>
<thead><tr><th scope="col">Run</th><th scope="col">Kind</th>${node.head}<th scope="col">Started</th><th scope="col">Ended by</th><th scope="col">Exit</th></tr></thead>
<tbody>${runs.map((r) => html`<tr><td><a href="/runs/${r.run_id}">${r.run_id}</a></td><td>${r.kind}${r.task_id ? ` (${r.task_id})` : ""}</td>${node.cell(r)}<td>${r.started_at}</td><td>${r.ended_by ?? "running"}</td><td>${r.exit_code ?? "—"}</td></tr>`)}</tbody>
</table>`}`
}

/** Every worker, each linking to its page. */
export const workersBody = (names: ReadonlyArray<string>) =>
  html`<ul>${names.map((n) => html`<li><a href="/workers/${n}">${n}</a></li>`)}</ul>`
