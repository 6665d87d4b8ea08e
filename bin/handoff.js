// `roster worker run` handed to the running daemon (src/daemon/directRuns.ts): the daemon has the
// program loaded and warm, so the run does not wait ~0.5 s for this process to load it. The daemon
// runs what the CLI would and streams back every line the CLI would have printed; this file only
// asks, prints, forwards a Ctrl-C or SIGTERM, and exits with the run's code. Anything it does not
// recognise, or a daemon that is not there or of another build, and the CLI runs the command
// itself — nothing has started by then.
import { randomBytes } from "node:crypto"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"

/** The deployment this environment names (src/config/Paths.ts: ROSTER_HOME, else XDG): its config root and control socket. */
const deploymentOf = (env) => {
  const home = env.HOME && env.HOME.length > 0 ? env.HOME : os.homedir()
  if (env.ROSTER_HOME && env.ROSTER_HOME.length > 0) {
    const root = path.resolve(env.ROSTER_HOME)
    return { home, config: path.join(root, "config"), socket: path.join(root, "state", "control.sock") }
  }
  const xdg = (name, fallback) => (env[name] && path.isAbsolute(env[name]) ? env[name] : path.join(home, fallback))
  return { home, config: path.join(xdg("XDG_CONFIG_HOME", ".config"), "roster"), socket: path.join(xdg("XDG_STATE_HOME", ".local/state"), "roster", "control.sock") }
}

/**
 * `worker run`'s words after `run`, read as the program reads them (src/cli/workerCommand.ts with
 * @effect/cli, which takes options wherever they stand): `--ceiling <minutes>` and `--channel <name>`
 * (also `--x=v`), the worker, then the prompt's words. Undefined for anything else (another flag or
 * a word that looks like one, an option twice or without its value, a ceiling that is not a plain
 * number, no prompt): the program then reads them and says what is wrong.
 */
export const readRunArgs = (words) => {
  const options = {}
  const positional = []
  for (let i = 0; i < words.length; i++) {
    const word = words[i]
    if (!word.startsWith("-")) {
      positional.push(word)
      continue
    }
    const eq = word.indexOf("=")
    const flag = eq === -1 ? word : word.slice(0, eq)
    if ((flag !== "--ceiling" && flag !== "--channel") || flag.slice(2) in options) return undefined
    const value = eq === -1 ? words[++i] : word.slice(eq + 1)
    if (value === undefined || value.startsWith("-")) return undefined
    options[flag.slice(2)] = value
  }
  const [worker, ...prompt] = positional
  if (worker === undefined || prompt.length === 0) return undefined
  if (options.ceiling !== undefined && !/^\d+(\.\d+)?$/.test(options.ceiling)) return undefined
  return {
    worker,
    prompt: prompt.join(" "),
    ...(options.ceiling !== undefined ? { ceiling_min: Number(options.ceiling) } : {}),
    channel: options.channel ?? null
  }
}

const SGR = /\x1b\[[0-9;]*m/g
const colourOn = (stream) => stream.isTTY === true && (process.env.NO_COLOR ?? "") === ""

/** One request to the control socket; resolves with the response (its body unread). */
const ask = (socket, route, body) =>
  new Promise((resolve, reject) => {
    const text = JSON.stringify(body)
    const req = http.request({ socketPath: socket, path: route, method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) } }, resolve)
    req.on("error", reject)
    req.end(text)
  })

/**
 * Runs `worker run <words>` through the daemon. Resolves false when it did not start there (the
 * caller loads the program and runs it), else never: the process exits with the run's code.
 */
export const handOff = async (words, build) => {
  const run = readRunArgs(words)
  if (!run || !build || process.env.ROSTER_HANDOFF === "0" || process.env.ROSTER_TRACE) return false
  const { home, config, socket } = deploymentOf(process.env)
  const token = randomBytes(12).toString("hex")
  // A signal from here on is the run's: passed on once the daemon has it (the run ends as the CLI's
  // would, its closing lines still said); a second one leaves at once (the daemon still finishes the run's end).
  let signalled
  let started = false
  const interrupt = () => ask(socket, "/runs/direct/interrupt", { token, signal: signalled }).then((r) => r.resume(), () => undefined)
  const onSignal = (signal) => {
    if (signalled) process.exit(signal === "SIGTERM" ? 143 : 130)
    signalled = signal
    if (started) interrupt()
  }
  const onInt = () => onSignal("SIGINT")
  const onTerm = () => onSignal("SIGTERM")
  process.on("SIGINT", onInt)
  process.on("SIGTERM", onTerm)
  const notHere = () => {
    process.off("SIGINT", onInt)
    process.off("SIGTERM", onTerm)
    // Stopped before anything started: nothing to hand back to the program.
    if (signalled) process.exit(signalled === "SIGTERM" ? 143 : 130)
    return false
  }
  let res
  try {
    res = await ask(socket, "/runs/direct", {
      build, token, ...run,
      stdout_colour: colourOn(process.stdout),
      stderr_tty: process.stderr.isTTY === true,
      ...(process.stderr.columns ? { columns: process.stderr.columns } : {}),
      docker_host: process.env.DOCKER_HOST ?? null,
      home,
      config
    })
  } catch {
    return notHere() // no daemon here: the program says how to start one
  }
  if (res.statusCode !== 200) {
    res.resume()
    return notHere() // another build, another engine or home: the program runs it
  }
  started = true
  if (signalled) interrupt()
  const out = colourOn(process.stdout)
  const err = colourOn(process.stderr)
  let code
  const said = (line) => {
    if (line.length === 0) return
    const s = JSON.parse(line.toString("utf8"))
    if (typeof s.o === "string") process.stdout.write(out ? s.o : s.o.replace(SGR, ""))
    else if (typeof s.e === "string") process.stderr.write(err ? s.e : s.e.replace(SGR, ""))
    else if (typeof s.x === "number") code = s.x
  }
  // Lines kept as bytes until whole: a long one (a box's 1 MiB message) is one copy, not a string rebuilt per chunk.
  let pending = []
  res.on("data", (chunk) => {
    let from = 0
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, from)) {
      pending.push(chunk.subarray(from, nl))
      said(pending.length === 1 ? pending[0] : Buffer.concat(pending))
      pending = []
      from = nl + 1
    }
    if (from < chunk.length) pending.push(chunk.subarray(from))
  })
  let ended = false
  const end = () => {
    if (ended) return
    ended = true
    said(Buffer.concat(pending))
    pending = []
    if (code === undefined) {
      process.stderr.write("roster: the daemon stopped answering before the run ended (its box is killed with it): see roster server status\n")
      code = 1
    }
    // stdout may be a pipe still draining: exit once what was written is out.
    process.stdout.write("", () => process.exit(code))
  }
  res.on("end", end)
  res.on("error", end)
  return new Promise(() => undefined)
}
