import * as crypto from "node:crypto"

/**
 * A deployment's short id: the first 10 hex digits of the SHA-256 of its config root. It names
 * the deployment's own lockdown state — its network and its iptables chain — so two deployments
 * on one host, or one deployment with lockdown on and one with it off, never share a rule.
 */
export const deploymentId = (configRoot: string) => crypto.createHash("sha256").update(configRoot).digest("hex").slice(0, 10)

/** The deployment's internal bridge network. */
export const lockdownNetworkName = (configRoot: string) => `roster-locked-${deploymentId(configRoot)}`

/** The deployment's INPUT chain pinning box->host traffic to its gateway port (iptables: at most 28 characters). */
export const egressChainName = (configRoot: string) => `ROSTER-${deploymentId(configRoot)}`

/** Labels on a deployment's network: what `roster doctor` reads to tell whose it is and whether it is still used. */
export const LABEL_NETWORK = "roster.network"
export const LABEL_NETWORK_STATE = "roster.state"
