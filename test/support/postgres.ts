import { execFileSync, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { freePort } from "./deployment.js"

/** The server's second loopback address (see startPostgres). */
export const SECOND_ADDRESS = "127.0.0.2"

/** A real Postgres of Debian's (`postgresql`, installed by scripts/ensure-host.sh), run for one test file. */
export interface Postgres {
  /** The database URL without a password (the password goes by PGPASSWORD or the vault, never in org.toml). */
  readonly url: string
  readonly password: string
  readonly port: number
  /** Stops the server (fast shutdown) and starts it again on the same port and data: an outage. */
  readonly stop: () => void
  readonly start: () => void
  /** Runs SQL through psql as the test's role; the result as text, rows one per line. */
  readonly sql: (query: string) => string
  /**
   * A client (psql, a process of its own) that opens a transaction, runs `query` in it (a row
   * lock, say) and then holds it open: its pid (to SIGSTOP it, as a frozen node) and its release.
   */
  readonly hold: (query: string) => Promise<{ readonly pid: number; readonly release: () => void }>
  /** Stops the server and removes its folder. */
  readonly remove: () => void
}

const binDir = () => {
  const base = "/usr/lib/postgresql"
  const versions = fs.existsSync(base) ? fs.readdirSync(base).filter((v) => fs.existsSync(path.join(base, v, "bin/initdb"))) : []
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0]
  if (!newest) {
    throw new Error("no Postgres server here (no /usr/lib/postgresql/*/bin/initdb): install it with scripts/ensure-host.sh " +
      "(as root: apt-get install -y postgresql)")
  }
  return path.join(base, newest, "bin")
}

/** Runs a Postgres binary as the `postgres` user: the server refuses to run as root. */
const asPostgres = (bin: string, args: ReadonlyArray<string>) => {
  const user = os.userInfo().uid === 0 ? ["runuser", "-u", "postgres", "--"] : []
  const [cmd, ...rest] = [...user, bin, ...args]
  const r = spawnSync(cmd!, rest, { encoding: "utf8" })
  if (r.status !== 0) throw new Error(`${path.basename(bin)} ${args.join(" ")} failed (${r.status}): ${r.stderr || r.stdout}`)
  return r.stdout
}

/**
 * A fresh cluster in a temp folder owned by `postgres`, listening on 127.0.0.1 at a free port
 * with password (scram) authentication, one role `roster` owning one database `roster`.
 */
export const startPostgres = async (): Promise<Postgres> => {
  const bin = binDir()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-pg-"))
  const data = path.join(dir, "data")
  const password = `pw-${Math.random().toString(36).slice(2)}`
  const pwfile = path.join(dir, "pw")
  fs.writeFileSync(pwfile, `${password}\n`)
  if (os.userInfo().uid === 0) execFileSync("chown", ["-R", "postgres:postgres", dir])
  asPostgres(path.join(bin, "initdb"), ["-D", data, "-U", "roster", "--pwfile", pwfile, "--auth", "scram-sha-256", "-E", "UTF8", "--no-sync"])
  // A second loopback address, 127.0.0.2, for one client to be cut off from it alone (an iptables
  // rule on that address drops one node's packets and no other's).
  fs.appendFileSync(path.join(data, "pg_hba.conf"), `host all all ${SECOND_ADDRESS}/32 scram-sha-256\n`)
  const port = await freePort()
  // PG_EXTRA_OPTS: more server settings for a profiling run (bench/spikes/claimProfile.ts reads pg_stat_statements).
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1,${SECOND_ADDRESS} -c fsync=off -c max_connections=200 ${process.env.PG_EXTRA_OPTS ?? ""}`
  const start = () => {
    asPostgres(path.join(bin, "pg_ctl"), ["-D", data, "-o", opts, "-l", path.join(dir, "log"), "-w", "-t", "60", "start"])
  }
  const stop = () => {
    asPostgres(path.join(bin, "pg_ctl"), ["-D", data, "-m", "fast", "-w", "stop"])
  }
  start()
  const psql = (db: string, query: string) => {
    const r = spawnSync("psql", ["-h", "127.0.0.1", "-p", String(port), "-U", "roster", "-d", db, "-At", "-v", "ON_ERROR_STOP=1", "-c", query], {
      encoding: "utf8",
      env: { ...process.env, PGPASSWORD: password }
    })
    if (r.status !== 0) throw new Error(`psql: ${r.stderr}`)
    return r.stdout.trim()
  }
  psql("postgres", "CREATE DATABASE roster")
  return {
    url: `postgres://roster@127.0.0.1:${port}/roster`,
    password,
    port,
    stop,
    start,
    sql: (query) => psql("roster", query),
    hold: (query) =>
      new Promise((resolve, reject) => {
        const child = spawn("psql", ["-h", "127.0.0.1", "-p", String(port), "-U", "roster", "-d", "roster", "-At", "-v", "ON_ERROR_STOP=1"], {
          env: { ...process.env, PGPASSWORD: password },
          stdio: ["pipe", "pipe", "pipe"]
        })
        let out = ""
        child.stdout.on("data", (c: Buffer) => {
          out += c.toString()
          if (out.includes("HELD")) resolve({ pid: child.pid ?? -1, release: () => child.kill("SIGKILL") })
        })
        child.once("exit", (code) => reject(new Error(`psql holding a transaction exited (${code}) before it held: ${out}`)))
        child.stdin.write(`BEGIN;\n${query};\nSELECT 'HELD';\n`)
      }),
    remove: () => {
      try {
        stop()
      } catch {
        // already stopped
      }
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}
