import { Args, Command, Options } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import { Console, Effect, Option } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import { workerSubject } from "../contract/scope.js"
import { checkPolicy, probeBody, type VerdictView } from "../gateway/policy/policyCheck.js"
import { refusalBody } from "../gateway/base/refusal.js"
import { credentialFor } from "../vault/credentialFor.js"
import { readIdentity } from "../worker/workers.js"
import { ExitCode } from "./exit.js"
import { visible } from "./terminal.js"

const HOW = {
  terminated: "TLS terminated at the gateway, the credential injected",
  intercepted: "TLS terminated at the gateway, each request decided by the [[allow]]'s rules, nothing injected",
  tunnelled: "tunnelled as is (the box speaks TLS with the host itself)",
  forwarded: "forwarded as plain http"
} as const

/** The verdict in a line: what the gateway would do, on which target, with which credential. */
const verdictLine = (v: VerdictView) =>
  [
    v.kind.replace("_", " "),
    ...(v.url ? [visible(v.url)] : []),
    ...(v.dial ? [`to ${v.dial}`] : []),
    ...(v.injects ? [`with credential "${v.injects}" injected`] : []),
    ...(v.kind === "hold" && v.why ? [`(${v.why})`] : [])
  ].join(" ")

const check = Command.make("check", {
  json: Options.boolean("json").pipe(Options.withDescription("print JSON for scripts")),
  graphqlOp: Options.text("graphql-op").pipe(
    Options.optional,
    Options.withDescription("a GraphQL request's one operation, as a rule names it: query, mutation:CreateIssue, …")
  ),
  jsonrpc: Options.text("jsonrpc").pipe(
    Options.optional,
    Options.withDescription("a JSON-RPC call, as a rule names it: tools/list, or tools/call:write_file for an MCP tool")
  ),
  websocket: Options.boolean("websocket").pipe(
    Options.withDescription("a WebSocket upgrade on the URL's path (an entry with rules lets one through only by a rule with websocket = true)")
  ),
  method: Options.text("method").pipe(
    Options.withDefault("GET"),
    Options.withDescription("the request's method, as the box would send it (a [[grant]] or [[allow]] with rules decides by method and path)")
  ),
  header: Options.text("header").pipe(
    Options.repeated,
    Options.withDescription("a header the box would send, \"Name: value\" (repeatable): Content-Type, X-HTTP-Method-Override, … — what an entry's rules read of the head")
  ),
  body: Options.text("body").pipe(
    Options.optional,
    Options.withDescription("the body the box would send, as text (a GraphQL or JSON-RPC rule reads it; with --header \"Content-Type: …\")")
  ),
  bodyFile: Options.file("body-file", { exists: "yes" }).pipe(Options.optional, Options.withDescription("the body the box would send, from a file")),
  worker: Args.text({ name: "worker" }).pipe(Args.withDescription("whose box would ask")),
  url: Args.text({ name: "url" }).pipe(Args.withDescription("https://host[:port]/…, http://host[:port]/…, or host:port (a CONNECT)"))
}, ({ body: bodyText, bodyFile, graphqlOp, header, json, jsonrpc, method, url, websocket, worker }) =>
  Effect.gen(function*() {
    yield* readIdentity(worker)
    const policy = yield* (yield* OrgConfig).policy
    const fs = yield* FileSystem.FileSystem
    const probe = probeBody({ graphqlOp: Option.getOrUndefined(graphqlOp), jsonrpc: Option.getOrUndefined(jsonrpc) })
    const fromFile = Option.isSome(bodyFile) ? Buffer.from(yield* fs.readFile(bodyFile.value)) : undefined
    const body = fromFile ?? Option.map(bodyText, (t) => Buffer.from(t)).pipe(Option.getOrUndefined) ?? probe
    // A probe's body is JSON, and a GraphQL or JSON-RPC request is a POST unless said otherwise.
    const headers = probe && !header.some((h) => /^\s*content-type\s*:/i.test(h)) ? [...header, "Content-Type: application/json"] : header
    const answer = checkPolicy(policy, workerSubject(worker), url, { method: probe && method === "GET" ? "POST" : method, headers, body, websocket })
    // A grant whose credential is not connected is allowed by policy, yet every request gets 502: say so.
    const missing = answer.allowed && answer.credential && !(yield* credentialFor(answer.credential)) ? answer.credential : undefined
    const notes = answer.allowed
      ? [...answer.notes, ...(missing ? [`no credential "${missing}" is connected: requests get 502 until: roster connection add ${missing}`] : [])]
      : []
    if (json) {
      yield* Console.log(JSON.stringify(
        answer.allowed
          ? { ...answer, notes }
          : { allowed: false, status: answer.status, reason: answer.refusal.reason, ...refusalBody(answer.refusal).roster, verdict: answer.verdict },
        null, 2
      ))
    } else if (answer.allowed) {
      yield* Console.log(`${answer.asked ? "asked" : "allowed"}: ${answer.subject} → ${answer.host}:${answer.port}`)
      yield* Console.log(`  rule: ${answer.rule} — ${HOW[answer.how]}${answer.credential ? ` (credential "${answer.credential}")` : ""}`)
      if (answer.request) yield* Console.log(`  request: ${visible(answer.request)}`)
      yield* Console.log(`  verdict: ${verdictLine(answer.verdict)}`)
      if (answer.upstream) yield* Console.log(`  upstream: ${answer.upstream} ([[route]])`)
      for (const n of notes) yield* Console.log(`  note: ${n}`)
    } else {
      yield* Console.log(`refused (${answer.refusal.detail.why}, ${answer.status}): ${visible(answer.refusal.reason)}`)
      const fix = answer.refusal.detail.fix ?? []
      if (fix.length > 0) yield* Console.log(`an operator could add to org.toml:\n${fix.map((l) => `  ${visible(l)}`).join("\n")}`)
    }
    if (!answer.allowed) return yield* Effect.fail(new ExitCode({ code: 1 }))
  })).pipe(Command.withDescription(
    "Would the gateway let this worker's box reach this URL, and which rule decides? The gateway's own decision, on org.toml as it is now: " +
      "sends nothing. --method, --header and --body (or --graphql-op, --jsonrpc) give the request a box would send. " +
      "Exit 0 when allowed or asked (a grant rule that holds the request for a person), 1 when refused. Example: roster policy check alice https://api.example.com/v1/messages " +
        "(or, for a grant with request rules: roster policy check alice https://api.example.com/repos/acme/app --method DELETE)"
  ))

export const policyCommand = Command.make("policy").pipe(
  Command.withDescription("Ask the gateway's policy (org.toml's [[grant]], [[allow]], [[route]]) without sending anything."),
  Command.withSubcommands([check])
)
