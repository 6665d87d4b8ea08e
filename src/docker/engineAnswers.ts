import { Effect, ParseResult, Schema } from "effect"
import { type ContainerStats, DockerError, type ImageInfo, type NetworkInfo } from "./Docker.js"

/**
 * The engine's answers as roster reads them, decoded: an engine of another version, a runtime that
 * reports less (gVisor gives no per-CPU figures), or a box stopping as it is asked, can answer with
 * fields missing — read as absent, never as a crash of whatever page or command asked.
 */
const Labels = Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })))

const CpuSample = Schema.Struct({
  cpu_usage: Schema.optional(Schema.NullOr(Schema.Struct({
    total_usage: Schema.optional(Schema.Number),
    percpu_usage: Schema.optional(Schema.NullOr(Schema.Array(Schema.Number)))
  }))),
  system_cpu_usage: Schema.optional(Schema.NullOr(Schema.Number)),
  online_cpus: Schema.optional(Schema.NullOr(Schema.Number))
})

const StatsAnswer = Schema.Struct({
  cpu_stats: Schema.optional(Schema.NullOr(CpuSample)),
  precpu_stats: Schema.optional(Schema.NullOr(CpuSample)),
  memory_stats: Schema.optional(Schema.NullOr(Schema.Struct({
    usage: Schema.optional(Schema.NullOr(Schema.Number)),
    // cgroup v2's inactive_file: page cache the kernel may reclaim, not the box's own memory.
    stats: Schema.optional(Schema.NullOr(Schema.Struct({ inactive_file: Schema.optional(Schema.Number) })))
  })))
})

const ContainerListAnswer = Schema.Array(Schema.Struct({
  Id: Schema.String,
  Names: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  State: Schema.optional(Schema.String),
  Labels,
  Created: Schema.optional(Schema.Number)
}))

const NetworkAnswer = Schema.Struct({
  Id: Schema.String,
  Name: Schema.String,
  Driver: Schema.optional(Schema.String),
  Internal: Schema.optional(Schema.NullOr(Schema.Boolean)),
  Options: Labels,
  IPAM: Schema.optional(Schema.NullOr(Schema.Struct({
    Config: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({ Subnet: Schema.optional(Schema.String), Gateway: Schema.optional(Schema.String) }))))
  }))),
  Labels,
  Containers: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })))
})

const ImageAnswer = Schema.Struct({
  Id: Schema.String,
  Created: Schema.optional(Schema.String),
  Config: Schema.optional(Schema.NullOr(Schema.Struct({ Labels })))
})

/** An answer in the shape roster reads, or a DockerError saying which call's answer could not be read and why. */
const decoded = <A, I>(schema: Schema.Schema<A, I>, operation: string) => (answer: unknown) =>
  Schema.decodeUnknown(schema, { onExcessProperty: "ignore" })(answer).pipe(
    Effect.mapError((e) =>
      new DockerError({ operation, detail: `the engine's answer could not be read: ${ParseResult.TreeFormatter.formatErrorSync(e).split("\n").slice(0, 3).join(" ")}` })
    )
  )

/**
 * One stats sample: CPU time used between the engine's two samples over the time that passed, per core,
 * and the memory in use less the page cache. A figure the answer does not carry is absent (shown as such).
 */
export const statsOf = (answer: unknown): Effect.Effect<ContainerStats, DockerError> =>
  Effect.map(decoded(StatsAnswer, "stats")(answer), (s) => {
    const now = s.cpu_stats?.cpu_usage?.total_usage
    const before = s.precpu_stats?.cpu_usage?.total_usage
    const system = (s.cpu_stats?.system_cpu_usage ?? 0) - (s.precpu_stats?.system_cpu_usage ?? 0)
    const cores = s.cpu_stats?.online_cpus || s.cpu_stats?.cpu_usage?.percpu_usage?.length || 1
    const used = s.memory_stats?.usage
    const cpuPercent = now === undefined || before === undefined ? undefined : system > 0 && now > before ? ((now - before) / system) * cores * 100 : 0
    const memoryBytes = used === undefined || used === null ? undefined : Math.max(0, used - (s.memory_stats?.stats?.inactive_file ?? 0))
    return { cpuPercent, memoryBytes }
  })

export const containerListOf = (answer: unknown) =>
  Effect.map(decoded(ContainerListAnswer, "list")(answer), (list) =>
    list.map((c) => ({ id: c.Id, names: c.Names ?? [], state: c.State ?? "unknown", labels: c.Labels ?? {}, created: (c.Created ?? 0) * 1000 })))

export const networkOf = (operation: string) => (answer: unknown): Effect.Effect<NetworkInfo, DockerError> =>
  Effect.map(decoded(NetworkAnswer, operation)(answer), (raw) => ({
    id: raw.Id,
    name: raw.Name,
    driver: raw.Driver ?? "",
    internal: raw.Internal === true,
    options: raw.Options ?? {},
    subnets: (raw.IPAM?.Config ?? []).map((c) => ({ subnet: c.Subnet ?? "", gateway: c.Gateway ?? "" })),
    labels: raw.Labels ?? {},
    containers: Object.keys(raw.Containers ?? {}).length
  }))

export const imageOf = (answer: unknown): Effect.Effect<ImageInfo, DockerError> =>
  Effect.map(decoded(ImageAnswer, "image inspect")(answer), (raw) => ({ id: raw.Id, created: raw.Created ?? "", labels: raw.Config?.Labels ?? {} }))
