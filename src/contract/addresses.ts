import * as net from "node:net"

// Addresses a gateway must never dial on a box's behalf unless a rule names them: the host
// itself, the private networks around it, and the cloud metadata endpoints.
const refused = new net.BlockList()
for (const [addr, prefix] of [
  ["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16],
  ["172.16.0.0", 12], ["192.0.0.0", 24], ["192.168.0.0", 16], ["198.18.0.0", 15], ["224.0.0.0", 4], ["240.0.0.0", 4]
] as const) refused.addSubnet(addr, prefix, "ipv4")
for (const [addr, prefix] of [
  ["::", 128], ["::1", 128], ["fc00::", 7], ["fe80::", 10], ["ff00::", 8], ["64:ff9b::", 96], ["fd00:ec2::", 32]
] as const) refused.addSubnet(addr, prefix, "ipv6")

/** The IPv4 address inside an IPv4-mapped IPv6 one (::ffff:a.b.c.d or ::ffff:xxxx:xxxx). */
const mappedV4 = (addr: string): string | undefined => {
  const lower = addr.toLowerCase()
  const dotted = /^(?:0{0,4}:){0,4}:?(?:0{0,4}:)?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower)
  if (dotted) return dotted[1]
  const hex = /^(?:0{0,4}:){0,4}:?(?:0{0,4}:)?ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower)
  if (hex) {
    const hi = parseInt(hex[1] ?? "0", 16)
    const lo = parseInt(hex[2] ?? "0", 16)
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
  }
  return undefined
}

/** True for loopback, private, link-local, CGNAT, metadata and other non-public addresses (and their IPv4-mapped forms). */
export const isRefusedAddress = (addr: string): boolean => {
  const family = net.isIP(addr)
  if (family === 4) return refused.check(addr, "ipv4")
  if (family === 6) {
    const v4 = mappedV4(addr)
    return v4 !== undefined ? refused.check(v4, "ipv4") : refused.check(addr, "ipv6")
  }
  return true
}

export const isLoopback = (addr: string | undefined): boolean => {
  if (!addr) return false
  const v4 = net.isIPv6(addr) ? mappedV4(addr) ?? addr : addr
  return v4 === "::1" || (net.isIPv4(v4) && v4.startsWith("127."))
}

// Written down once, where org.toml's hosts are compiled: the policy and every dial read one form.
export { normalizeHost } from "../config/hosts.js"

/** A host a proxy may be asked for: a name or an address, nothing that could smuggle a second meaning. */
export const isValidHost = (host: string): boolean =>
  host.length > 0 && host.length <= 253 && !/[\0\r\n@%/\\\s]/.test(host) &&
  (net.isIP(host) !== 0 || /^[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$/.test(host))

/**
 * An address that is not one address but all of a kind: the unspecified ones (`0.0.0.0`, `::`,
 * in any spelling), broadcast and multicast. A listener on it listens on every address of the
 * machine, box networks among them.
 */
export const isWildcardAddress = (address: string): boolean => {
  const a = address.trim().replace(/^\[(.*)\]$/, "$1")
  if (a === "" || a === "*") return true
  const family = net.isIP(a)
  if (family === 4) return a.split(".").every((p) => Number(p) === 0) || a === "255.255.255.255" || Number(a.split(".")[0]) >= 224
  if (family === 6) {
    const v4 = mappedV4(a)
    if (v4 !== undefined) return isWildcardAddress(v4)
    return /^[0:]+$/.test(a) || a.toLowerCase().startsWith("ff")
  }
  return false
}
