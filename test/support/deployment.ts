import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
export const ROSTER_BIN = path.join(root, "bin/roster.js")
export const TEST_IMAGE = "roster-scripted:test"
/** A fake host key: the tests check it never reaches a box. */
export const HOST_KEY = "sk-ant-integration-REAL-host-key-0123456789"

export interface Result {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = net.createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port
      s.close(() => resolve(port))
    })
  })

export const collect = (child: ChildProcess) =>
  new Promise<Result>((resolve) => {
    let stdout = ""
    let stderr = ""
    child.stdout?.on("data", (c: Buffer) => (stdout += c.toString()))
    child.stderr?.on("data", (c: Buffer) => (stderr += c.toString()))
    child.once("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
  })

/** `roster talk <worker>` left running, its stdin open for what the test types: what it printed so far, and its end. */
export const talkTo = (worker: string, env: NodeJS.ProcessEnv) => {
  const child = spawn(ROSTER_BIN, ["talk", worker], { env, stdio: ["pipe", "pipe", "pipe"] })
  let out = ""
  child.stdout?.on("data", (c: Buffer) => (out += c.toString()))
  return { child, printed: () => out, exited: collect(child) }
}

/** Longer than any one command of the suite takes, shorter than a test's own time limit. */
const COMMAND_LIMIT_MS = 150_000

/**
 * A command's result; one that has not ended in {@link COMMAND_LIMIT_MS} is killed and said to
 * have hung, with what it printed: a process that never exits fails its test's assertions with
 * the reason, not the test's time limit with none.
 */
const collectOrKill = async (child: ChildProcess, args: ReadonlyArray<string>): Promise<Result> => {
  const timer = setTimeout(() => child.kill("SIGKILL"), COMMAND_LIMIT_MS)
  const r = await collect(child).finally(() => clearTimeout(timer))
  return r.signal === "SIGKILL"
    ? { ...r, stderr: `${r.stderr}\n[test harness: roster ${args.join(" ")} did not exit in ${COMMAND_LIMIT_MS / 1000} s and was killed]` }
    : r
}

export interface Deployment {
  readonly home: string
  readonly env: NodeJS.ProcessEnv
  readonly port: number
  readonly spawn: (args: ReadonlyArray<string>) => ChildProcess
  readonly roster: (args: ReadonlyArray<string>) => Promise<Result>
  /** org.toml anew: the engine and gateway port, `extra`, and the runtime (the deployment's unless given; none: roster picks). */
  readonly writeOrg: (extra: string, engine?: string, runtime?: string) => void
  readonly file: (...parts: Array<string>) => string
  readonly stop: () => Promise<void>
}

/**
 * `[box] runtime` set in an org.toml's text, when a test pins one: inside its [box] table when it has
 * one, else in a table of its own. A test deployment gets what a user gets unless it says otherwise:
 * the runtime roster picks (gVisor, which CI registers) and warm boxes on. A test that pins runc or
 * turns warm boxes off says why where it does.
 */
export const withRuntime = (toml: string, runtime: string | undefined, box: ReadonlyArray<string> = []) => {
  const lines = [...(runtime === undefined ? [] : [`runtime = "${runtime}"`]), ...box]
  if (lines.length === 0) return toml
  return /^\[box\]$/m.test(toml) ? toml.replace(/^\[box\]$/m, `[box]\n${lines.join("\n")}`) : `${toml}\n[box]\n${lines.join("\n")}\n`
}

/** What a deployment's processes get besides the defaults, and whether its daemon starts at once. */
export interface DeploymentOptions {
  readonly env?: Readonly<Record<string, string>>
  readonly start?: boolean
  /**
   * `[box]` lines every org.toml of the deployment keeps (e.g. `warm = "off"` for a suite of the cold
   * box itself): a test that turns a default off says so here, with why, beside its call.
   */
  readonly box?: ReadonlyArray<string>
}

/** A deployment in a temp ROSTER_HOME driven through the real CLI: init, org.toml, the real daemon. */
export const makeDeployment = async (orgExtra = "", image = TEST_IMAGE, runtime: string | undefined = undefined, options: DeploymentOptions = {}): Promise<Deployment> => {
  // Named for this test run (globalSetup), so its teardown can tell this run's boxes from another's.
  const home = fs.mkdtempSync(path.join(os.tmpdir(), `roster-it-${process.env.ROSTER_TEST_RUN ?? "adhoc"}-`))
  const port = await freePort()
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ROSTER_HOME: home,
    HOME: path.join(home, "user"),
    ANTHROPIC_API_KEY: HOST_KEY,
    ...options.env
  }
  fs.mkdirSync(path.join(home, "user"), { recursive: true })
  const spawnRoster = (args: ReadonlyArray<string>) =>
    spawn(ROSTER_BIN, [...args], { env, stdio: ["ignore", "pipe", "pipe"] })
  const roster = (args: ReadonlyArray<string>) => collectOrKill(spawnRoster(args), args)
  // `extra` may have a [gateway] table of its own: the port goes into it.
  const writeOrg = (extra: string, engine = `[engine]\nimage = "${image}"`, boxRuntime: string | undefined = runtime) => {
    const body = /^\[gateway\]$/m.test(extra) ? extra.replace(/^\[gateway\]$/m, `[gateway]\nport = ${port}`) : `[gateway]\nport = ${port}\n${extra}`
    fs.writeFileSync(path.join(home, "config", "org.toml"), withRuntime(`${engine}\n${body}\n`, boxRuntime, options.box))
  }
  const init = await roster(["init"])
  if (init.code !== 0) throw new Error(`roster init failed: ${init.stderr}`)
  writeOrg(orgExtra)
  if (options.start !== false) {
    const started = await roster(["server", "start"])
    if (started.code !== 0) throw new Error(`roster server start failed:\n${started.stdout}\n${started.stderr}`)
  }
  return {
    home,
    env,
    port,
    spawn: spawnRoster,
    roster,
    writeOrg,
    file: (...parts) => path.join(home, ...parts),
    stop: async () => {
      await roster(["server", "stop"])
    }
  }
}
