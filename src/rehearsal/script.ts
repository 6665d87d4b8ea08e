/**
 * The rehearsal model's script: a deterministic stand-in for Claude that exercises the whole
 * path — a bash tool call run in the box, a message_user call, then a final answer quoting
 * what the box printed. No intelligence, labelled as a rehearsal wherever it speaks.
 */
// What the box is, who runs in it, and whether it can leave other than through the gateway
// (192.0.2.1 is TEST-NET-1: never routed anywhere, and the box has no way out to try). A locked box's
// packets are dropped, so "refused" is a timeout: half a second (the preflight's own probe takes 0.3),
// not the 2 s it was — every rehearsal answer waited on it.
const EGRESS_PROBE = "node -e \"const s=require('net').connect(443,'192.0.2.1');" +
  "s.on('connect',()=>{console.log('direct egress: CONNECTED');process.exit(0)});" +
  "s.on('error',e=>console.log('direct egress: refused ('+e.code+')'));" +
  "s.setTimeout(500,()=>{console.log('direct egress: refused (no route out)');s.destroy()})\""
// A queued task's box names its task, a box with a gated knowledge repo that repo's base (in a warm box's
// environment only once its run took it: ROSTER_TASK_ID, ROSTER_KNOWLEDGE_BASE).
export const REHEARSAL_COMMAND = `head -n 2 /etc/os-release; echo "box: uid=$(id -u) host=$(hostname)` +
  `\${ROSTER_TASK_ID:+ task=$ROSTER_TASK_ID}\${ROSTER_KNOWLEDGE_BASE:+ knowledge=$ROSTER_KNOWLEDGE_BASE}"; ${EGRESS_PROBE}`
export const REHEARSAL_MESSAGE = "rehearsal: hello from inside the box (this is the rehearsal model, not Claude)"
/** Asked for in a prompt, the rehearsal queues one follow-up for its worker with set_tasks. */
export const REHEARSAL_FOLLOW_UP_ASK = "queue a follow-up task"
export const REHEARSAL_FOLLOW_UP = "rehearsal follow-up: look at the box again"
/** "remember that <fact>." in a prompt: the rehearsal keeps the fact with the remember tool. */
export const REHEARSAL_REMEMBER_ASK = "remember that "
/** "forget m-xxxxxxxx" in a prompt: the rehearsal drops that entry with the forget tool. */
export const REHEARSAL_FORGET_ASK = "forget m-"
/** Asked "what do you remember", the rehearsal answers with its briefing's memory, as it was given. */
export const REHEARSAL_RECALL_ASK = "what do you remember"
/**
 * "CONT-SAY" asks for work still under way when roster is stopped: the rehearsal says a word it
 * makes up ("the word is …"), then runs a long bash command and waits on it. Carried on after the
 * stop (its session resumed), it answers with the word it said — found only in the conversation
 * before the stop, never in the prompt.
 */
export const REHEARSAL_LONG_WORK_ASK = "CONT-SAY"
export const REHEARSAL_LONG_WORK = "sleep 600"
const SAID_WORD = /the word is (WORD-[0-9a-z]+)/

const assistantText = (m: Message): string =>
  m.role !== "assistant" ? "" : typeof m.content === "string" ? m.content : m.content.filter((b) => b.type === "text").map((b) => b.text ?? "").join("")
