import { Option, Schema } from "effect"
import { PREFLIGHT_EXIT, PREFLIGHT_PATH, PreflightResult } from "../contract/preflight.js"

export { PREFLIGHT_EXIT }
export type { PreflightResult }

/** How long the direct connection out may take before it counts as refused (ms). */
const PROBE_MS = 300

// The checks in node where the image has it (pi's image), else busybox's nc (the scripted
// image; its static wget crashes, and its nc quits at the end of its input, so a request goes
// in through a fifo held open until nc has the answer — not nc -e, whose child's reads of the
// socket fail with EAGAIN under gVisor). Locked means: the gateway answers /healthz as
// this deployment, and a direct connection to the probe address ([box] preflight_probe) does
// not open. (On an internal network the packets are dropped, so "does not open" is a timeout.)
// The result goes to the gateway (POST ${PREFLIGHT_PATH} with the run token), which holds the
// run's requests until it is in; a failure is printed too (a roster_preflight line), so the
// runner stops the box even when the gateway never heard it.
const NODE_CHECK = `
const http = require("http"), net = require("net")
const [host, port] = process.env.ROSTER_GATEWAY.split(":")
const token = decodeURIComponent(new URL(process.env.HTTP_PROXY).username)
const probe = process.env.ROSTER_PREFLIGHT_PROBE
// Its own agent: with NODE_USE_ENV_PROXY the global one would send these through the proxy (the gateway) as requests to forward.
const agent = new http.Agent()
const line = (ok, check, detail) => console.log(JSON.stringify({ type: "roster_preflight", ok, check, detail }))
const say = (ok, check, detail) => {
  if (!ok) line(ok, check, detail)
  const body = JSON.stringify({ ok, check, detail })
  const untaken = (why) => { if (ok) line(false, "gateway", "the gateway at " + process.env.ROSTER_GATEWAY + " did not take the preflight report (" + why + ")"); process.exit(0) }
  const req = http.request({ host, port, method: "POST", path: "${PREFLIGHT_PATH}", timeout: 5000, agent,
    headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), authorization: "Bearer " + token } }, (res) => {
    res.resume()
    res.on("end", () => (res.statusCode === 200 ? process.exit(0) : untaken("HTTP " + res.statusCode)))
  })
  req.on("timeout", () => req.destroy(new Error("no answer in 5 s")))
  req.on("error", (e) => untaken(e.code || e.message))
  req.end(body)
}
const req = http.get({ host, port, path: "/healthz", timeout: 5000, agent }, (res) => {
  let body = ""
  res.on("data", (c) => (body += c))
  res.on("end", () => {
    let id
    try { id = JSON.parse(body).deployment_id } catch {}
    if (id !== process.env.ROSTER_DEPLOYMENT_ID) return say(false, "gateway", "the gateway at " + process.env.ROSTER_GATEWAY + " answers for another deployment (" + (id || "unknown") + ")")
    const s = net.connect(Number(probe.slice(probe.lastIndexOf(":") + 1)), probe.slice(0, probe.lastIndexOf(":")))
    let done = false
    const once = (ok, check, detail) => { if (!done) { done = true; s.destroy(); say(ok, check, detail) } }
    const locked = () => once(true, "all", "gateway answers, no way out to " + probe)
    const timer = setTimeout(locked, ${PROBE_MS})
    s.on("connect", () => { clearTimeout(timer); once(false, "egress", "a direct connection to " + probe + " opened: the box has a way out around the gateway") })
    s.on("error", () => { clearTimeout(timer); locked() })
  })
})
req.on("timeout", () => req.destroy(new Error("no answer in 5 s")))
// Unreachable: nowhere to report to, so only the line says it.
req.on("error", (e) => { line(false, "gateway", "the gateway at " + process.env.ROSTER_GATEWAY + " does not answer (" + (e.code || e.message) + ")"); process.exit(0) })
`

