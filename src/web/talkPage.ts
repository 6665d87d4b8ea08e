import { html } from "./html.js"
import { type Conversation, conversationFragment } from "./talk.js"

/** Talk: start a conversation with a worker, or go back to one still open. */
export const talkIndex = (workers: ReadonlyArray<string>, open: ReadonlyArray<Conversation>, csrf: string) =>
  html`<form method="post" action="/talk" class="add">
<input type="hidden" name="csrf" value="${csrf}">
<label for="talk-worker">Worker</label>
<select id="talk-worker" name="worker" required>${workers.map((w) => html`<option value="${w}">${w}</option>`)}</select>
<button type="submit">Start a conversation</button>
</form>
<h2>Conversations</h2>
${open.length === 0 ? html`<p>None yet.</p>` : html`<ul>${open.map((c) => html`<li><a href="/talk/${c.id}">${c.worker}</a> — ${c.state}${c.ended ? ` (${c.ended})` : ""}</li>`)}</ul>`}`

/** One conversation: what was said (live), the reply as it streams, and the turn, abort and end controls. */
export const talkBody = (c: Conversation, csrf: string) =>
  html`<section id="talk" data-live="talk" data-id="${c.id}" aria-live="polite">${conversationFragment(c)}</section>
<p id="typing" class="typing" aria-live="polite"></p>
<form method="post" action="/talk/${c.id}/say" data-async class="add">
<input type="hidden" name="csrf" value="${csrf}">
<label for="say">Your message (one turn; sent when the turn before has ended)</label>
<textarea id="say" name="text" rows="3" required></textarea>
<button type="submit">Send</button>
</form>
<form method="post" action="/talk/${c.id}/abort" data-async><input type="hidden" name="csrf" value="${csrf}"><button type="submit">Abort this turn</button></form>
<form method="post" action="/talk/${c.id}/end" data-async><input type="hidden" name="csrf" value="${csrf}"><button type="submit">End the conversation</button></form>`