/** "say it with term_send" in a talk session: the rehearsal speaks to its person with term_send before its answer. */
export const REHEARSAL_TERM_SEND_ASK = "say it with term_send"
export const REHEARSAL_TERM_SENT = "rehearsal: said between turns with term_send"
/** In a chat session the rehearsal posts its answer with the send tool — unless a message asks it to answer without sending. */
export const REHEARSAL_UNSENT_ASK = "answer without sending"
/** Asked "what did you say before", the rehearsal quotes its own last line in the room's history it was given. */
export const REHEARSAL_OWN_PAST_ASK = "what did you say before"
const OWN_LINE = /^- [^\n]*? \(you\): ([^\n]*)$/gm
/** "tell us with message_user" in a chat session: the rehearsal says REHEARSAL_MESSAGE with message_user, then answers with the send tool. */
export const REHEARSAL_MESSAGE_USER_ASK = "tell us with message_user"
const CHAT_SEND_TOOLS = ["slack_send", "discord_send"]
/** "what is in the files": the rehearsal hashes the files the message brought (their box paths in the input) with bash, and answers with the sums. */
export const REHEARSAL_FILES_ASK = "what is in the files"
/** "send me a file" in a chat session: the rehearsal writes REHEARSAL_FILE_OUT with bash, then sends it with the send tool's files. */
export const REHEARSAL_FILE_OUT_ASK = "send me a file"
export const REHEARSAL_FILE_OUT = "/pihome/workspace/rehearsal-report.txt"
/** "fetch the held page": the rehearsal asks for a page the policy refuses (a TEST-NET address), and answers with what its proxy said. */
export const REHEARSAL_HELD_ASK = "fetch the held page"
export const REHEARSAL_HELD_HOST = "198.51.100.9"
/**
 * "delete the acme repo": the rehearsal sends `DELETE /repos/acme/app` to a granted host through the gateway (TLS with
 * roster's CA, as any client in the box), and answers with the status it got — a request a grant's rule may hold for a person.
 */
export const REHEARSAL_RULED_ASK = "delete the acme repo"
export const REHEARSAL_RULED_HOST = "gh.example.com"
const FILE_PATH = /: (\/pihome\/inbox\/files\/[^\n]+)$/gm

interface Block {
  readonly type: string
  readonly text?: string | undefined
  readonly tool_use_id?: string | undefined
  readonly content?: unknown
}
interface Message {
  readonly role: string
  readonly content: string | ReadonlyArray<Block>
}

export type Step =
  | { readonly kind: "tool"; readonly intro: string; readonly id: string; readonly name: string; readonly input: Record<string, unknown> }
  | { readonly kind: "final"; readonly text: string }

const resultText = (b: Block): string =>
  typeof b.content === "string"
    ? b.content
    : Array.isArray(b.content)
    ? (b.content as ReadonlyArray<Block>).map((c) => c.text ?? "").join("")
    : ""

const userText = (m: Message): string =>
  m.role !== "user" ? "" : typeof m.content === "string" ? m.content : m.content.filter((b) => b.type === "text").map((b) => b.text ?? "").join("")

/** A person's own words in a roster input: what follows its Start preamble (surface, origin, memory), if it has one. */
const ownWords = (text: string) => {
  const marks = ["## Your task\n", "## The first message\n"].map((m) => ({ m, at: text.lastIndexOf(m) })).filter((x) => x.at >= 0)
  const last = marks.sort((a, b) => b.at - a.at)[0]
  return last ? text.slice(last.at + last.m.length).trim() : text
}

/**
 * The next step, from the conversation so far. The first turn looks at the box (bash, then
 * message_user, then an answer); a later turn of the same conversation answers from memory,
 * quoting the first message — proof that the session kept its context.
 */
