import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import * as os from "node:os"
import { probeReport } from "../box/preflightProbe.js"
import { fixStale, surveyLockdown } from "../box/docker/lockdownSurvey.js"
import { checkChats } from "../chat/doctor.js"
import { checkLogins } from "../vault/loginCheck.js"
import { ENGINE_HOST_FILES, registerRunsc, type RuntimeSurvey, surveyRuntime } from "../box/docker/runtimeHost.js"
import { isMissingOrg, OrgConfig } from "../config/OrgConfig.js"
import { Paths } from "../config/Paths.js"
import { checkFleet, fleetCheckLines } from "../fleet/doctor.js"

const fix = Options.boolean("fix").pipe(Options.withDescription(
  "remove what is stale (chains and their jumps, networks no container is on) and, as root, register an installed gVisor (runsc) with Docker"
))

/** `[box] preflight_probe` as org.toml sets it (none: roster picks). */
const configuredProbe = Effect.flatMap(OrgConfig, (c) => c.snapshot).pipe(
  Effect.map((o) => o.box.preflight_probe),
  // An org.toml that does not read is doctor's own first line (orgTomlCheck); the probe then is roster's pick.
  Effect.orElseSucceed(() => undefined)
)

const boxRuntimeSetting = Effect.flatMap(OrgConfig, (c) => c.snapshot).pipe(
  Effect.map((o) => o.box.runtime),
  // As above: doctor's first line says what is wrong with org.toml; the runtime checks go on with the default.
  Effect.orElseSucceed(() => "auto" as const)
)

/** gVisor's state, and with --fix its registration when it is installed but the engine lacks it. */
const checkRuntime = (fix: boolean) =>
  Effect.gen(function*() {
    const before = yield* surveyRuntime(yield* boxRuntimeSetting)
    if (!fix || before.registered || before.installed === null) return { runtime: before, fixed: [] as Array<string> }
    const done = yield* registerRunsc(ENGINE_HOST_FILES).pipe(Effect.catchTag("RegisterError", (e) => Effect.succeed(`could not register gVisor: ${e.message}`)))
    return { runtime: yield* surveyRuntime(before.setting), fixed: [done] }
  })

const runtimeLines = (r: RuntimeSurvey): Array<string> => {
  const under = r.boxes_run_under === null
    ? `boxes cannot start: [box] runtime = "runsc" and the engine has no runsc`
    : `boxes run under ${r.boxes_run_under}${r.boxes_run_under === "runsc" ? " (gVisor)" : " (the host's kernel)"} ([box] runtime = "${r.setting}")`
  const lines = [`runtime: ${under}`, `  runsc:   ${r.installed === null ? "not installed (apt-get install runsc)" : `installed at ${r.installed}`}, ${r.registered ? "registered with Docker" : "NOT registered with Docker"}`]
  if (!r.registered) {
    lines.push(`  register it: add to ${ENGINE_HOST_FILES.daemonJson} (keeping what it has) ${r.daemon_json}`,
      `  then reload dockerd (kill -HUP $(cat ${ENGINE_HOST_FILES.pidFile})) — or, as root: roster doctor --fix`)
  }
  return lines
}
/** Under [cluster], the fleet's database, schema, shared folder, clocks and nodes; null on a machine on its own. */
const fleetCheck = Effect.flatMap(OrgConfig, (c) => c.snapshot).pipe(
  Effect.option,
  Effect.flatMap((org) => (org._tag === "Some" && org.value.cluster ? checkFleet(org.value, org.value.cluster) : Effect.succeed(null)))
)

/**
 * Whether this deployment's org.toml reads: a check of its own, so the others' defaults are never
 * taken for its settings. None at all is no failure (doctor runs before roster init too).
 */
export const orgTomlCheck = Effect.flatMap(OrgConfig, (c) => c.snapshot).pipe(
  Effect.as({ ok: true as const }),
  Effect.catchAll((e) =>
    Effect.succeed(isMissingOrg(e) ? { ok: true as const, absent: true as const } : { ok: false as const, detail: e.message })
  )
)

