import { Data } from "effect"

/**
 * Why the gateway said no, in words an agent can act on: a code it can branch on, the host and
 * subject it was judged as, and — where an operator could change the answer — the exact
 * org.toml lines that would. Shared by the gateway's answers and `roster policy check`.
 */
export type RefusalWhy =
  | "no_token" // no or unknown run token (407)
  | "run_ended" // the token's run is over (407)
  | "warm" // a warm box's token, no run has claimed it yet: nothing but its preflight report (403)
  | "cut_off" // the run's fleet node is cut off from the fleet's database: its boxes stand down (503)
  | "malformed" // not a request the gateway parses
  | "no_rule" // no [[grant]] or [[allow]] covers host:port for this subject
  | "wrong_port" // a rule covers the host for this subject, not this port
  | "request_rule" // the host is granted, and the grant's request rules (method, path) refuse this request
  | "ambiguous" // on an entry with rules, a request that could mean one thing to the rules and another to the upstream
  | "refused_address" // the name resolves to a private/loopback/metadata address no rule names
  | "gateway_itself" // the gateway does not proxy to itself
  | "tls_only" // a granted host over plain http: credentials go only over TLS
  | "no_credential" // the grant's credential is not connected
  | "credential_refresh" // the grant's OAuth login expires and could not be refreshed
  | "config_invalid" // org.toml does not decode: nothing is allowed
  | "server_tools" // a model request declares provider-side tools that reach the network
  | "tainted" // the run is tainted: its work stays quarantined
  | "preflight" // the run's box failed its preflight (or reported none in time): nothing of it leaves
  | "budget" // a spend budget is used up
  | "upstream" // the upstream could not be reached or failed
  | "encoding" // the upstream's answer is in a content-encoding the scrubber cannot undo
  | "misdirected" // inside a tunnel to one host, a request (Host, SNI) names another: a credential must never reach another tenant
  | "taint_unrecorded" // the run's taint could not be recorded: what it would have held is refused (fail closed)

export interface RefusalDetail {
  readonly why: RefusalWhy
  readonly host?: string | undefined
  readonly port?: number | undefined
  readonly subject?: string | undefined
  /** org.toml lines that would allow it (an operator's choice, never the box's). */
  readonly fix?: ReadonlyArray<string> | undefined
}

/**
 * A request the gateway answers itself, with a status and a reason for the box and the audit log: the one
 * error every listener fails with, caught once where it writes the answer, the taint and the audit line.
 */
export class Refusal extends Data.TaggedError("Refusal")<{
  readonly status: number
  readonly reason: string
  readonly detail: RefusalDetail
}> {
  constructor(status: number, reason: string, detail: RefusalDetail = { why: whyOfStatus(status) }) {
    super({ status, reason, detail })
  }

  override get message() {
    return `roster gateway: ${this.reason}`
  }
}

function whyOfStatus(status: number): RefusalWhy {
  return status === 407 ? "no_token" : status === 400 ? "malformed" : status >= 500 ? "upstream" : "no_rule"
}

/**
 * The body of a refusal: the shape model SDKs read an error from (`error.message`), so the agent
 * sees the sentence, plus `roster` with the machine-readable parts. Never a credential: the
 * reason and lines are built from policy, host names and subjects only.
 */
export const refusalBody = (r: Refusal) => {
  const fix = r.detail.fix && r.detail.fix.length > 0 ? ` An operator could add to org.toml: ${r.detail.fix.join(" ")}` : ""
  return {
    type: "error",
    error: { type: errorType(r.status), message: `roster gateway: ${r.reason}${fix}` },
    roster: {
      why: r.detail.why,
      ...(r.detail.host === undefined ? {} : { host: r.detail.host }),
      ...(r.detail.port === undefined ? {} : { port: r.detail.port }),
      ...(r.detail.subject === undefined ? {} : { subject: r.detail.subject }),
      ...(r.detail.fix && r.detail.fix.length > 0 ? { org_toml: r.detail.fix } : {})
    }
  }
}

const errorType = (status: number) =>
  status === 400 ? "invalid_request_error" : status === 407 || status === 401 ? "authentication_error" :
  status === 402 ? "billing_error" : status === 403 ? "permission_error" : status === 413 ? "request_too_large" : "api_error"

const quote = (s: string) => JSON.stringify(s)

/** The lines of a new [[allow]] for exactly this host, port and subject. */
export const allowLines = (host: string, port: number, subject: string): ReadonlyArray<string> => [
  "[[allow]]",
  `hosts = [${quote(host)}]`,
  ...(port === 443 ? [] : [`ports = [${port}]`]),
  `scope = [${quote(subject)}]`
]

/** The refusal with the request's host, port and subject filled in where it did not say them. */
export const placed = (r: Refusal, where: { readonly host: string; readonly port: number; readonly subject: string }) =>
  new Refusal(r.status, r.reason, {
    ...(where.host && where.host !== "?" ? { host: where.host } : {}),
    ...(where.port > 0 ? { port: where.port } : {}),
    ...(where.subject && where.subject !== "?" ? { subject: where.subject } : {}),
    ...r.detail
  })
