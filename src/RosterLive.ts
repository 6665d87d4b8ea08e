import * as NodeContext from "@effect/platform-node/NodeContext"
import { Layer } from "effect"
import { Firewall } from "./box/Firewall.js"
import { ImageStore } from "./box/ImageStore.js"
import { OrgConfig } from "./config/OrgConfig.js"
import { Paths } from "./config/Paths.js"
import { DockerLive } from "./docker/DockerLive.js"
import { Files } from "./fs/Files.js"
import { Audit } from "./gateway/Audit.js"
import { Dialer } from "./gateway/Dialer.js"
import { GatewayProbe } from "./contract/GatewayProbe.js"
import { LiveRuns } from "./gateway/LiveRuns.js"
import { HostGit } from "./knowledge/HostGit.js"
import { Reporter } from "./report/Reporter.js"
import { Hurry } from "./run/Hurry.js"
import { RunLog } from "./run/RunLog.js"
import { MemoryStore } from "./memory/MemoryStore.js"
import { TaskStore } from "./task/TaskStore.js"
import { Vault } from "./vault/Vault.js"

const Base = Layer.mergeAll(NodeContext.layer, Files.layer, Paths.layer, DockerLive, GatewayProbe.layer, Firewall.layer, Dialer.layer, Hurry.layerNever, HostGit.layer, Reporter.layerLog)

/** Every live service roster needs, built once and provided at the edge. */
export const RosterLive = Layer.mergeAll(OrgConfig.layer, RunLog.layer, ImageStore.layer, Vault.layer, LiveRuns.layer, Audit.layer, TaskStore.layer, MemoryStore.layer).pipe(
  Layer.provideMerge(Base)
)
