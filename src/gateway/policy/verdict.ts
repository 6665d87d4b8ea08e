import { Data } from "effect"
import type { GrantRule } from "../../config/schema.js"
import type { Refusal } from "../base/refusal.js"

/**
 * Where a verdict's traffic is dialled: the host's [[route]] if it has one (named outright, private or
 * not), else the host itself, where only the address literals its entry lists may be private.
 */
export interface Dial {
  readonly host: string
  readonly port: number
  readonly protocol: "http:" | "https:"
  readonly routed: boolean
  /** The private addresses the entry names, the only ones a dial may reach (a route's upstream aside). */
  readonly names: ReadonlyArray<string>
  /** The upstream pool's key: one agent per upstream and entry. */
  readonly key: string
}

/** A [[grant]]'s part of a verdict: whose credential goes in which header, and what its model requests may declare. */
export interface Inject {
  readonly grant: string
  readonly credential: string
  readonly header: GrantRule["header"]
  /** The grant itself, for the check of a model request's provider-side tools. */
  readonly vet: GrantRule
}

/** The body a decision read (a rule needed it): sent as read — decoded, and its Content-Encoding dropped, when it came compressed. */
export interface SentBody {
  readonly raw: Buffer
  readonly decoded: boolean
  /** A [[grant]]'s model request, as parsed to be checked (its `model` names what a metered call is priced by). */
  readonly json?: unknown
}

/** What a person is asked about: a request's method, and its canonical path without the query (null for a CONNECT). */
export interface AskedFor {
  readonly method: string
  readonly path: string | null
}

/** A CONNECT tunnelled as is: the box speaks TLS with the host itself (an [[allow]] without rules). */
export interface Tunnel {
  readonly _tag: "Tunnel"
  readonly host: string
  readonly port: number
  readonly entry: string
  readonly dial: Dial
}

/** A CONNECT whose TLS the gateway terminates, each request inside decided on its own ([[grant]], or [[allow]] with rules). */
export interface Intercept {
  readonly _tag: "Intercept"
  readonly host: string
  readonly port: number
  readonly entry: string
  /** Absent on an intercepted [[allow]]: nothing is injected. */
  readonly inject: Inject | undefined
  readonly dial: Dial
  /** Whether the entry decides request by request (it has rules). */
  readonly ruled: boolean
}

/** A request sent on: to `dial`, on `url` (its canonical target when a rule decided it), with the credential in when `inject`. */
export interface Forward {
  readonly _tag: "Forward"
  readonly host: string
  readonly port: number
  readonly entry: string
  /** The rule that let it through (`rule 2 (…)`, `its default (…)`), when the entry has rules. */
  readonly by: string | undefined
  readonly inject: Inject | undefined
  readonly dial: Dial
  readonly url: string
  /** The body as read to decide, when a rule read it: the body to send. */
  readonly body: SentBody | undefined
  /** A WebSocket handshake. */
  readonly upgrade: boolean
}

/**
 * Held for a person: a grant's or allow's rule asks about this request (`rule`), or policy refuses it and
 * `[gateway] approvals = "ask"`. Approved, `then` is done; otherwise `refusal` is the answer.
 */
export interface Hold {
  readonly _tag: "Hold"
  readonly refusal: Refusal
  readonly asked: AskedFor
  /** The rule that asks, by entry and rule; absent for a hold of a policy refusal. */
  readonly rule: string | undefined
  readonly host: string
  readonly port: number
  readonly then: Tunnel | Forward
}

/** Not decided until its body is read (at most `limit` bytes): a rule reads it, or it could override its method. */
export interface ReadBody {
  readonly _tag: "ReadBody"
  readonly limit: number
  readonly why: string
}

/** Refused, with why and (where an operator could change it) the org.toml lines that would. */
export interface Refuse {
  readonly _tag: "Refuse"
  readonly refusal: Refusal
}

/** What the gateway does with what it is asked: one value, made by `decide` and matched once by each listener. */
export type Verdict = Tunnel | Intercept | Forward | Hold | ReadBody | Refuse
export const Verdict = Data.taggedEnum<Verdict>()

/** A verdict a listener acts on, once every hold is decided and every body read. */
export type Settled = Tunnel | Intercept | Forward
