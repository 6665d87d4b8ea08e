import type Dockerode from "dockerode"
import { Effect, Layer, Schema } from "effect"
import { Docker, type DockerApi, DockerError, DockerUnavailable } from "./Docker.js"
import { makeEngineCall } from "./engineCall.js"
import { containerCalls } from "./engineContainers.js"
import { imageCalls } from "./engineImages.js"
import { networkCalls } from "./engineNetworks.js"
import { streamCalls } from "./engineStreams.js"

// Only what roster reads of `GET /info`: the runtimes' names.
const EngineRuntimes = Schema.Struct({
  Runtimes: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})

/** The Engine API over dockerode, loaded on the first call (see makeEngineCall). */
export const makeDockerApi = (load: () => Promise<Dockerode>): DockerApi => {
  const call = makeEngineCall(load)
  return {
    ping: call("ping", (engine) => engine.ping()).pipe(
      Effect.timeout("5 seconds"),
      Effect.asVoid,
      Effect.mapError((e) => new DockerUnavailable({ detail: e._tag === "TimeoutException" ? "no answer in 5 s" : e.detail }))
    ),
    runtimes: call("info", (engine) => engine.info()).pipe(
      Effect.flatMap((info) => Schema.decodeUnknown(EngineRuntimes)(info)),
      Effect.map((info) => Object.keys(info.Runtimes ?? {}).sort()),
      Effect.mapError((e) => e._tag === "DockerError" ? e : new DockerError({ operation: "info", detail: `unreadable answer: ${e.message}` }))
    ),
    ...networkCalls(call),
    ...imageCalls(call),
    ...containerCalls(call),
    ...streamCalls(call)
  }
}

/** dockerode honours DOCKER_HOST / the default socket. */
export const DockerLive = Layer.sync(Docker, () => makeDockerApi(() => import("dockerode").then((m) => new m.default())))
