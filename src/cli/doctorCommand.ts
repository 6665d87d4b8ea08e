import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { fixStale, surveyLockdown } from "../box/lockdownSurvey.js"
import { checkChats } from "../chat/doctor.js"
import { Paths } from "../config/Paths.js"

const fix = Options.boolean("fix").pipe(Options.withDescription("remove what is stale: chains and their jumps, and networks no container is on"))
const json = Options.boolean("json").pipe(Options.withDescription("print JSON for scripts"))

export const doctorCommand = Command.make("doctor", { fix, json }, ({ fix, json }) =>
  Effect.gen(function*() {
    const found = yield* surveyLockdown
    const fixed = fix ? yield* fixStale(found) : []
    const chat = yield* checkChats
    if (json) return yield* Console.log(JSON.stringify({ lockdown: found, fixed, chat }, null, 2))
    const ours = (yield* Paths).config
    if (found.length === 0) yield* Console.log("no roster networks or iptables chains on this host")
    for (const d of found) {
      const whose = d.deployment === null ? "(an older roster's, shared)" : `${d.deployment}${d.deployment === ours ? " (this deployment)" : ""}`
      yield* Console.log(`${d.stale ? "STALE " : ""}deployment ${whose}`)
      yield* Console.log(`  daemon:  ${d.daemon === null ? "not running" : `pid ${d.daemon}`}`)
      if (d.network) yield* Console.log(`  network: ${d.network.name} ${d.network.subnet} (${d.network.containers} container(s))`)
      yield* Console.log(d.chain ? `  chain:   ${d.chain.name} (${d.chain.jumps} INPUT jump(s))` : "  chain:   none (egress_lockdown off, or not installed)")
    }
    for (const line of fixed) yield* Console.log(line)
    for (const c of chat) {
      yield* Console.log(`chat ${c.provider} (connection ${c.connection}): ${c.ok ? "ok" : "FAILING"} — ${c.detail}`)
      for (const ch of c.channels) {
        const who = ch.worker_exists ? ch.worker : `${ch.worker} (NO SUCH WORKER: roster worker add ${ch.worker})`
        yield* Console.log(`  channel ${ch.id} → ${who}; ${ch.allow_users === 0 ? "no one in allow_users yet (every message is ignored)" : `${ch.allow_users} allowed user(s)`}`)
      }
    }
    if (!fix && found.some((d) => d.stale)) yield* Console.log("\nremove what is stale with: roster doctor --fix")
  })).pipe(Command.withDescription(
    "List roster's docker networks and iptables chains on this host, the deployment each belongs to, and whether its daemon runs. " +
      "--fix removes the stale ones (a stale chain can cut a box off from its gateway). " +
      "Each [[chat]] connection is tried with the service's auth call, and each channel's worker shown."
  ))
