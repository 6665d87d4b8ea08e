import { Option, Schema } from "effect"
import * as path from "node:path"
import { parse as parseToml } from "smol-toml"
import { readTextAtStart } from "../fs/readAtStart.js"
import { nodeNameOf } from "./nodeName.js"

/** Where this machine stands in a fleet: its node's name, and the folder every node mounts. */
export interface FleetPlace {
  readonly node: string
  readonly shared: string
}

/** Only what the folders need of org.toml: the rest is OrgConfig's to decode (and to report when wrong). */
const ClusterPlace = Schema.Struct({
  cluster: Schema.optional(Schema.Struct({
    shared_data: Schema.String.pipe(Schema.filter((p) => path.isAbsolute(p))),
    node: Schema.optional(Schema.String)
  }))
})

/**
 * This machine's place in a fleet, from org.toml's `[cluster]` (and ROSTER_NODE), read before
 * any service: the deployment's folders depend on it (a fleet keeps what workers carry between
 * nodes in its shared folder). None without `[cluster]`, or with one OrgConfig will refuse.
 */
export const fleetPlaceOf = (configRoot: string, env: NodeJS.ProcessEnv): FleetPlace | undefined => {
  const text = readTextAtStart(path.join(configRoot, "org.toml"))
  if (text === undefined) return undefined
  let raw: unknown
  try {
    raw = parseToml(text)
  } catch {
    return undefined
  }
  const cluster = Option.getOrUndefined(Schema.decodeUnknownOption(ClusterPlace)(raw))?.cluster
  if (!cluster) return undefined
  const node = nodeNameOf(cluster, env)
  return typeof node === "string" ? { node, shared: cluster.shared_data } : undefined
}
