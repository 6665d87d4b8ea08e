import { Effect } from "effect"
import { isLoopback, isRefusedAddress, normalizeHost } from "../../contract/addresses.js"
import { Dialer } from "../base/Dialer.js"
import { Refusal } from "../base/refusal.js"
import type { Dial } from "../policy/verdict.js"
import { Gateway } from "./Gateway.js"

/**
 * The address a verdict's dial actually reaches: never loopback, private, link-local, CGNAT or metadata
 * unless its [[route]] names the upstream outright or its entry lists that address, and never the gateway
 * itself. One refused address refuses the name: a mixed answer is how DNS rebinding starts.
 */
export const dialChecked = (dial: Pick<Dial, "host" | "port" | "routed" | "names">) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    const dialer = yield* Dialer
    const { host, port } = dial
    const where = { host, port }
    const named = (address: string) => dial.routed || dial.names.includes(normalizeHost(address))
    const addrs = yield* dialer.resolve(host).pipe(Effect.mapError((e) => new Refusal(502, e.detail, { why: "upstream", ...where })))
    if (addrs.length === 0) return yield* Effect.fail(new Refusal(502, `${host} has no address`, { why: "upstream", ...where }))
    for (const a of addrs) {
      if (port === self.port() && (isLoopback(a) || self.addrs.includes(a) || a === "0.0.0.0")) {
        return yield* Effect.fail(new Refusal(403, "the gateway does not proxy to itself", { why: "gateway_itself", ...where }))
      }
      if (isRefusedAddress(a) && !named(a)) {
        return yield* Effect.fail(
          new Refusal(403, `${host} resolves to ${a}, a private/loopback/metadata address no rule names`, {
            why: "refused_address", ...where,
            fix: [`# name the address in the rule that allows ${host}:`, `hosts = [${JSON.stringify(host)}, ${JSON.stringify(a)}]`]
          })
        )
      }
    }
    const address = addrs[0] as string
    const socket = yield* dialer.connect(address, port).pipe(Effect.mapError((e) => new Refusal(502, e.detail, { why: "upstream", ...where })))
    return { socket, address }
  })
