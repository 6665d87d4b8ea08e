import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import * as os from "node:os"
import { viaDaemon } from "../api/controlClient.js"
import { type ApprovalDecision, isApprovalId, type PendingApproval } from "../contract/approval.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { BadInput } from "./badInput.js"
import { visible } from "./terminal.js"

const json = Options.boolean("json").pipe(Options.withDescription("print JSON for scripts"))
const idArg = Args.text({ name: "id" }).pipe(Args.withDescription("a held request's id from roster approvals (ap-xxxxxxxx)"))

const NO_DAEMON = "the roster server is not running, so no request is held — start it: roster server start"

/** Who decided, for the audit line and an --always comment: the person at this terminal. */
const whoAmI = () => `${os.userInfo().username} (cli)`

const line = (a: PendingApproval) =>
  `${a.id}  ${a.worker}  ${a.method} ${a.host}:${a.port}${a.path ?? ""}  run ${a.run_id}${a.node ? ` on ${a.node}` : ""}  waits until ${a.expires_at}` +
  (a.rule ? `  (asked by ${a.rule}: once or deny)` : "")

const approvals = Command.make("approvals", { json }, ({ json }) =>
  Effect.gen(function*() {
    const held = yield* viaDaemon((c) => c.approvals.list())
    if (Option.isNone(held)) return yield* Effect.fail(new BadInput({ detail: NO_DAEMON }))
    if (json) return yield* Console.log(JSON.stringify(held.value, null, 2))
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.option)
    const caps = Option.match(org, {
      onNone: () => "",
      onSome: (o) => ` (at most ${o.gateway.approvals_max_per_run} a run and ${o.gateway.approvals_max} on this node: [gateway] approvals_max_per_run, approvals_max)`
    })
    if (held.value.length === 0) return yield* Console.log(`no request is waiting for a decision${caps}`)
    yield* Console.log(`${held.value.length} held${caps}`)
    for (const a of held.value) yield* Console.log(visible(line(a)))
    yield* Console.log("\nlet one through: roster approve <id> [--once | --run | --always]; refuse it: roster deny <id>")
  })).pipe(Command.withDescription(
    "List the requests the gateway holds for a decision ([gateway] approvals = \"ask\"): a box's request to a host the policy " +
      "refuses waits up to approval_wait_s (120) while a person decides — at most approvals_max_per_run (8) a run and approvals_max (64) " +
      "on the node, each only while its connection is open and its run is live. A CONNECT shows host and port only."
  ))

const decide = (id: string, decision: ApprovalDecision) =>
  Effect.gen(function*() {
    // Checked before it goes anywhere near a URL: an id is its form, nothing else.
    if (!isApprovalId(id)) return yield* Effect.fail(new BadInput({ detail: `"${visible(id)}" is not a held request's id (ap-xxxxxxxx) — see roster approvals` }))
    const done = yield* viaDaemon((c) => c.approvals.decide({ path: { id }, payload: { decision, by: whoAmI() } }))
    if (Option.isNone(done)) return yield* Effect.fail(new BadInput({ detail: NO_DAEMON }))
    const d = done.value
    const what = `${d.approval.method} ${d.approval.host}:${d.approval.port} for ${d.approval.worker} (run ${d.approval.run_id})`
    yield* Console.log(visible(
      decision === "deny" ? `denied ${what}` :
      decision === "once" ? `approved ${what}, this request only` :
      decision === "run" ? `approved ${what} for the rest of the run` : `approved ${what} from now on`
    ))
    for (const l of d.org_toml ?? []) yield* Console.log(`  org.toml: ${visible(l)}`)
  })

const approve = Command.make("approve", {
  id: idArg,
  once: Options.boolean("once").pipe(Options.withDescription("this request only (the default)")),
  run: Options.boolean("run").pipe(Options.withDescription("this host:port for the rest of the run")),
  always: Options.boolean("always").pipe(Options.withDescription("append an [[allow]] of this host:port for the worker to org.toml, with who and when"))
}, ({ always, id, once, run }) =>
  Effect.gen(function*() {
    if ([once, run, always].filter(Boolean).length > 1) return yield* Effect.fail(new BadInput({ detail: "choose one of --once, --run, --always" }))
    yield* decide(id, always ? "always" : run ? "run" : "once")
  })).pipe(Command.withDescription(
    "Let a held request through, as a tunnel like [[allow]] (never with a credential: approval is not a grant). " +
      "--once (default) this request; --run this host:port for the rest of the run; --always writes an [[allow]] to org.toml. " +
      "Private and metadata addresses are never held, so never approvable."
  ))

const deny = Command.make("deny", { id: idArg }, ({ id }) => decide(id, "deny")).pipe(Command.withDescription(
  "Refuse a held request now: the box gets the 403 it would have had, saying who denied it."
))

export const approvalCommands = [approvals, approve, deny] as const