export const nextStep = (messages: ReadonlyArray<Message>, tools: ReadonlyArray<string>): Step => {
  const send = tools.find((t) => CHAT_SEND_TOOLS.includes(t))
  if (!send) return answerStep(messages, tools)
  // A chat session: the answer reaches the channel only through the send tool, so that is where it goes.
  const current = messages.map((m, i) => ({ i, text: userText(m).trim() })).filter((x) => x.text !== "").at(-1)
  /** Whether this turn already ran the rehearsal's tool call of that id prefix. */
  const ranThisTurn = (prefix: string) =>
    messages.slice(current?.i ?? 0).some((m) =>
      m.role === "user" && Array.isArray(m.content) && (m.content as ReadonlyArray<Block>).some((b) => b.type === "tool_result" && b.tool_use_id?.startsWith(prefix))
    )
  if (current?.text.toLowerCase().includes(REHEARSAL_MESSAGE_USER_ASK) && tools.includes("message_user") && !ranThisTurn("toolu_rehearsal_msg")) {
    return { kind: "tool", intro: "Telling you first.", id: `toolu_rehearsal_msg_${Date.now()}`, name: "message_user", input: { text: REHEARSAL_MESSAGE } }
  }
  if (current?.text.toLowerCase().includes(REHEARSAL_FILE_OUT_ASK)) {
    if (!ranThisTurn("toolu_rehearsal_write")) {
      const command = `mkdir -p /pihome/workspace && { echo 'a report from the rehearsal model'; seq 1 50000; } > ${REHEARSAL_FILE_OUT}`
      return { kind: "tool", intro: "Writing the file.", id: `toolu_rehearsal_write_${Date.now()}`, name: "bash", input: { command } }
    }
    return ranThisTurn("toolu_rehearsal_send")
      ? { kind: "final", text: "Sent." }
      : { kind: "tool", intro: "Sending it.", id: `toolu_rehearsal_send_${Date.now()}`, name: send, input: { text: "Rehearsal answer: here is the file.", files: [REHEARSAL_FILE_OUT] } }
  }
  const step = answerStep(messages, tools.filter((t) => t !== "message_user"))
  if (step.kind !== "final" || current?.text.toLowerCase().includes(REHEARSAL_UNSENT_ASK)) return step
  return ranThisTurn("toolu_rehearsal_send")
    ? { kind: "final", text: "Sent." }
    : { kind: "tool", intro: "Posting my answer in the thread.", id: `toolu_rehearsal_send_${Date.now()}`, name: send, input: { text: step.text } }
}

const answerStep = (messages: ReadonlyArray<Message>, tools: ReadonlyArray<string>): Step => {
  const asked = messages.map((m, i) => ({ i, text: userText(m).trim() })).filter((x) => x.text !== "")
  const current = asked.at(-1)
  const said = messages.map((m) => SAID_WORD.exec(assistantText(m))?.[1]).find((w) => w !== undefined)
  if (current?.text.includes(REHEARSAL_LONG_WORK_ASK) && said !== undefined && asked.length >= 2) {
    return { kind: "final", text: `Rehearsal answer: carried on after the interruption; before it I said the word is ${said}.` }
  }
  const files = filesStep(messages, current)
  if (files) return files
  const held = heldStep(messages, current)
  if (held) return held
  if (asked.length >= 2 && current) {
    return {
      kind: "final",
      text: `Rehearsal answer: earlier in this conversation you said "${ownWords(asked[0]?.text ?? "")}". Now you say "${ownWords(current.text)}".`
    }
  }
  const results = messages.slice(current?.i ?? 0)
    .filter((m) => m.role === "user" && Array.isArray(m.content))
    .flatMap((m) => (m.content as ReadonlyArray<Block>).filter((b) => b.type === "tool_result"))
  if (current?.text.toLowerCase().includes(REHEARSAL_OWN_PAST_ASK)) {
    const own = [...current.text.matchAll(OWN_LINE)].at(-1)?.[1]
    return { kind: "final", text: own === undefined ? "Rehearsal answer: I see nothing I said here before." : `Rehearsal answer: before this, I said here: "${own}"` }
  }
  const memory = memoryStep(current?.text ?? "", results, tools)
  if (memory) return memory
  if (current?.text.toLowerCase().includes(REHEARSAL_TERM_SEND_ASK) && tools.includes("term_send") && !results.some((r) => r.tool_use_id?.startsWith("toolu_rehearsal_term"))) {
    return { kind: "tool", intro: "Telling you first.", id: `toolu_rehearsal_term_${Date.now()}`, name: "term_send", input: { text: REHEARSAL_TERM_SENT } }
  }
  if (current?.text.includes(REHEARSAL_LONG_WORK_ASK) && !results.some((r) => r.tool_use_id?.startsWith("toolu_rehearsal_long"))) {
    const word = `WORD-${Math.random().toString(36).slice(2, 8)}`
    return { kind: "tool", intro: `Before the long job: the word is ${word}.`, id: `toolu_rehearsal_long_${Date.now()}`, name: "bash", input: { command: REHEARSAL_LONG_WORK } }
  }
  const bash = results.find((r) => r.tool_use_id?.startsWith("toolu_rehearsal_bash"))
  const told = results.some((r) => r.tool_use_id?.startsWith("toolu_rehearsal_msg"))
  const queued = results.some((r) => r.tool_use_id?.startsWith("toolu_rehearsal_tasks"))
  if (!bash) {
    return {
      kind: "tool",
      intro: "Rehearsal model here (not Claude). Let me look at the box I run in.",
      id: `toolu_rehearsal_bash_${Date.now()}`,
      name: "bash",
      input: { command: REHEARSAL_COMMAND }
    }
  }
  if (!told && tools.includes("message_user")) {
    return {
      kind: "tool",
      intro: "Telling the person who started this run.",
      id: `toolu_rehearsal_msg_${Date.now()}`,
      name: "message_user",
      input: { text: REHEARSAL_MESSAGE }
    }
  }
  if (!queued && tools.includes("set_tasks") && current?.text.includes(REHEARSAL_FOLLOW_UP_ASK)) {
    return {
      kind: "tool",
      intro: "Queueing a follow-up for myself.",
      id: `toolu_rehearsal_tasks_${Date.now()}`,
      name: "set_tasks",
      input: { tasks: [{ prompt: REHEARSAL_FOLLOW_UP }] }
    }
  }
  const output = resultText(bash).trim().split("\n")
  const pretty = output.find((l) => l.startsWith("PRETTY_NAME=")) ?? output[0] ?? "(nothing)"
  const who = output.find((l) => l.startsWith("box: ")) ?? ""
  const egress = output.find((l) => l.startsWith("direct egress: ")) ?? ""
  return {
    kind: "final",
    text: `Rehearsal answer: I looked at my box with bash. It says ${pretty}; ${who}; ${egress}. Done.`
  }
}

