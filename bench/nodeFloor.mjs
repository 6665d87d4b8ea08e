#!/usr/bin/env node
// The floor for the gateway bench: plain Node doing the grant path's job with nothing of roster's —
// CONNECT, TLS terminated as the host (a certificate the bench made), each request sent on over
// a keep-alive TLS agent to the upstream with the key set in x-api-key, the answer piped back.
// No token check, policy, audit, scrub or Effect: what Node itself costs, on the same flags.
// argv: <leaf cert> <leaf key> <upstream port> <upstream CA> ; prints its port, serves until stdin closes.
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import * as tls from "node:tls"

const [certFile, keyFile, upstreamPort, caFile] = process.argv.slice(2)
const agent = new https.Agent({ keepAlive: true, ca: [fs.readFileSync(caFile, "utf8")] })
const context = tls.createSecureContext({ cert: fs.readFileSync(certFile, "utf8"), key: fs.readFileSync(keyFile, "utf8") })
const inner = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  const headers = { ...req.headers, "x-api-key": "sk-ant-bench-floor-not-real", host: "127.0.0.1" }
  delete headers["proxy-authorization"]
  const up = https.request({ host: "127.0.0.1", port: Number(upstreamPort), method: req.method, path: req.url, headers, agent }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers)
    answer.pipe(res)
  })
  up.once("error", () => res.destroy())
  req.pipe(up)
})
const outer = http.createServer()
outer.on("connect", (_req, socket) => {
  socket.write("HTTP/1.1 200 Connection Established\r\n\r\n")
  inner.emit("connection", new tls.TLSSocket(socket, { isServer: true, secureContext: context, ALPNProtocols: ["http/1.1"] }))
})
outer.listen(0, "127.0.0.1", () => process.stdout.write(`${outer.address().port}\n`))
process.stdin.on("end", () => process.exit(0))
process.stdin.resume()
