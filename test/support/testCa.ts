import "reflect-metadata"
import * as x509 from "@peculiar/x509"
import { webcrypto } from "node:crypto"

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0])
const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const

/** A throwaway CA and a server certificate for an IP address (or a DNS name): an "internet" upstream's TLS, made by the test. */
export const makeTestTls = async (ip: string, dns?: string) => {
  const caKeys = await webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"]) as webcrypto.CryptoKeyPair
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01", name: "CN=test upstream CA", notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 86_400_000),
    signingAlgorithm: ALG, keys: caKeys, extensions: [new x509.BasicConstraintsExtension(true, 0, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)]
  })
  const keys = await webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"]) as webcrypto.CryptoKeyPair
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: "02", subject: `CN=${dns ?? ip}`, issuer: ca.subject, notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 86_400_000),
    signingAlgorithm: ALG, publicKey: keys.publicKey, signingKey: caKeys.privateKey,
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: "ip", value: ip }, ...(dns ? [{ type: "dns" as const, value: dns }] : [])]), new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth])]
  })
  return {
    caPem: ca.toString("pem"),
    certPem: cert.toString("pem"),
    keyPem: x509.PemConverter.encode(await webcrypto.subtle.exportKey("pkcs8", keys.privateKey), "PRIVATE KEY")
  }
}
