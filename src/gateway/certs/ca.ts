import { FileSystem } from "@effect/platform"
import { Clock, Effect, Schema } from "effect"
import { webcrypto } from "node:crypto"
import { Paths, layout } from "../../config/Paths.js"
import { writeAtomic } from "../../fs/atomic.js"
import { ensureBundle } from "../../contract/caFiles.js"
import { loadX509 } from "./x509.js"

export class CaError extends Schema.TaggedError<CaError>()("CaError", { detail: Schema.String }) {
  override get message() {
    return `the roster CA could not be prepared: ${this.detail}`
  }
}

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const
const TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000

const generate = (now: number) => Effect.tryPromise({
  try: async () => {
    const x509 = await loadX509()
    const keys = await webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"]) as webcrypto.CryptoKeyPair
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: webcrypto.getRandomValues(new Uint8Array(16)).reduce((s, b) => s + b.toString(16).padStart(2, "0"), "7"),
      name: "CN=roster gateway CA, O=roster",
      notBefore: new Date(now - 60_000),
      notAfter: new Date(now + TEN_YEARS_MS),
      signingAlgorithm: ALG,
      keys,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey)
      ]
    })
    const pkcs8 = await webcrypto.subtle.exportKey("pkcs8", keys.privateKey)
    const keyPem = x509.PemConverter.encode(pkcs8, "PRIVATE KEY")
    return { certPem: cert.toString("pem"), keyPem }
  },
  catch: (e) => new CaError({ detail: String(e) })
})

/**
 * Creates `state/ca/` (ca.crt, ca.key 0600) on first start; later starts reuse it. Half of it
 * (a certificate without its key, or a key without its certificate) or a file that cannot be read
 * is refused with the fix, never silently replaced: a new CA would quietly change what boxes and
 * anyone who trusted roster's CA accept.
 */
export const ensureCa = Effect.fn("ca.ensure")(function*() {
  const fs = yield* FileSystem.FileSystem
  const files = layout(yield* Paths)
  const [cert, key] = [yield* fs.exists(files.caCert), yield* fs.exists(files.caKey)]
  if (cert !== key) {
    const [missing, there] = cert ? [files.caKey, files.caCert] : [files.caCert, files.caKey]
    return yield* new CaError({
      detail: `${missing} is missing beside ${there} — restore it from a backup, or remove ${there} too to make a new CA (boxes and anything that trusted the old one then trust the new one only)`
    })
  }
  if (cert) {
    for (const file of [files.caCert, files.caKey]) {
      yield* fs.readFileString(file).pipe(Effect.mapError((e) => new CaError({
        detail: `${file} cannot be read (${e.message}) — it must be readable by the user the daemon runs as (chown it, chmod ${file === files.caKey ? "600" : "644"})`
      })))
    }
  }
  if (!cert) {
    yield* fs.makeDirectory(files.caDir, { recursive: true, mode: 0o700 })
    const { certPem, keyPem } = yield* generate(yield* Clock.currentTimeMillis)
    yield* writeAtomic(files.caKey, keyPem, 0o600)
    yield* writeAtomic(files.caCert, certPem, 0o644)
  }
  yield* ensureBundle()
  return { cert: files.caCert, key: files.caKey, bundle: files.caBundle }
})
