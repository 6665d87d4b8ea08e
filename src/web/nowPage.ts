import type { ServerStatus } from "../api/ControlApi.js"
import type { NodeBoxes } from "../contract/fleet.js"
import type { BoxStats as ContainerStats } from "../backend/BoxBackend.js"
import { html } from "./html.js"

/**
 * What the Now page shows: the daemon's status (null when it is not running), each live box's
 * engine stats, and on a fleet node the other nodes' live boxes.
 */
export interface NowData {
  readonly status: ServerStatus | null
  readonly stats: ReadonlyMap<string, BoxReading>
  readonly elsewhere?: ReadonlyArray<NodeBoxes>
}

/** A live box's engine stats, or why they could not be read. */
export type BoxReading = ContainerStats | { readonly unreadable: string }

const duration = (s: number | null) =>
  s === null ? "—" : s < 60 ? `${Math.round(s)} s` : s < 3600 ? `${Math.floor(s / 60)} min ${Math.round(s % 60)} s` : `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`

const mib = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`

/** A box's CPU and memory as its row shows them ("—" when the engine gave none). */
const usage = (cpu: number | undefined, memory: number | undefined) => [cpu === undefined ? "—" : `${cpu.toFixed(1)} %`, memory === undefined ? "—" : mib(memory)]

/** The live part of Now: re-rendered by the server and pushed over SSE whenever it changes. */
export const nowFragment = (d: NowData) => {
  const s = d.status
  if (!s) {
    return html`<p class="warn" role="status">The roster server is not running: nothing runs queued tasks. Start it: <code>roster server start</code></p>`
  }
  const queue = Object.entries(s.queue).filter(([, n]) => n > 0)
  return html`<p role="status">Server: <strong>running</strong> (pid ${s.pid}, version ${s.version}, since ${s.started_at}); adopted ${s.adopted}, reaped ${s.reaped}.</p>
${s.held_reason ? html`<p class="warn" role="alert">The queue is held: ${s.held_reason}</p>` : ""}
<h2>Live boxes (${s.boxes.length}${(s.warm ?? 0) > 0 ? `, ${s.warm} warm` : ""})</h2>
${s.boxes.length === 0 ? html`<p>No box is running.</p>` : html`<table>
<thead><tr><th scope="col">Worker</th><th scope="col">Run</th><th scope="col">Kind</th><th scope="col">Task</th><th scope="col">Held by</th><th scope="col">Age</th><th scope="col">Ceiling left</th><th scope="col">CPU</th><th scope="col">Memory</th></tr></thead>
<tbody>${s.boxes.map((b) => {
    const st = d.stats.get(b.run_id)
    const [cpu, memory] = st && !("unreadable" in st) ? usage(st.cpuPercent, st.memoryBytes) : usage(undefined, undefined)
    const row = html`<td>${b.worker}</td><td><a href="/runs/${b.run_id}">${b.run_id}</a></td><td>${b.kind}</td><td>${b.task_id ?? "—"}</td><td>${b.held_by}</td><td>${duration(b.age_s)}</td><td>${duration(b.remaining_s)}</td>`
    return st && "unreadable" in st
      ? html`<tr>${row}<td colspan="2" class="warn">stats not read: ${st.unreadable}</td></tr>`
      : html`<tr>${row}<td>${cpu}</td><td>${memory}</td></tr>`
  })}</tbody>
</table>`}
${elsewhereSection(d.elsewhere ?? [])}
<h2>Queue</h2>
${queue.length === 0 ? html`<p>The queue is empty.</p>` : html`<ul>${queue.map(([status, n]) => html`<li>${status}: ${n}</li>`)}</ul>`}
${chatSection(s.chat ?? [])}`
}

/** The other nodes of the fleet: each one's live boxes (its runner RPC's answer), or why they are not shown. */
const elsewhereSection = (nodes: ReadonlyArray<NodeBoxes>) =>
  nodes.length === 0 ? "" : html`<h2>Elsewhere in the fleet</h2>
${nodes.map((n) => html`<h3>Node ${n.node}${n.boxes ? ` (${n.boxes.length} live)` : ""}</h3>
${!n.boxes ? html`<p class="warn">Not shown: ${n.detail ?? "no answer"}</p>` : n.boxes.length === 0 ? html`<p>No box is running there.</p>` : html`<table data-node="${n.node}">
<thead><tr><th scope="col">Worker</th><th scope="col">Run</th><th scope="col">Kind</th><th scope="col">Task</th><th scope="col">Age</th><th scope="col">Ceiling left</th><th scope="col">CPU</th><th scope="col">Memory</th></tr></thead>
<tbody>${n.boxes.map((b) => {
    const [cpu, memory] = usage(b.cpu_percent, b.memory_bytes)
    return html`<tr><td>${b.worker}</td><td><a href="/runs/${b.run_id}">${b.run_id}</a></td><td>${b.kind}</td><td>${b.task_id ?? "—"}</td><td>${duration(b.age_s)}</td><td>${duration(b.remaining_s)}</td><td>${cpu}</td><td>${memory}</td></tr>`
  })}</tbody>
</table>`}`)}`

/** Each [[chat]] listener: connected or why not, and what each channel maps to (a live session links to its run). */
const chatSection = (chats: ReadonlyArray<NonNullable<ServerStatus["chat"]>[number]>) =>
  chats.length === 0 ? "" : html`<h2>Chat</h2>
<ul>${chats.map((c) => html`<li${c.state === "connected" ? "" : html` class="warn"`}>${c.provider} (${c.connection}): <strong>${c.state}</strong>${c.detail ? html` — ${c.detail}` : ""}; ${c.turns} turns, ${c.ignored} ignored, ${c.limited} rate-limited
<ul>${c.channels.map((ch) => html`<li>${ch.id} → ${ch.worker}${ch.session ? html`: session <a href="/runs/${ch.session}">${ch.session}</a>` : ""}</li>`)}</ul></li>`)}</ul>`

/** The Now page: the fragment, inside the element the page's script replaces on each `now` event. */
export const nowBody = (d: NowData) => html`<section id="now" data-live="now" aria-live="polite">${nowFragment(d)}</section>`
