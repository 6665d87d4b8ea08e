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

const addOnce = (d: Deployment, worker: string, prompt: string) =>
  new Promise<string>((resolve, reject) => {
    const body = JSON.stringify({ worker, prompt, via: "api" })
    const req = http.request({
      socketPath: d.file("state", "control.sock"),
      path: "/tasks",
      method: "POST",
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) }
    }, (res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => (res.statusCode === 200 ? resolve((JSON.parse(text) as { task_id: string }).task_id) : reject(new Error(`task add ${res.statusCode}: ${text}`))))
    })
    req.on("error", reject)
    req.end(body)
  })

/**
 * A deployment's tasks as its control API lists them (what `roster task list --json` prints while the
 * daemon runs): for a test that polls often, without a CLI start (half a core-second) each time.
 */
export const tasksViaApi = <T>(d: Deployment) =>
  new Promise<Array<T>>((resolve, reject) => {
    http.get({ socketPath: d.file("state", "control.sock"), path: "/tasks" }, (res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(text) as Array<T>) : reject(new Error(`task list ${res.statusCode}: ${text}`))))
    }).on("error", reject)
  })

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
