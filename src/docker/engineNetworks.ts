import { Effect } from "effect"
import { type DockerApi, DockerError } from "./Docker.js"
import { networkOf } from "./engineAnswers.js"
import type { EngineCall } from "./engineCall.js"

/** The engine's networks: inspect (undefined when absent), create, list by label, remove (absent is removed). */
export const networkCalls = (call: EngineCall): Pick<DockerApi, "networkInspect" | "networkCreate" | "networkList" | "networkRemove"> => {
  const networkInspect = (name: string) =>
    call("network inspect", (engine) => engine.getNetwork(name).inspect()).pipe(
      Effect.flatMap(networkOf("network inspect")),
      Effect.catchIf((e) => e.statusCode === 404, () => Effect.succeed(undefined))
    )

  return {
    networkInspect,
    networkCreate: (spec) =>
      call("network create", (engine) =>
        engine.createNetwork({
          Name: spec.name,
          Driver: "bridge",
          Internal: spec.internal,
          CheckDuplicate: true,
          Options: { ...spec.options },
          Labels: { ...spec.labels }
        })).pipe(
          Effect.zipRight(networkInspect(spec.name)),
          Effect.flatMap((info) =>
            info ? Effect.succeed(info) : Effect.fail(new DockerError({ operation: "network create", detail: `${spec.name} vanished after creation` }))
          )
        ),

    networkList: (labels) =>
      call("network list", (engine) => engine.listNetworks({ filters: { label: [...labels] } })).pipe(
        Effect.flatMap((list) => Effect.forEach(list, networkOf("network list")))
      ),

    networkRemove: (name) =>
      call("network remove", (engine) => engine.getNetwork(name).remove()).pipe(
        Effect.asVoid,
        Effect.catchIf((e) => e.statusCode === 404, () => Effect.void)
      )
  }
}
