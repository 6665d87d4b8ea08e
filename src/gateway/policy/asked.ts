import type { IncomingHttpHeaders } from "node:http"

/** Headers by which some upstreams (Google's APIs, Microsoft Graph, Rails, Symfony, Laravel) take a POST for another method. */
export const METHOD_OVERRIDE_HEADERS = ["x-http-method-override", "x-http-method", "x-method-override"] as const
/** Headers by which some upstreams (IIS, Symfony, some gateways) route a request to another path than its own. */
export const PATH_OVERRIDE_HEADERS = ["x-original-url", "x-rewrite-url"] as const

/** What of a request's head the decision reads: nothing else of it can change the verdict. */
export interface Heads {
  /** Its Host, which inside a terminated tunnel must name the tunnel's host. */
  readonly host: string | undefined
  readonly contentType: string
  /** Its Content-Encoding, lower case ("" when it has none or says identity). */
  readonly contentEncoding: string
  /** Whether it carries a body: a Content-Length over 0, or chunks. */
  readonly hasBody: boolean
  /** Each method-override header's value, as sent. */
  readonly methodOverrides: ReadonlyArray<string>
  /** The path-override headers it carries, by name. */
  readonly pathOverrides: ReadonlyArray<string>
  /** Its Upgrade, when it asks to switch protocols. */
  readonly upgrade: string | undefined
}

const list = (v: string | ReadonlyArray<string> | undefined): ReadonlyArray<string> => (v === undefined ? [] : typeof v === "string" ? [v] : v)

/** A head as the decision reads it, from Node's parsed headers. */
export const headsOf = (h: IncomingHttpHeaders): Heads => {
  const encoding = String(h["content-encoding"] ?? "").trim().toLowerCase()
  const length = h["content-length"]
  return {
    host: h.host,
    contentType: String(h["content-type"] ?? ""),
    contentEncoding: encoding === "identity" ? "" : encoding,
    hasBody: h["transfer-encoding"] !== undefined || (length !== undefined && length !== "0"),
    methodOverrides: METHOD_OVERRIDE_HEADERS.flatMap((n) => list(h[n])),
    pathOverrides: PATH_OVERRIDE_HEADERS.filter((n) => h[n] !== undefined),
    upgrade: typeof h.upgrade === "string" ? h.upgrade : undefined
  }
}

/** A head with nothing in it but a Host: what `roster policy check` assumes unless told. */
export const plainHeads = (host: string | undefined): Heads => ({
  host, contentType: "", contentEncoding: "", hasBody: false, methodOverrides: [], pathOverrides: [], upgrade: undefined
})

/**
 * What the gateway is asked, as the decision reads it: a CONNECT's target, or one request — inside a tunnel
 * roster terminated (`tls`: its host and port are the tunnel's, its SNI the box's), or a plain http:// one
 * (`plain`: its host and port from its absolute URI). The target is the request target as written
 * (origin-form: "/path?query"); `body`, when given, is the body as sent — the decision asks for it
 * (ReadBody) where a rule needs it.
 */
export type Asked =
  | { readonly _tag: "Connect"; readonly host: string; readonly port: number }
  | {
    readonly _tag: "Request"
    readonly via: "tls" | "plain"
    readonly host: string
    readonly port: number
    readonly method: string
    readonly target: string
    readonly heads: Heads
    /** The TLS server name the box sent (tls only); false or undefined when it sent none. */
    readonly sni?: string | false | undefined
    /** A WebSocket handshake (or another upgrade: refused). */
    readonly upgrade: boolean
    readonly body?: { readonly raw: Buffer } | undefined
  }

export type AskedRequest = Extract<Asked, { _tag: "Request" }>

/**
 * The path and query of an absolute-form target ("http://host/a/../b?q") as written: `new URL` would resolve
 * its dot-segments and escapes first, and the gateway's own canonical form must be the one that decides.
 */
export const pathAsWritten = (target: string) => {
  const rest = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*([^#]*)/i.exec(target)?.[1] ?? ""
  return rest.startsWith("/") ? rest : `/${rest}`
}
