import { Clock, Effect, Schema } from "effect"
import { webcrypto } from "node:crypto"
import * as net from "node:net"
import * as tls from "node:tls"
import { loadX509 } from "./x509.js"

export class LeafError extends Schema.TaggedError<LeafError>()("LeafError", { host: Schema.String, detail: Schema.String }) {}

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const
const subtle = webcrypto.subtle

const hexSerial = () => `7${Buffer.from(webcrypto.getRandomValues(new Uint8Array(15))).toString("hex")}`

export interface LeafIssuer {
  /** A TLS context presenting a certificate for `host`, signed by the roster CA; one per host, cached. */
  readonly contextFor: (host: string) => Effect.Effect<tls.SecureContext, LeafError>
}

/** Issues host certificates from the roster CA with one leaf key made per daemon start. */
export const makeLeafIssuer = (caCertPem: string, caKeyPem: string) =>
  Effect.tryPromise({
    try: async () => {
      const x509 = await loadX509()
      const caCert = new x509.X509Certificate(caCertPem)
      const caKey = await subtle.importKey("pkcs8", x509.PemConverter.decodeFirst(caKeyPem), ALG, false, ["sign"])
      const leafKeys = await subtle.generateKey(ALG, true, ["sign", "verify"]) as webcrypto.CryptoKeyPair
      const leafKeyPem = x509.PemConverter.encode(await subtle.exportKey("pkcs8", leafKeys.privateKey), "PRIVATE KEY")
      const authorityKeyId = await x509.AuthorityKeyIdentifierExtension.create(caCert, false)
      return { x509, caCert, caKey, leafKeys, leafKeyPem, authorityKeyId }
    },
    catch: (e) => new LeafError({ host: "*", detail: `the roster CA cannot sign: ${String(e)}` })
  }).pipe(Effect.map(({ authorityKeyId, caCert, caKey, leafKeyPem, leafKeys, x509 }): LeafIssuer => {
    const cache = new Map<string, Promise<tls.SecureContext>>()
    const issue = async (host: string, now: number) => {
      const cert = await x509.X509CertificateGenerator.create({
        serialNumber: hexSerial(),
        subject: `CN=${host}`,
        issuer: caCert.subject,
        notBefore: new Date(now - 60_000),
        notAfter: new Date(now + 365 * 24 * 3600_000),
        signingAlgorithm: ALG,
        publicKey: leafKeys.publicKey,
        signingKey: caKey,
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
          new x509.SubjectAlternativeNameExtension([{ type: net.isIP(host) ? "ip" : "dns", value: host }]),
          authorityKeyId
        ]
      })
      return tls.createSecureContext({ cert: `${cert.toString("pem")}\n${caCert.toString("pem")}`, key: leafKeyPem })
    }
    return {
      contextFor: (host) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.tryPromise({
          try: () => {
            let ctx = cache.get(host)
            if (!ctx) {
              ctx = issue(host, now)
              ctx.catch(() => cache.delete(host))
              cache.set(host, ctx)
            }
            return ctx
          },
          catch: (e) => new LeafError({ host, detail: String(e) })
        }))
    }
  }))