/** What the box's node runs to reach the proxy by hand (its node may proxy http.request itself): the CONNECT, then `then` on the socket. */
const connectScript = (target: string, then: string) => [
  `const u = new URL(process.env.HTTPS_PROXY)`,
  `const auth = Buffer.from(decodeURIComponent(u.username) + ":" + decodeURIComponent(u.password)).toString("base64")`,
  `const s = require("net").connect(Number(u.port), u.hostname, () => s.write("CONNECT ${target} HTTP/1.1\\r\\nHost: ${target}\\r\\nProxy-Authorization: Basic " + auth + "\\r\\n\\r\\n"))`,
  `s.once("data", (d) => { const code = d.toString().split(" ")[1]; ${then} })`,
  `s.on("error", (e) => console.log("error " + e.message))`
].join("; ")

/** Inside the tunnel to the granted host: TLS (roster's CA, which the box trusts), one DELETE, and the status it got. */
const deleteInTunnel = [
  `if (code !== "200") { console.log("proxy " + code); return s.destroy() }`,
  `const t = require("tls").connect({ socket: s, servername: "${REHEARSAL_RULED_HOST}" }, () => t.write("DELETE /repos/acme/app HTTP/1.1\\r\\nHost: ${REHEARSAL_RULED_HOST}\\r\\nConnection: close\\r\\n\\r\\n"))`,
  `t.once("data", (r) => { console.log("answer " + r.toString().split(" ")[1]); t.destroy() })`,
  `t.on("error", (e) => console.log("error " + e.message))`
].join("; ")

/** The two turns that reach through the gateway: a page the policy refuses (a held CONNECT), a request a grant's rule asks about. */
const THROUGH = [
  { ask: REHEARSAL_HELD_ASK, id: "toolu_rehearsal_held", said: "the held page", script: connectScript(`${REHEARSAL_HELD_HOST}:9443`, `console.log("proxy " + code); s.destroy()`) },
  { ask: REHEARSAL_RULED_ASK, id: "toolu_rehearsal_ruled", said: "the delete", script: connectScript(`${REHEARSAL_RULED_HOST}:443`, deleteInTunnel) }
] as const

