import { Effect, Schema } from "effect"
import { PreflightResult } from "../../contract/preflight.js"
import { preflightEntry, settlePreflight } from "../egress/preflightGate.js"
import type { ActionAnswer, BoxCaller } from "./actionTypes.js"

const decodeReport = Schema.decodeUnknownOption(Schema.parseJson(PreflightResult))

/**
 * `POST /v1/preflight`: the box's check reports while pi starts beside it (never held itself).
 * The first result decides the run's preflight: its held requests go on, or are refused and the
 * box killed; a later report changes nothing (409).
 */
export const preflightReport = (caller: BoxCaller, body: string) =>
  Effect.gen(function*() {
    const report = decodeReport(body)
    if (report._tag === "None") return { status: 400, body: { ok: false, error: "a preflight report is JSON: {\"ok\", \"check\", \"detail\"}" } } satisfies ActionAnswer
    const { entry } = yield* preflightEntry(caller)
    return (yield* settlePreflight(caller, entry, report.value))
      ? { status: 200, body: { ok: true } } satisfies ActionAnswer
      : { status: 409, body: { ok: false, error: "this run's preflight is already decided" } } satisfies ActionAnswer
  })
