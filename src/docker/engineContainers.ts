import type Dockerode from "dockerode"
import { Effect } from "effect"
import { type ContainerSpec, type DockerApi, DockerError } from "./Docker.js"
import { containerListOf, statsOf } from "./engineAnswers.js"
import { absent, type EngineCall } from "./engineCall.js"

/** How long a removal the engine has under way is waited for before it is called failed. */
const REMOVAL_WAIT = "30 seconds"

/** 404: no such container — for a removal, done. */
const gone = (e: DockerError) => e.statusCode === 404

/** Once a container the engine is removing is gone (404: gone already). */
const removed = (call: EngineCall, id: string) =>
  call("remove", (engine, _modem, abortSignal) => engine.getContainer(id).wait({ condition: "removed", abortSignal })).pipe(
    Effect.asVoid,
    Effect.catchIf(gone, () => Effect.void),
    Effect.timeoutFail({
      duration: REMOVAL_WAIT,
      onTimeout: () => new DockerError({ operation: "remove", detail: `${id} was still being removed after ${REMOVAL_WAIT}` })
    })
  )

/** The engine's containers: create, start, kill (one not running is an answer) and remove (one gone is done), list by label, one stats sample. */
export const containerCalls = (call: EngineCall): Pick<DockerApi, "containerCreate" | "containerStart" | "containerKill" | "containerRemove" | "containerList" | "containerRename" | "containerStats"> => ({
  containerCreate: (spec: ContainerSpec) =>
    call("create", (engine) =>
      engine.createContainer(structuredClone(spec) as Dockerode.ContainerCreateOptions)).pipe(
        Effect.map((c) => c.id)
      ),

  containerStart: (id) => call("start", (engine, _modem, abortSignal) => engine.getContainer(id).start({ abortSignal })).pipe(Effect.asVoid),

  containerKill: (id, signal = "SIGKILL") =>
    call("kill", (engine, _modem, abortSignal) => engine.getContainer(id).kill({ signal, abortSignal })).pipe(
      Effect.as(true),
      Effect.catchIf(absent, () => Effect.succeed(false))
    ),

  containerRemove: (id) =>
    call("remove", (engine) => engine.getContainer(id).remove({ force: true, v: true })).pipe(
      Effect.asVoid,
      // 409: the engine is removing it already (an AutoRemove box that just exited). Done is gone:
      // a caller that goes on (a CLI that exits, a test that lists) must not find it half-removed.
      Effect.catchIf((e) => e.statusCode === 409, () => removed(call, id)),
      Effect.catchIf(gone, () => Effect.void)
    ),

  containerList: (labels, name) =>
    call("list", (engine, _modem, abortSignal) =>
      engine.listContainers({ all: true, filters: { label: [...labels], ...(name !== undefined ? { name: [name] } : {}) }, abortSignal })).pipe(
        Effect.flatMap(containerListOf)
      ),

  containerRename: (id, name) =>
    call("rename", (engine, _modem, abortSignal) => engine.getContainer(id).rename({ name, abortSignal })).pipe(Effect.asVoid),

  containerStats: (id) =>
    call("stats", (engine) => engine.getContainer(id).stats({ stream: false })).pipe(
      Effect.flatMap(statsOf),
      Effect.catchIf(absent, () => Effect.succeed(undefined))
    )
})
