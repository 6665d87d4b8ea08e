import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as tls from "node:tls"
import { afterEach, describe, expect, it } from "vitest"
import { nextStep, REHEARSAL_HELD_ASK, REHEARSAL_RULED_ASK, REHEARSAL_RULED_HOST } from "../../src/rehearsal/script.js"
import { makeTestTls } from "../support/testCa.js"

/** The command the rehearsal's first step of a turn asking `ask` runs in the box. */
const commandFor = (ask: string) => {
  const step = nextStep([{ role: "user", content: `please ${ask}` }], ["bash"])
  if (step.kind !== "tool") throw new Error(`expected a tool step, got ${JSON.stringify(step)}`)
  return (step.input as { command: string }).command
}

/** Runs the box's `node -e '…'` as bash would, with the proxy the box's environment names; its stdout. */
const runInBox = (command: string, proxyPort: number, caFile?: string) =>
  new Promise<string>((resolve) => {
    const child = spawn("bash", ["-c", command], {
      env: { PATH: process.env.PATH ?? "", HTTPS_PROXY: `http://tok%2Fen:x@127.0.0.1:${proxyPort}`, ...(caFile ? { NODE_EXTRA_CA_CERTS: caFile } : {}) },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    child.stdout.on("data", (c: Buffer) => (out += c.toString()))
    child.once("close", () => resolve(out.trim()))
  })

const servers: Array<net.Server> = []
afterEach(() => {
  for (const s of servers.splice(0)) s.close()
})

/** A stand-in for the gateway's proxy port: records the CONNECT's head, then `then` on its socket. */
const standInProxy = async (then: (socket: net.Socket) => void) => {
  const heads: Array<string> = []
  const server = net.createServer((socket) => {
    socket.once("data", (d) => {
      heads.push(d.toString())
      then(socket)
    })
  })
  servers.push(server)
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return { port: (server.address() as net.AddressInfo).port, heads }
}

describe("the rehearsal model's turns that reach through the gateway (a stand-in proxy in place of the gateway)", () => {
  it("fetching the held page writes a CONNECT with the box's token and says the proxy's status", async () => {
    const proxy = await standInProxy((s) => s.end("HTTP/1.1 403 Forbidden\r\n\r\n"))
    expect(await runInBox(commandFor(REHEARSAL_HELD_ASK), proxy.port)).toBe("proxy 403")
    expect(proxy.heads[0]).toMatch(/^CONNECT 198\.51\.100\.9:9443 HTTP\/1\.1\r\n/)
    expect(proxy.heads[0]).toContain(`Proxy-Authorization: Basic ${Buffer.from("tok/en:x").toString("base64")}\r\n`)
  })

  it("deleting the acme repo speaks TLS inside the tunnel (the CA the box trusts) and says the host's status", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-rehearsal-"))
    const made = await makeTestTls("127.0.0.1", REHEARSAL_RULED_HOST)
    fs.writeFileSync(path.join(dir, "ca.crt"), made.caPem)
    const requests: Array<string> = []
    const proxy = await standInProxy((s) => {
      s.write("HTTP/1.1 200 Connection Established\r\n\r\n")
      const t = new tls.TLSSocket(s, { isServer: true, cert: made.certPem, key: made.keyPem })
      t.once("data", (d) => {
        requests.push(d.toString())
        t.end("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
      })
      t.on("error", () => t.destroy())
    })
    expect(await runInBox(commandFor(REHEARSAL_RULED_ASK), proxy.port, path.join(dir, "ca.crt"))).toBe("answer 204")
    expect(proxy.heads[0]).toMatch(new RegExp(`^CONNECT ${REHEARSAL_RULED_HOST.replace(/\./g, "\\.")}:443 HTTP/1\\.1\\r\\n`))
    expect(requests[0]).toMatch(/^DELETE \/repos\/acme\/app HTTP\/1\.1\r\nHost: gh\.example\.com\r\n/)
    // Refused at the CONNECT: said, nothing sent.
    const refusing = await standInProxy((s) => s.end("HTTP/1.1 403 Forbidden\r\n\r\n"))
    expect(await runInBox(commandFor(REHEARSAL_RULED_ASK), refusing.port)).toBe("proxy 403")
    fs.rmSync(dir, { recursive: true, force: true })
  })
})