const json = Options.boolean("json").pipe(Options.withDescription("print JSON for scripts"))

export const doctorCommand = Command.make("doctor", { fix, json }, ({ fix, json }) =>
  Effect.gen(function*() {
    const orgToml = yield* orgTomlCheck
    const found = yield* surveyLockdown
    const runtime = yield* checkRuntime(fix)
    const fixed = [...(fix ? yield* fixStale(found) : []), ...runtime.fixed]
    const chat = yield* checkChats
    const fleet = yield* fleetCheck
    const logins = yield* checkLogins
    const preflight = probeReport(yield* configuredProbe, os.networkInterfaces())
    if (json) return yield* Console.log(JSON.stringify({ org_toml: orgToml, lockdown: found, runtime: runtime.runtime, preflight, fixed, chat, logins, ...(fleet ? { fleet } : {}) }, null, 2))
    const ours = (yield* Paths).config
    if (!orgToml.ok) yield* Console.log(`org.toml: FAILING — ${orgToml.detail} (the checks below use the defaults where it would say)`)
    if (found.length === 0) yield* Console.log("no roster networks or iptables chains on this host")
    for (const d of found) {
      const whose = d.deployment === null ? "(an older roster's, shared)" : `${d.deployment}${d.deployment === ours ? " (this deployment)" : ""}`
      yield* Console.log(`${d.stale ? "STALE " : ""}deployment ${whose}`)
      yield* Console.log(`  daemon:  ${d.daemon === null ? "not running" : `pid ${d.daemon}`}`)
      if (d.network) yield* Console.log(`  network: ${d.network.name} ${d.network.subnet} (${d.network.containers} container(s))`)
      yield* Console.log(d.chain ? `  chain:   ${d.chain.name} (${d.chain.jumps} INPUT jump(s))` : "  chain:   none (egress_lockdown off, or not installed)")
    }
    for (const line of runtimeLines(runtime.runtime)) yield* Console.log(line)
    yield* Console.log(`preflight probe: ${preflight.probe} — ${preflight.why}`)
    for (const line of fixed) yield* Console.log(line)
    for (const c of chat) {
      yield* Console.log(`chat ${c.provider} (connection ${c.connection}): ${c.ok ? "ok" : "FAILING"} — ${c.detail}`)
      for (const ch of c.channels) {
        const who = ch.worker_exists ? ch.worker : `${ch.worker} (NO SUCH WORKER: roster worker add ${ch.worker})`
        yield* Console.log(`  channel ${ch.id} → ${who}; ${ch.allow_users === 0 ? "no one in allow_users yet (every message is ignored)" : `${ch.allow_users} allowed user(s)`}`)
      }
    }
    for (const l of logins) {
      yield* Console.log(`login ${l.name}: ${l.stuck ? "EXPIRED" : l.expired ? "expired" : "ok"}${l.expires_at ? ` (access token ${l.expired ? "ended" : "ends"} ${l.expires_at})` : ""}${l.fix ? ` — ${l.fix}` : ""}`)
    }
    for (const line of fleet ? fleetCheckLines(fleet) : []) yield* Console.log(line)
    if (!fix && found.some((d) => d.stale)) yield* Console.log("\nremove what is stale with: roster doctor --fix")
  })).pipe(Command.withDescription(
    "List roster's docker networks and iptables chains on this host, the deployment each belongs to, and whether its daemon runs. " +
      "--fix removes the stale ones (a stale chain can cut a box off from its gateway). " +
      "Says which runtime boxes run under and whether gVisor (runsc) is installed and registered, with the daemon.json lines; " +
      "--fix as root registers it and reloads dockerd. " +
      "Each [[chat]] connection is tried with the service's auth call, and each channel's worker shown. " +
      "Each subscription login in the vault: when its access token ends, and one that has expired with no way to renew it, with the fix. " +
      "Under [cluster]: the fleet's database (reachable, its schema version), the shared folder (writable, the same one on every node), " +
      "clock skew between the nodes, config files that differ between them, this node's [cluster] listen (an address of this machine on no box network) " +
      "and whether each live node's runner RPC answers this machine's signed call."
  ))
