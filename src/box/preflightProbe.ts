import * as net from "node:net"
import type * as os from "node:os"

export type Interfaces = NodeJS.Dict<ReadonlyArray<os.NetworkInterfaceInfo>>

/**
 * Where a box's preflight tries to connect directly when org.toml names no `[box] preflight_probe`:
 * addresses that answer nowhere (the documentation blocks, then a reserved one), the first that is
 * on none of this machine's networks — one on them the host reaches directly, and a box without the
 * lockdown could too, failing its check for no fault of its own (this CI machine's own network is TEST-NET-1).
 */
const CANDIDATES = ["192.0.2.1", "198.51.100.1", "203.0.113.1", "240.0.0.1"] as const
const PORT = 443

const v4 = (a: string) => a.split(".").reduce((n, p) => n * 256 + Number(p), 0)

/** The interface and network of this machine that `address` is on (its own address, or in a connected subnet), if any. */
export const onLocalNetwork = (address: string, interfaces: Interfaces): { readonly iface: string; readonly cidr: string; readonly own: boolean } | undefined => {
  if (net.isIPv4(address)) {
    for (const [iface, infos] of Object.entries(interfaces)) {
      for (const i of infos ?? []) {
        if (i.family !== "IPv4" || i.cidr === null) continue
        if (i.address === address) return { iface, cidr: i.cidr, own: true }
        const bits = Number(i.cidr.split("/")[1])
        const size = 2 ** (32 - bits)
        if (Math.floor(v4(address) / size) === Math.floor(v4(i.address) / size)) return { iface, cidr: i.cidr, own: false }
      }
    }
  }
  return undefined
}

/** Why a probe address is not a safe one for this machine (own, or on a network it reaches directly), or undefined. */
export const probeProblem = (probe: string, interfaces: Interfaces): string | undefined => {
  const host = probe.slice(0, probe.lastIndexOf(":"))
  const local = onLocalNetwork(host, interfaces)
  if (!local) return undefined
  return local.own
    ? `${host} is this machine's own address (${local.iface})`
    : `${host} is on this machine's own network (${local.cidr} on ${local.iface}), which the host reaches directly: a box without the lockdown could too, and its preflight would fail`
}

/** The probe a box gets: org.toml's when it names one, else the first candidate on none of this machine's networks. */
export const preflightProbe = (configured: string | undefined, interfaces: Interfaces) => {
  if (configured !== undefined) return { probe: configured, chosen: false as const }
  const free = CANDIDATES.find((c) => onLocalNetwork(c, interfaces) === undefined) ?? CANDIDATES[CANDIDATES.length - 1]
  return { probe: `${free}:${PORT}`, chosen: true as const, passedOver: CANDIDATES.slice(0, CANDIDATES.indexOf(free as (typeof CANDIDATES)[number])) }
}

/** What `roster doctor` says of the probe: which one boxes get, and why it is safe (or what to change). */
export const probeReport = (configured: string | undefined, interfaces: Interfaces) => {
  const chosen = preflightProbe(configured, interfaces)
  const problem = probeProblem(chosen.probe, interfaces)
  const why = problem !== undefined
    ? `NOT SAFE: ${problem} — set [box] preflight_probe to an address that answers nowhere and is on none of this machine's networks, or remove it (roster then picks one)`
    : chosen.chosen
    ? `roster's pick: it answers nowhere and is on none of this machine's networks${chosen.passedOver.length > 0 ? ` (passed over ${chosen.passedOver.join(", ")}: on this machine's networks)` : ""}`
    : "[box] preflight_probe in org.toml: on none of this machine's networks"
  return { probe: chosen.probe, chosen: chosen.chosen, safe: problem === undefined, why }
}