/** A turn asked to reach through the gateway: node in the box, by hand, and what the proxy (or the host) answered — a held request waits for a person. */
const heldStep = (messages: ReadonlyArray<Message>, current: { readonly i: number; readonly text: string } | undefined): Step | undefined => {
  const what = THROUGH.find((t) => current?.text.toLowerCase().includes(t.ask))
  if (!what || !current) return undefined
  const done = messages.slice(current.i)
    .filter((m) => m.role === "user" && Array.isArray(m.content))
    .flatMap((m) => (m.content as ReadonlyArray<Block>).filter((b) => b.type === "tool_result" && b.tool_use_id?.startsWith(what.id)))
    .at(0)
  if (!done) {
    const command = `node -e '${what.script}'`
    return { kind: "tool", intro: "Fetching it.", id: `${what.id}_${Date.now()}`, name: "bash", input: { command } }
  }
  return { kind: "final", text: `Rehearsal answer: ${what.said}: ${resultText(done).trim()}` }
}

/** A turn asked about the files it brought: their sha256 sums, read in the box. */
const filesStep = (messages: ReadonlyArray<Message>, current: { readonly i: number; readonly text: string } | undefined): Step | undefined => {
  if (!current?.text.toLowerCase().includes(REHEARSAL_FILES_ASK)) return undefined
  const paths = [...current.text.matchAll(FILE_PATH)].map((m) => m[1] ?? "")
  const done = messages.slice(current.i)
    .filter((m) => m.role === "user" && Array.isArray(m.content))
    .flatMap((m) => (m.content as ReadonlyArray<Block>).filter((b) => b.type === "tool_result" && b.tool_use_id?.startsWith("toolu_rehearsal_sha")))
    .at(0)
  if (paths.length === 0) return { kind: "final", text: "Rehearsal answer: this message brought no file I can read." }
  if (!done) {
    const quoted = paths.map((p) => `'${p.replace(/'/g, "'\\''")}'`).join(" ")
    return { kind: "tool", intro: "Reading the files you sent.", id: `toolu_rehearsal_sha_${Date.now()}`, name: "bash", input: { command: `sha256sum ${quoted}` } }
  }
  return { kind: "final", text: `Rehearsal answer: the files' sha256 sums: ${resultText(done).trim().replace(/\s+/g, " ")}` }
}

/** The memory section of a Start briefing, as the worker was given it (empty when it remembers nothing). */
const briefedMemory = (text: string) => {
  const at = text.indexOf("## What you remember")
  if (at < 0) return ""
  const rest = text.slice(at)
  const end = rest.indexOf("\n## ", 3)
  return (end < 0 ? rest : rest.slice(0, end)).trim()
}

/** What the rehearsal does when a prompt is about its memory: remember a fact, forget an entry, or say what it remembers. */
const memoryStep = (text: string, results: ReadonlyArray<Block>, tools: ReadonlyArray<string>): Step | undefined => {
  const ask = text.slice(text.lastIndexOf("## Your task") >= 0 ? text.lastIndexOf("## Your task") : 0)
  const fact = new RegExp(`${REHEARSAL_REMEMBER_ASK}([^\\n]+?)[.]?(\\n|$)`, "i").exec(ask)?.[1]
  const forget = /forget (m-[0-9a-f]{8})/.exec(ask)?.[1]
  const said = (prefix: string) => results.find((r) => r.tool_use_id?.startsWith(prefix))
  if (fact && tools.includes("remember")) {
    const done = said("toolu_rehearsal_remember")
    if (!done) {
      return { kind: "tool", intro: "Keeping that for my later runs.", id: `toolu_rehearsal_remember_${Date.now()}`, name: "remember", input: { text: fact } }
    }
    return { kind: "final", text: `Rehearsal answer: asked to remember "${fact}"; the tool said: ${resultText(done).trim()}` }
  }
  if (forget && tools.includes("forget")) {
    const done = said("toolu_rehearsal_forget")
    if (!done) return { kind: "tool", intro: "Dropping that note.", id: `toolu_rehearsal_forget_${Date.now()}`, name: "forget", input: { id: forget } }
    return { kind: "final", text: `Rehearsal answer: asked to forget ${forget}; the tool said: ${resultText(done).trim()}` }
  }
  if (ask.toLowerCase().includes(REHEARSAL_RECALL_ASK)) {
    const memory = briefedMemory(text)
    return { kind: "final", text: memory === "" ? "Rehearsal answer: I remember nothing from earlier runs." : `Rehearsal answer: from my briefing —\n${memory}` }
  }
  return undefined
}
