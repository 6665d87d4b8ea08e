import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as crypto from "node:crypto"

/**
 * A stand-in "outside host" that never leaves this machine: a network namespace with a veth
 * pair, a TEST-NET-2 address routed to it, and a TCP listener inside that greets each client.
 */
export interface OutsideHost {
  readonly address: string
  readonly port: number
  readonly httpPort: number
  readonly greeting: string
  readonly close: () => void
}

const sh = (cmd: string, args: ReadonlyArray<string>) => execFileSync(cmd, [...args], { stdio: "pipe" }).toString()

export const makeOutsideHost = async (): Promise<OutsideHost> => {
  const id = crypto.randomBytes(3).toString("hex")
  const ns = `roster-t-${id}`
  const hostIf = `rth${id}`
  const nsIf = `rtn${id}`
  const address = "198.51.100.7"
  const port = 9099
  const httpPort = 9080
  const greeting = `hello-from-outside-${id}`
  sh("ip", ["netns", "add", ns])
  let listener: ChildProcess | undefined
  const close = () => {
    listener?.kill("SIGKILL")
    try {
      sh("ip", ["netns", "del", ns])
    } catch {
      // already gone
    }
    try {
      sh("ip", ["link", "del", hostIf])
    } catch {
      // removed with the namespace
    }
  }
  try {
    sh("ip", ["link", "add", hostIf, "type", "veth", "peer", "name", nsIf])
    sh("ip", ["link", "set", nsIf, "netns", ns])
    sh("ip", ["addr", "add", "198.51.100.1/24", "dev", hostIf])
    sh("ip", ["link", "set", hostIf, "up"])
    sh("ip", ["netns", "exec", ns, "ip", "addr", "add", `${address}/24`, "dev", nsIf])
    sh("ip", ["netns", "exec", ns, "ip", "link", "set", nsIf, "up"])
    sh("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "up"])
    const program = `
      const net = require("net"), http = require("http");
      net.createServer((s) => { s.on("error", () => {}); s.end(${JSON.stringify(`${greeting}\n`)}) }).listen(${port}, ${JSON.stringify(address)});
      http.createServer((q, r) => r.end(JSON.stringify({ greeting: ${JSON.stringify(greeting)}, path: q.url, headers: q.headers })))
        .listen(${httpPort}, ${JSON.stringify(address)}, () => console.log("ready"));
    `
    listener = spawn("ip", ["netns", "exec", ns, process.execPath, "-e", program], { stdio: ["ignore", "pipe", "inherit"] })
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the outside host's listener did not start")), 10_000)
      listener?.stdout?.once("data", () => {
        clearTimeout(timer)
        resolve()
      })
      listener?.once("exit", (code) => reject(new Error(`the outside host's listener exited (${code})`)))
    })
  } catch (e) {
    close()
    throw e
  }
  return { address, port, httpPort, greeting, close }
}
