import * as os from "node:os"

const VALID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/

/** This machine's name in the fleet: ROSTER_NODE, else `[cluster] node`, else the host name (made a valid name). */
export const nodeNameOf = (cluster: { readonly node?: string | undefined }, env: NodeJS.ProcessEnv = process.env): string | { readonly invalid: string } => {
  const fromEnv = env.ROSTER_NODE
  if (fromEnv !== undefined && fromEnv !== "") return VALID.test(fromEnv) ? fromEnv : { invalid: `ROSTER_NODE=${fromEnv}` }
  if (cluster.node !== undefined) return cluster.node
  const host = os.hostname().replace(/[^A-Za-z0-9._-]/g, "-").replace(/^[^A-Za-z0-9]+/, "").slice(0, 63)
  return host === "" ? "node" : host
}
