import { FileSystem, HttpServerResponse } from "@effect/platform"
import { Effect, Stream } from "effect"
import type { Html } from "./html.js"
import { readOr } from "../fs/notFound.js"

/** Every answer: nothing from elsewhere runs, frames or loads; nothing is cached or referred. */
export const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  // same-origin, not no-referrer: under no-referrer a browser sends a form POST with `Origin: null`, and the Origin check refuses it.
  "referrer-policy": "same-origin",
  "x-frame-options": "DENY",
  "cache-control": "no-store"
} as const

type Extra = Readonly<Record<string, string>>

/** A whole answer of `type`, with the security headers. */
export const respond = (status: number, type: string, body: string, extra: Extra = {}) =>
  HttpServerResponse.text(body, { status, contentType: type, headers: { ...SECURITY_HEADERS, ...extra } })

export const respondHtml = (status: number, body: Html, extra: Extra = {}) => respond(status, "text/html; charset=utf-8", body.text, extra)

export const redirectTo = (to: string, extra: Extra = {}) =>
  HttpServerResponse.empty({ status: 303, headers: { ...SECURITY_HEADERS, location: to, ...extra } })

/** One page's end of an event stream: events pushed as they happen, and its end. */
export interface EventSink {
  readonly push: (event: string) => void
  readonly end: () => void
}

/**
 * An answer held open as an event stream: `attach` is given the page's sink when the answer
 * starts and returns how to let go of it, called when the page goes (or the stream ends).
 */
export const eventStream = (attach: (sink: EventSink) => () => void) =>
  HttpServerResponse.stream(
    Stream.async<Uint8Array>((emit) => {
      const encoder = new TextEncoder()
      const detach = attach({ push: (event) => void emit.single(encoder.encode(event)), end: () => void emit.end() })
      return Effect.sync(detach)
    }),
    { contentType: "text/event-stream", headers: { ...SECURITY_HEADERS, connection: "keep-alive" } }
  )

/** A file sent as it is read, at the pace the client takes it (a transcript may be hundreds of MB). */
export const fileDownload = (file: string, type: string, extra: Extra) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    // Not there yet is an empty file; one that cannot be looked at is said in the log and sent empty.
    const size = yield* fs.stat(file).pipe(Effect.map((i) => Number(i.size)), readOr(file, 0, "web: "))
    const body = size === 0 ? Stream.empty : fs.stream(file, { bytesToRead: size })
    return HttpServerResponse.stream(body, { contentType: type, contentLength: size, headers: { ...SECURITY_HEADERS, ...extra } })
  })
