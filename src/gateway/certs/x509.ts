import type * as X509 from "@peculiar/x509"
import { webcrypto } from "node:crypto"

let loaded: Promise<typeof X509> | undefined

/** @peculiar/x509 (and the reflect polyfill it needs), loaded when a certificate is first made: only the daemon and CA setup pay for it. */
export const loadX509 = (): Promise<typeof X509> =>
  (loaded ??= import("reflect-metadata").then(() => import("@peculiar/x509")).then((x509) => {
    x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0])
    return x509
  }))
