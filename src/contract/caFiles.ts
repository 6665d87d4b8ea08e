import { FileSystem } from "@effect/platform"
import { Effect, Schema } from "effect"
import * as tls from "node:tls"
import { Paths, layout } from "../config/Paths.js"
import { writeAtomic } from "../fs/atomic.js"
/** The deployment has no CA yet, with the fix (start the gateway, or `roster init`). */
export class CaMissing extends Schema.TaggedError<CaMissing>()("CaMissing", { file: Schema.String }) {
  override get message() {
    return `the gateway CA is not present at ${this.file} — start the gateway first (roster server start creates it)`
  }
}

const SYSTEM_BUNDLES = ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"]

let cachedRoots: string | undefined

/** This machine's trust roots: the distribution's bundle, else the ones Node ships. Read once per process (they do not change under it). */
export const systemRoots = Effect.gen(function*() {
  if (cachedRoots !== undefined) return cachedRoots
  const fs = yield* FileSystem.FileSystem
  for (const file of SYSTEM_BUNDLES) {
    // A bundle this distribution does not have (or cannot read) is passed over for the next; Node's own roots are the last resort.
    const text = yield* fs.readFileString(file).pipe(Effect.orElseSucceed(() => ""))
    if (text.includes("BEGIN CERTIFICATE")) return (cachedRoots = text)
  }
  return (cachedRoots = tls.rootCertificates.join("\n"))
})

/** The system roots plus the roster CA: what every non-Node TLS stack in the box trusts. */
export const ensureBundle = Effect.fn("ca.ensureBundle")(function*() {
  const fs = yield* FileSystem.FileSystem
  const files = layout(yield* Paths)
  const ca = yield* fs.readFileString(files.caCert).pipe(Effect.mapError(() => new CaMissing({ file: files.caCert })))
  const bundle = `${(yield* systemRoots).trimEnd()}\n${ca.trimEnd()}\n`
  // The bundle is roster's own, made from the roots and the CA: one that cannot be read is written whole again.
  const current = yield* fs.readFileString(files.caBundle).pipe(Effect.orElseSucceed(() => ""))
  if (current !== bundle) yield* writeAtomic(files.caBundle, bundle, 0o644)
  return files.caBundle
})

