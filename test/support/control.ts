import Dockerode from "dockerode"
import * as http from "node:http"
import type { Readable } from "node:stream"
import type { Deployment } from "./deployment.js"

/**
 * A task added through a deployment's control API (what `roster task add` calls, without a CLI
 * start each): its id. A daemon just started answers on its gateway a moment before its control
 * socket is up: a socket not there yet is tried again for 10 s.
 */
export const addViaApi = async (d: Deployment, worker: string, prompt: string): Promise<string> => {
  for (const deadline = Date.now() + 10_000; ;) {
    try {
      return await addOnce(d, worker, prompt)
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code
      if ((code !== "ENOENT" && code !== "ECONNREFUSED") || Date.now() > deadline) throw e
      await new Promise((r) => setTimeout(r, 100))
    }
  }
}

/** One call of a deployment's control API on its socket: the answer's JSON, or an error naming the call and its status. */
const controlCall = <A>(d: Deployment, method: "GET" | "POST", route: string, what: string, payload?: unknown) =>
  new Promise<A>((resolve, reject) => {
    const body = payload === undefined ? undefined : JSON.stringify(payload)
    const req = http.request({
      socketPath: d.file("state", "control.sock"),
      path: route,
      method,
      headers: body === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(body) }
    }, (res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(text) as A) : reject(new Error(`${what} ${res.statusCode}: ${text}`))))
    })
    req.on("error", reject)
    req.end(body)
  })

/** A POST to the control API as a script makes it: the answer's JSON, or an error with its status and body. */
export const controlPost = <A>(d: Deployment, route: string, payload: unknown) => controlCall<A>(d, "POST", route, `POST ${route}`, payload)

const addOnce = (d: Deployment, worker: string, prompt: string) =>
  controlCall<{ task_id: string }>(d, "POST", "/tasks", "task add", { worker, prompt, via: "api" }).then((t) => t.task_id)

/**
 * A deployment's tasks as its control API lists them (what `roster task list --json` prints while the
 * daemon runs): for a test that polls often, without a CLI start (half a core-second) each time.
 */
export const tasksViaApi = <T>(d: Deployment) => controlCall<Array<T>>(d, "GET", "/tasks", "task list")

/** One container event as the engine reports it: what happened, when (ms), and the container's labels. */
export interface EngineEvent {
  readonly action: string
  readonly at: number
  readonly labels: Readonly<Record<string, string>>
}

/** The engine's own container events (`start`, `die`, …) as they happen, until `close`. */
export const engineEvents = async (actions: ReadonlyArray<string>, onEvent: (e: EngineEvent) => void) => {
  const stream = (await new Dockerode().getEvents({ filters: { type: ["container"], event: [...actions] } })) as unknown as Readable
  let pending = ""
  stream.on("data", (chunk: Buffer) => {
    pending += chunk.toString()
    const lines = pending.split("\n")
    pending = lines.pop() ?? ""
    for (const l of lines.filter((x) => x.trim() !== "")) {
      const e = JSON.parse(l) as { Action: string; timeNano: number; Actor: { Attributes: Record<string, string> } }
      onEvent({ action: e.Action, at: e.timeNano / 1e6, labels: e.Actor.Attributes })
    }
  })
  return { close: () => stream.destroy() }
}
