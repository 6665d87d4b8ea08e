import { Schema } from "effect"

/** The exit code of a box whose preflight failed (pi never started). */
export const PREFLIGHT_EXIT = 97

/** How long the direct connection out may take before it counts as refused (ms). */
const PROBE_MS = 300

// The checks in node where the image has it (pi's image), else busybox's nc (the scripted
// image; its static wget crashes, and its nc quits at the end of its input, so the request goes
// in through a fifo held open until nc has the answer — not nc -e, whose child's reads of the
// socket fail with EAGAIN under gVisor). Locked means: the gateway answers /healthz as
// this deployment, and a direct connection to the probe address ([box] preflight_probe) does
// not open. (On an internal network the packets are dropped, so "does not open" is a timeout.)
const NODE_CHECK = `
const http = require("http"), net = require("net")
const say = (ok, check, detail) => { console.log(JSON.stringify({ type: "roster_preflight", ok, check, detail })); process.exit(ok ? 0 : ${PREFLIGHT_EXIT}) }
const [host, port] = process.env.ROSTER_GATEWAY.split(":")
const probe = process.env.ROSTER_PREFLIGHT_PROBE
// Its own agent: with NODE_USE_ENV_PROXY the global one would send this through the proxy (the gateway) as a request to forward.
const req = http.get({ host, port, path: "/healthz", timeout: 5000, agent: new http.Agent() }, (res) => {
  let body = ""
  res.on("data", (c) => (body += c))
  res.on("end", () => {
    let id
    try { id = JSON.parse(body).deployment_id } catch {}
    if (id !== process.env.ROSTER_DEPLOYMENT_ID) say(false, "gateway", "the gateway at " + process.env.ROSTER_GATEWAY + " answers for another deployment (" + (id || "unknown") + ")")
    const s = net.connect(Number(probe.slice(probe.lastIndexOf(":") + 1)), probe.slice(0, probe.lastIndexOf(":")))
    const locked = () => { s.destroy(); say(true, "all", "gateway answers, no way out to " + probe) }
    const timer = setTimeout(locked, ${PROBE_MS})
    s.on("connect", () => { clearTimeout(timer); say(false, "egress", "a direct connection to " + probe + " opened: the box has a way out around the gateway") })
    s.on("error", () => { clearTimeout(timer); locked() })
  })
})
req.on("timeout", () => req.destroy(new Error("no answer in 5 s")))
req.on("error", (e) => say(false, "gateway", "the gateway at " + process.env.ROSTER_GATEWAY + " does not answer (" + (e.code || e.message) + ")"))
`

const SHELL_CHECK = `
say() { printf '{"type":"roster_preflight","ok":%s,"check":"%s","detail":"%s"}\\n' "$1" "$2" "$3"; [ "$1" = true ] || exit ${PREFLIGHT_EXIT}; }
rm -f /tmp/.roster-rq /tmp/.roster-ra; mkfifo /tmp/.roster-rq
nc -w 5 "\${ROSTER_GATEWAY%:*}" "\${ROSTER_GATEWAY##*:}" </tmp/.roster-rq >/tmp/.roster-ra 2>/dev/null & nc_pid=$!
{ printf 'GET /healthz HTTP/1.0\\r\\nHost: roster\\r\\n\\r\\n'; while kill -0 $nc_pid 2>/dev/null; do usleep 10000; done; } >/tmp/.roster-rq
body=$(cat /tmp/.roster-ra); rm -f /tmp/.roster-rq /tmp/.roster-ra
case "$body" in HTTP/*) ;; *) say false gateway "the gateway at $ROSTER_GATEWAY does not answer" ;; esac
case "$body" in *"\\"deployment_id\\":\\"$ROSTER_DEPLOYMENT_ID\\""*) ;; *) say false gateway "the gateway at $ROSTER_GATEWAY answers for another deployment" ;; esac
rm -f /tmp/.roster-probe
( nc -w 1 "\${ROSTER_PREFLIGHT_PROBE%:*}" "\${ROSTER_PREFLIGHT_PROBE##*:}" </dev/null >/dev/null 2>&1 && : > /tmp/.roster-probe ) &
sleep ${PROBE_MS / 1000}; kill $! 2>/dev/null
[ -e /tmp/.roster-probe ] && { rm -f /tmp/.roster-probe; say false egress "a direct connection to $ROSTER_PREFLIGHT_PROBE opened: the box has a way out around the gateway"; }
say true all "gateway answers, no way out to $ROSTER_PREFLIGHT_PROBE"
`

/**
 * What runs in the box before pi: the egress self-test. It prints one `roster_preflight` line
 * (the first of the transcript) and either execs pi or exits ${PREFLIGHT_EXIT} — so a box whose
 * gateway is unreachable, or that could reach out around it, fails at once with the reason
 * instead of the agent timing out later.
 */
export const PREFLIGHT_SCRIPT = `set -u
if command -v node >/dev/null 2>&1; then node -e '${NODE_CHECK.replace(/'/g, `'"'"'`)}' || exit $?
else ${SHELL_CHECK.trim()}
fi
exec "$@"`

/** The box's command: the self-test, then pi with its arguments. */
export const withPreflight = (command: ReadonlyArray<string>): Array<string> => ["/bin/sh", "-c", PREFLIGHT_SCRIPT, "roster-preflight", ...command]

export const PreflightLine = Schema.parseJson(Schema.Struct({
  type: Schema.Literal("roster_preflight"),
  ok: Schema.Boolean,
  check: Schema.String,
  detail: Schema.String
}))
export type PreflightResult = Omit<typeof PreflightLine.Type, "type">

/** The fix for a failed self-test, by what failed. */
export const preflightFix = (check: string, network: string) =>
  check === "gateway"
    ? "check that this deployment's daemon runs (roster server status) and that no stale rule cuts its boxes off (roster doctor --fix)"
    : `the box network has a way out; remove it and let roster recreate it: docker network rm ${network}`

/** A failed self-test as the run's error: what failed and how to fix it; undefined when it passed or never ran. */
export const preflightError = (result: PreflightResult | undefined, network: string) =>
  result && !result.ok ? `the box's preflight failed: ${result.detail} — ${preflightFix(result.check, network)}` : undefined
