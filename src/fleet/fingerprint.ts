import { FileSystem } from "@effect/platform"
import { type Context, Effect } from "effect"
import * as crypto from "node:crypto"
import * as path from "node:path"
import { layout, Paths } from "../config/Paths.js"
import type { Org } from "../config/schema.js"

const digest = (data: string | Uint8Array) => crypto.createHash("sha256").update(data).digest("hex").slice(0, 16)

/** JSON with its keys sorted: the same settings give the same text however the file ordered them. */
const canonical = (v: unknown): string =>
  Array.isArray(v)
    ? `[${v.map(canonical).join(",")}]`
    : v !== null && typeof v === "object"
    ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(",")}}`
    : JSON.stringify(v) ?? "null"

/** org.toml as the fleet compares it: its settings, without those that differ per node by design (its name, ports and addresses). */
export const orgDigest = (org: Org) => {
  const { cluster, gateway, ...rest } = org
  const { port: _port, listen: _addrs, ...sharedGateway } = gateway
  const { advertise: _advertise, listen: _listen, node: _node, ...sharedCluster } = cluster ?? {}
  return digest(canonical({ ...rest, gateway: sharedGateway, cluster: sharedCluster }))
}

/** Every file under workers/, by its path there, with its content's digest. */
const workerFiles = (fs: FileSystem.FileSystem, paths: Context.Tag.Service<Paths>) => Effect.gen(function*() {
  const root = layout(paths).workersDir
  const names = yield* fs.readDirectory(root, { recursive: true }).pipe(Effect.orElseSucceed(() => [] as Array<string>))
  const out: Array<readonly [string, string]> = []
  for (const name of names.sort()) {
    const file = path.join(root, name)
    const info = yield* fs.stat(file).pipe(Effect.option)
    if (info._tag === "None" || info.value.type !== "File") continue
    const bytes = yield* fs.readFile(file).pipe(Effect.option)
    if (bytes._tag === "Some") out.push([`workers/${name}`, digest(bytes.value)])
  }
  return out
})

/**
 * What this node's config is, file by file, for the fleet to compare: every node is meant to
 * hold the same files (put there by whatever deploys the machines), except `[cluster] node` and
 * `[gateway] port`.
 */
export const configFingerprint = (org: Org) =>
  Effect.flatMap(Effect.zip(FileSystem.FileSystem, Paths), ([fs, paths]) => configFingerprintIn(fs, paths)(org))

/** {@link configFingerprint} through a file system and folders taken once (a daemon's beat reads it every 10 s). */
export const configFingerprintIn = (fs: FileSystem.FileSystem, paths: Context.Tag.Service<Paths>) => (org: Org) =>
  Effect.map(workerFiles(fs, paths), (files) => Object.fromEntries([["org.toml", orgDigest(org)] as const, ...files]))

/** The files whose digests differ between two fingerprints (present in one only included). */
export const differingFiles = (a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>) =>
  [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => a[k] !== b[k]).sort()
