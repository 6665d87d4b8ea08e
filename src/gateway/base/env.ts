import type { FileSystem, Path } from "@effect/platform"
import type { OrgConfig } from "../../config/OrgConfig.js"
import type { Paths } from "../../config/Paths.js"
import type { BoxBackend } from "../../backend/BoxBackend.js"
import type { Files } from "../../fs/Files.js"
import type { HostGit } from "../../knowledge/HostGit.js"
import type { MemoryStore } from "../../memory/MemoryStore.js"
import type { RunFence } from "../../run/RunFence.js"
import type { RunLog } from "../../run/RunLog.js"
import type { TaskStore } from "../../task/TaskStore.js"
import type { Vault } from "../../vault/Vault.js"
import type { Audit } from "./Audit.js"
import type { Dialer } from "./Dialer.js"
import type { LiveRuns } from "./LiveRuns.js"

/** The services a gateway request handler runs with. */
export type GatewayEnv = OrgConfig | BoxBackend | Dialer | Paths | LiveRuns | Vault | Audit | Files | HostGit | RunLog | TaskStore | MemoryStore | RunFence | FileSystem.FileSystem | Path.Path
