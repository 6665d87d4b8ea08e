import { normalizeHost } from "../../contract/addresses.js"
import { Refusal } from "../base/refusal.js"

type Target = { readonly host: string; readonly port: number }

/** A Host header's name and port (443 when it names none: the tunnel is TLS), or undefined when it is not one. */
const hostAndPort = (value: string): { readonly host: string; readonly port: number } | undefined => {
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/i.exec(value.trim())
  if (!m) return undefined
  const port = m[2] === undefined ? 443 : Number(m[2])
  return port >= 1 && port <= 65535 ? { host: normalizeHost(m[1] as string), port } : undefined
}

/**
 * Why a request inside the terminated tunnel to `target` is meant for another host, or undefined
 * when everything it names is the tunnel's: its `Host` (canonical: lower case, no trailing dot, the
 * port when not 443) and the TLS SNI the box sent. On a shared front end (a CDN, a multi-tenant API
 * gateway) upstreams route by Host, so a request for another host would carry the grant's real
 * credential to another tenant. HTTP/1.1 only here (`refuseUnlessHttp1`), so there is no `:authority`.
 * A box that sent no SNI named no other host (clients send none for an address).
 */
export const misdirection = (target: Target, hostHeader: string | undefined, sni: string | false | null | undefined): string | undefined => {
  const tunnel = `${target.host}${target.port === 443 ? "" : `:${target.port}`}`
  if (typeof sni === "string" && sni !== "" && normalizeHost(sni) !== normalizeHost(target.host)) {
    return `the TLS connection named ${JSON.stringify(sni)} (SNI) inside a tunnel to ${tunnel}`
  }
  if (hostHeader === undefined) return `the request names no host (Host) inside a tunnel to ${tunnel}`
  const named = hostAndPort(hostHeader)
  const same = named !== undefined && named.host === normalizeHost(target.host) && named.port === target.port
  return same ? undefined : `the request names ${JSON.stringify(hostHeader)} (Host) inside a tunnel to ${tunnel}`
}

/** The refusal of a misdirected request: nothing injected or forwarded, and the run tainted (why "misdirected"). */
export const misdirectedRefusal = (target: Target, why: string) =>
  new Refusal(421, `${why}: a tunnel carries requests for its own host only — open a tunnel (CONNECT) to the host you mean`, {
    why: "misdirected",
    host: target.host,
    port: target.port
  })
