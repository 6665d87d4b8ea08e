import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

/**
 * The real engine behind a gate: a unix socket that passes every request to the Docker engine,
 * except that the first one whose request line matches `hold` is never passed on (a client
 * pointed at it with DOCKER_HOST stops at that step, so a test can kill it exactly there), and
 * every one matching `refuse` is answered 500 by the gate itself, as an engine that refuses it.
 */
export const engineGate = async (hold: RegExp, options: { readonly refuse?: RegExp } = {}) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-gate-"))
  const socket = path.join(dir, "docker.sock")
  let heldOnce = false
  const refused: Array<string> = []
  let resolveHeld: (line: string) => void = () => {}
  const held = new Promise<string>((r) => (resolveHeld = r))
  const conns = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const engine = net.connect("/var/run/docker.sock")
    conns.add(client).add(engine)
    let blocked = false
    client.on("data", (chunk: Buffer) => {
      if (blocked) return
      const line = chunk.toString("latin1").split("\r\n")[0] ?? ""
      if (!heldOnce && hold.test(line)) {
        heldOnce = true
        blocked = true
        return resolveHeld(line)
      }
      if (options.refuse?.test(line)) {
        refused.push(line)
        const body = JSON.stringify({ message: "refused by the test's engine gate" })
        client.end(`HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`)
        return
      }
      engine.write(chunk)
    })
    engine.pipe(client)
    const end = () => {
      client.destroy()
      engine.destroy()
    }
    client.once("close", end)
    engine.once("close", end)
    client.on("error", end)
    engine.on("error", end)
  })
  await new Promise<void>((r) => server.listen(socket, r))
  return {
    dockerHost: `unix://${socket}`,
    held,
    /** The request lines answered 500. */
    refused,
    close: () => {
      for (const c of conns) c.destroy()
      server.close()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}
