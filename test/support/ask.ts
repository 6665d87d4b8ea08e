import * as fs from "node:fs"
import * as path from "node:path"
import type { Deployment } from "./deployment.js"

// Each ask CONNECTs through the gateway with the run's token and keeps the request open (a held
// one waits), then prints what came back once a status line is in: `--- <name>` and the answer.
const ASK = `T=\${HTTP_PROXY#http://}; T=\${T%%:*}; P=\${HTTP_PROXY##*:}
A=$(printf '%s:x' "$T" | base64 | tr -d '\\n')
ask() {
  ( { printf 'CONNECT %s HTTP/1.1\\r\\nProxy-Authorization: Basic %s\\r\\n\\r\\n' "$1" "$A"; sleep 60; } | nc host.docker.internal "$P" > /tmp/$2 2>&1 & )
  i=0; while [ $i -lt 600 ] && ! grep -q "^HTTP/1.1 [0-9]" /tmp/$2; do usleep 100000; i=$((i+1)); done
  usleep 500000; echo "--- $2"; cat /tmp/$2; echo
}
`

/**
 * A prompt for the scripted engine that asks, in order, for each `host:port name` (a script in
 * alice's store: the deployment's, or under [cluster] the one in the fleet's shared folder).
 */
export const askScript = (d: Deployment, name: string, asks: ReadonlyArray<string>, shared?: string) => {
  const dir = shared ? path.join(shared, "stores", "alice") : d.file("data", "stores", "alice")
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, name), `${ASK}${asks.map((a) => `ask ${a}`).join("\n")}\n`, { mode: 0o755 })
  return `!sh /pihome/store/${name}`
}

/** What each ask got back, by its name, from a run's transcript. */
export const answersOf = (stdout: string): Record<string, string> =>
  Object.fromEntries(stdout.split("--- ").slice(1).map((part) => [part.slice(0, part.indexOf("\n")), part]))

export interface Held { id: string; worker: string; method: string; host: string; port: number; path: string | null; run_id: string }

/** The next request the gateway holds that is not in `seen` (60 s at most). */
export const nextHeld = async (d: Deployment, seen: Set<string>) => {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const fresh = (JSON.parse((await d.roster(["approvals", "--json"])).stdout) as Array<Held>).find((a) => !seen.has(a.id))
    if (fresh) {
      seen.add(fresh.id)
      return fresh
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error("no request was held within 60 s")
}
