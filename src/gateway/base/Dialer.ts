import { Context, Effect, Layer, Ref, Schema } from "effect"
import * as dns from "node:dns/promises"
import * as net from "node:net"

export class DialError extends Schema.TaggedError<DialError>()("DialError", {
  host: Schema.String,
  detail: Schema.String
}) {}

/**
 * How the gateway reaches the outside: resolve a name, then connect to one checked address
 * (never re-resolving, so a rebinding DNS answer can't swap the address after the check).
 * The test layer records and connects nowhere unless told to.
 */
export class Dialer extends Context.Tag("roster/Dialer")<Dialer, {
  readonly resolve: (host: string) => Effect.Effect<ReadonlyArray<string>, DialError>
  readonly connect: (address: string, port: number) => Effect.Effect<net.Socket, DialError>
}>() {
  static readonly layer = Layer.succeed(Dialer, {
    resolve: (host) =>
      net.isIP(host) !== 0
        ? Effect.succeed([host])
        : Effect.tryPromise({
          try: () => dns.lookup(host, { all: true, verbatim: true }),
          catch: (e) => new DialError({ host, detail: `cannot resolve: ${e instanceof Error ? e.message : String(e)}` })
        }).pipe(Effect.map((rs) => rs.map((r) => r.address))),
    connect: (address, port) =>
      Effect.async<net.Socket, DialError>((resume) => {
        // No Nagle: requests and answers are small writes that must not wait for an ACK.
        const socket = net.connect({ host: address, port, noDelay: true })
        const fail = (e: Error) => resume(Effect.fail(new DialError({ host: `${address}:${port}`, detail: e.message })))
        socket.once("error", fail)
        socket.once("connect", () => {
          socket.off("error", fail)
          resume(Effect.succeed(socket))
        })
        return Effect.sync(() => socket.destroy())
      }).pipe(
        Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new DialError({ host: `${address}:${port}`, detail: "connect timed out" }) })
      )
  })

  /** Resolves from a table and records every connect without opening a socket to it. */
  static readonly layerRecording = (table: Record<string, ReadonlyArray<string>>, dialled: Ref.Ref<ReadonlyArray<string>>) =>
    Layer.succeed(Dialer, {
      resolve: (host) =>
        net.isIP(host) !== 0
          ? Effect.succeed([host])
          : table[host]
          ? Effect.succeed(table[host])
          : Effect.fail(new DialError({ host, detail: "cannot resolve: not in the test table" })),
      connect: (address, port) =>
        Ref.update(dialled, (d) => [...d, `${address}:${port}`]).pipe(
          Effect.zipRight(Effect.fail(new DialError({ host: `${address}:${port}`, detail: "recorded, not connected" })))
        )
    })
}