const SHELL_CHECK = `
tok=\${HTTP_PROXY#*://}; tok=\${tok%%:*}
line() { printf '{"type":"roster_preflight","ok":%s,"check":"%s","detail":"%s"}\\n' "$1" "$2" "$3"; }
ask() {
  rm -f /tmp/.roster-rq /tmp/.roster-ra; mkfifo /tmp/.roster-rq
  nc -w 5 "\${ROSTER_GATEWAY%:*}" "\${ROSTER_GATEWAY##*:}" </tmp/.roster-rq >/tmp/.roster-ra 2>/dev/null & nc_pid=$!
  { printf "$@"; while kill -0 $nc_pid 2>/dev/null; do usleep 10000; done; } >/tmp/.roster-rq
  cat /tmp/.roster-ra; rm -f /tmp/.roster-rq /tmp/.roster-ra
}
say() {
  [ "$1" = true ] || line "$@"
  body="{\\"ok\\":$1,\\"check\\":\\"$2\\",\\"detail\\":\\"$3\\"}"
  case "$(ask 'POST ${PREFLIGHT_PATH} HTTP/1.0\\r\\nHost: roster\\r\\nAuthorization: Bearer %s\\r\\nContent-Type: application/json\\r\\nContent-Length: %s\\r\\n\\r\\n%s' "$tok" "\${#body}" "$body")" in
    "HTTP/1."?" 200"*) ;;
    *) [ "$1" = true ] && line false gateway "the gateway at $ROSTER_GATEWAY did not take the preflight report" ;;
  esac
  exit 0
}
health=$(ask 'GET /healthz HTTP/1.0\\r\\nHost: roster\\r\\n\\r\\n')
case "$health" in HTTP/*) ;; *) line false gateway "the gateway at $ROSTER_GATEWAY does not answer"; exit 0 ;; esac
case "$health" in *"\\"deployment_id\\":\\"$ROSTER_DEPLOYMENT_ID\\""*) ;; *) say false gateway "the gateway at $ROSTER_GATEWAY answers for another deployment" ;; esac
rm -f /tmp/.roster-probe
( nc -w 1 "\${ROSTER_PREFLIGHT_PROBE%:*}" "\${ROSTER_PREFLIGHT_PROBE##*:}" </dev/null >/dev/null 2>&1 && : > /tmp/.roster-probe ) &
sleep ${PROBE_MS / 1000}; kill $! 2>/dev/null
[ -e /tmp/.roster-probe ] && { rm -f /tmp/.roster-probe; say false egress "a direct connection to $ROSTER_PREFLIGHT_PROBE opened: the box has a way out around the gateway"; }
say true all "gateway answers, no way out to $ROSTER_PREFLIGHT_PROBE"
`

/**
 * What runs in the box beside pi: the egress self-test, in the background while pi starts (its
 * stdin is never the check's). The gateway holds the run's requests until the check reports, so
 * nothing leaves the box before it passes; a failure has the box killed (exit ${PREFLIGHT_EXIT}) —
 * so a box whose gateway is unreachable, or that could reach out around it, fails at once with
 * the reason instead of the agent timing out later.
 */
export const PREFLIGHT_SCRIPT = `set -u
if command -v node >/dev/null 2>&1; then node -e '${NODE_CHECK.replace(/'/g, `'"'"'`)}' </dev/null &
else ( ${SHELL_CHECK.trim()}
) </dev/null &
fi
exec "$@"`

/** The box's command: the self-test, then pi with its arguments. */
export const withPreflight = (command: ReadonlyArray<string>): Array<string> => ["/bin/sh", "-c", PREFLIGHT_SCRIPT, "roster-preflight", ...command]

/** A failed check's line in the box's output (the runner stops the box on it). */
export const PreflightLine = Schema.parseJson(Schema.Struct({
  type: Schema.Literal("roster_preflight"),
  ...PreflightResult.fields
}))

/** The failed check a preflight line of the box's output says, if it says one (a passing line is not the box's to say). */
export const failedPreflightLine = (line: string): Option.Option<PreflightResult> =>
  Schema.decodeUnknownOption(PreflightLine)(line).pipe(Option.filter((p) => !p.ok), Option.map(({ check, detail, ok }) => ({ ok, check, detail })))

/** The fix for a failed self-test, by what failed. */
export const preflightFix = (check: string, network: string) =>
  check === "gateway"
    ? "check that this deployment's daemon runs (roster server status) and that no stale rule cuts its boxes off (roster doctor --fix)"
    : `the box network has a way out; remove it and let roster recreate it: docker network rm ${network}`

/** A failed self-test as the run's error: what failed and how to fix it; undefined when it passed or never ran. */
export const preflightError = (result: PreflightResult | undefined, network: string) =>
  result && !result.ok ? `the box's preflight failed: ${result.detail} — ${preflightFix(result.check, network)}` : undefined
