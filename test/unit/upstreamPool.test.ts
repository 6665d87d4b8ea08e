import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import * as net from "node:net"
import { makeUpstreamPool } from "../../src/gateway/upstream/upstreamPool.js"

/** A local upstream that counts the connections it is given. */
const upstream = () =>
  new Promise<{ port: number; connections: () => number; close: () => void }>((resolve) => {
    let connections = 0
    const server = http.createServer((_req, res) => res.end("ok"))
    server.on("connection", () => void connections++)
    server.listen(0, "127.0.0.1", () =>
      resolve({ port: (server.address() as net.AddressInfo).port, connections: () => connections, close: () => server.close() }))
  })

const get = (agent: http.Agent, port: number) =>
  new Promise<string>((resolve, reject) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/", agent }, (res) => {
      let body = ""
      res.on("data", (c: Buffer) => (body += c.toString()))
      res.once("end", () => resolve(body))
    })
    req.once("error", reject)
  })

describe("the upstream pool (a real local upstream)", () => {
  it.live("keeps the upstream connection warm: a rule's next requests reuse the idle one instead of dialling again; another rule dials its own", () =>
    Effect.gen(function*() {
      const up = yield* Effect.promise(upstream)
      let dials = 0
      // The checked dial and verified TLS stand here as a plain connect, counted.
      const open = Effect.sync(() => {
        dials++
        return net.connect(up.port, "127.0.0.1")
      })
      const pool = yield* makeUpstreamPool
      const agent = yield* pool.agentFor("https://upstream.example.com:443 rule-a", open)
      for (let i = 0; i < 3; i++) expect(yield* Effect.promise(() => get(agent, up.port))).toBe("ok")
      expect(yield* pool.agentFor("https://upstream.example.com:443 rule-a", open)).toBe(agent)
      expect(dials).toBe(1)
      expect(up.connections()).toBe(1)
      const other = yield* pool.agentFor("https://upstream.example.com:443 rule-b", open)
      expect(other).not.toBe(agent)
      expect(yield* Effect.promise(() => get(other, up.port))).toBe("ok")
      expect(dials).toBe(2)
      up.close()
    }).pipe(Effect.scoped))
})
