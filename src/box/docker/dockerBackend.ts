import { Context, Effect, Exit, Fiber, Layer, Option, Scope } from "effect"
import { isRunId, isWorkerName } from "../../config/names.js"
import { Paths } from "../../config/Paths.js"
import * as C from "../../contract/constants.js"
import { type ContainerSummary, Docker, type DockerError } from "../../docker/Docker.js"
import { BoxBackend } from "../../backend/BoxBackend.js"
import type { FoundBox } from "../../backend/foundBox.js"
import { containerName } from "../../backend/plan.js"
import { ensureLockdown } from "./lockdown.js"
import { resolveRuntime } from "./runtime.js"
import { containerSpec } from "./spec.js"

const BOX_PREFIX = containerName("")

const number = (text: string | undefined) => {
  const n = Number(text)
  return text !== undefined && text !== "" && Number.isFinite(n) ? n : null
}

/**
 * A container of this deployment as roster knows it: read from its labels, and its run from its name
 * (`roster-box-<run-id>`) — a warm box is made under a run id of its own and renamed to the run that
 * takes it (a name can change, a label cannot); the label names the run it was made under.
 */
export const foundBox = (c: ContainerSummary): FoundBox => {
  const name = (c.names[0] ?? "").replace(/^\//, "")
  const named = name.startsWith(BOX_PREFIX) ? name.slice(BOX_PREFIX.length) : ""
  const runId = isRunId(named) ? named : c.labels[C.LABEL_RUN_ID] ?? ""
  const worker = c.labels[C.LABEL_WORKER] ?? ""
  const pid = number(c.labels[C.LABEL_OWNER_PID])
  return {
    id: c.id,
    name,
    runId,
    worker,
    kind: c.labels[C.LABEL_KIND] ?? "",
    taskId: c.labels[C.LABEL_TASK_ID] || null,
    deadline: number(c.labels[C.LABEL_DEADLINE]),
    owner: pid === null ? null : { pid, start: c.labels[C.LABEL_OWNER_START] ?? "" },
    created: c.created,
    state: c.state,
    named: isRunId(runId) && isWorkerName(worker),
    // Renamed from the run id it was made under to a run's: a run took it.
    ...(c.labels[C.LABEL_KIND] === "warm" && runId !== (c.labels[C.LABEL_RUN_ID] ?? "") ? { takenWarm: true } : {})
  }
}

/** What the Docker backend works through: the engine, and what the lockdown and the runtime read. */
type BackendEnv = Effect.Effect.Context<ReturnType<typeof ensureLockdown>> | Effect.Effect.Context<ReturnType<typeof resolveRuntime>> | Docker | Paths

/**
 * A box as a container: made from its plan's spec, attached before it starts (no byte lost), its
 * wait armed before it starts (an AutoRemove box that exits at once still reports its code),
 * killed and removed when its scope closes. The engine makes a container whether or not its caller
 * still waits, so a run stopped during the create (a Ctrl-C at a run's start) must not forget it:
 * the create runs in a fiber the stop does not end, and the close removes what it made — at once when
 * the engine has answered, else as soon as it does (a hung engine does not hold the Ctrl-C). A create
 * that failed made nothing: nothing is removed (not another's container of the same name).
 */
const openContainer = (docker: Context.Tag.Service<Docker>) => (plan: Parameters<typeof containerSpec>[0]) =>
  Effect.gen(function*() {
    const spec = containerSpec(plan)
    const creating = yield* Effect.uninterruptible(
      Effect.tap(Effect.forkDaemon(docker.containerCreate(spec)), (fiber) => Effect.addFinalizer(() => removeCreated(docker, spec.name, fiber)))
    )
    // The wait stays interruptible (an engine that hangs must not hold a Ctrl-C); the close settles the create.
    const id = yield* Fiber.join(creating)
    const attached = yield* docker.containerAttach(id)
    const waiting = yield* Effect.forkScoped(yield* docker.containerWait(id))
    return {
      id,
      name: spec.name,
      stdout: attached.stdout,
      stderr: attached.stderr,
      start: docker.containerStart(id),
      exited: Fiber.join(waiting),
      write: attached.write,
      closeStdin: attached.closeStdin,
      kill: docker.containerKill(id).pipe(Effect.asVoid)
    }
  })

/** A box's close: the container its create made killed and removed, now or once the engine answers the create. */
const removeCreated = (docker: Context.Tag.Service<Docker>, name: string, creating: Fiber.Fiber<string, DockerError>) => {
  const removeMade = (exit: Exit.Exit<string, DockerError>) =>
    Exit.isSuccess(exit)
      ? docker.containerKill(exit.value).pipe(
        Effect.zipRight(docker.containerRemove(exit.value)),
        Effect.catchAll((e) => Effect.logWarning(`could not remove box ${name}: ${e.message} — remove it with: docker rm -f ${name}`))
      )
      : Effect.void
  return Effect.flatMap(Fiber.poll(creating), Option.match({
    onSome: removeMade,
    // Outlives the run's scope on purpose: the run is over, and what the engine makes for it after must still go.
    onNone: () =>
      Effect.logInfo(`box ${name}: its run stopped while the engine made it; it is removed once the engine answers`).pipe(
        Effect.zipRight(Effect.forkDaemon(Effect.flatMap(Fiber.await(creating), removeMade))),
        Effect.asVoid
      )
  }))
}

/** The Docker engine as roster's box backend: the one implementation of {@link BoxBackend}, over the `Docker` service. */
export const DockerBackend = Layer.effect(
  BoxBackend,
  Effect.gen(function*() {
    const docker = yield* Docker
    const paths = yield* Paths
    const env = Context.omit(Scope.Scope)(yield* Effect.context<BackendEnv>()) as Context.Context<BackendEnv>
    // Only this deployment's boxes: a run's box by its name (the engine's filter matches a part of it;
    // the exact one is kept) and its deployment's label — a container of another deployment (or none)
    // named like one of this deployment's runs is never its box to the gateway, a kill or the reaper.
    const ours = `${C.LABEL_DEPLOYMENT}=${paths.config}`
    const list = (filter?: { readonly runId?: string; readonly ended?: boolean }) =>
      (filter?.runId !== undefined ? docker.containerList([C.LABEL_RUN_ID, ours], containerName(filter.runId)) : docker.containerList([ours])).pipe(
        Effect.map((cs) =>
          cs.filter((c) => filter?.ended || c.state === "running" || c.state === "created").map(foundBox)
            .filter((b) => filter?.runId === undefined || b.runId === filter.runId)
        )
      )
    return BoxBackend.of({
      ping: docker.ping,
      isolation: (policy) =>
        ensureLockdown(policy).pipe(
          Effect.map((l) => ({
            network: l.network.name, networkId: l.network.id, gatewayAddress: l.gatewayAddress, gatewayPort: l.gatewayPort, credentials: l.credentials
          })),
          Effect.provide(env)
        ),
      runtime: (policy) => Effect.provide(resolveRuntime(policy), env),
      open: openContainer(docker),
      findAgain: (id) =>
        Effect.map(docker.containerWait(id), (exited) => ({ exited, output: docker.containerAttach(id, { replay: true }) })),
      list,
      killRun: (runId) =>
        list({ runId, ended: true }).pipe(
          Effect.flatMap((boxes) => Effect.forEach(boxes, (b) => docker.containerKill(b.id))),
          Effect.map((killed) => killed.filter(Boolean).length)
        ),
      rename: (box, runId) => docker.containerRename(box, containerName(runId)),
      kill: (box) => docker.containerKill(box),
      remove: (box) => docker.containerKill(box).pipe(Effect.zipRight(docker.containerRemove(box))),
      imageId: (image) => Effect.map(docker.imageInspect(image), (found) => found?.id),
      stats: (id) => docker.containerStats(id)
    })
  })
)

export { containerName }
