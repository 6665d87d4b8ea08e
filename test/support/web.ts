import { type ChildProcess, spawn } from "node:child_process"
import { freePort, ROSTER_BIN } from "./deployment.js"

/** Debian's chromium, driven through playwright-core (no browser download). */
export const CHROMIUM = "/usr/bin/chromium"

/** A `roster web` of a deployment, once it has printed its login URL. */
export interface WebUi {
  readonly port: number
  readonly loginUrl: string
  readonly process: ChildProcess
}

/** Starts `roster web` on a free port with a deployment's environment; fails with what it printed if no URL comes in 30 s. */
export const startWeb = async (env: NodeJS.ProcessEnv): Promise<WebUi> => {
  const port = await freePort()
  const web = spawn(ROSTER_BIN, ["web", "--port", String(port)], { env, stdio: ["ignore", "pipe", "pipe"] })
  const loginUrl = await new Promise<string>((resolve, reject) => {
    let out = ""
    const timer = setTimeout(() => reject(new Error(`roster web printed no URL: ${out}`)), 30_000)
    web.stdout?.on("data", (c: Buffer) => {
      out += c.toString()
      const url = /^(http:\/\/127\.0\.0\.1:\d+\/login\?token=[0-9a-f]{64})$/m.exec(out)?.[1]
      if (url) {
        clearTimeout(timer)
        resolve(url)
      }
    })
    web.once("exit", (code) => reject(new Error(`roster web exited (${code}): ${out}`)))
  })
  return { port, loginUrl, process: web }
}
