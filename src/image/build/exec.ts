import { Effect, Schema } from "effect"
import { spawn } from "node:child_process"
import { output, reporterCallback } from "../../report/Reporter.js"

export class StepFailed extends Schema.TaggedError<StepFailed>()("StepFailed", {
  step: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `box build: ${this.step} failed: ${this.detail}`
  }
}

/**
 * A host command as one build step, its output shown as progress (indented, last lines kept
 * for the error). Interrupting the build kills the command.
 */
export const runStep = (step: string, command: string, args: ReadonlyArray<string>, options: { cwd?: string; quiet?: boolean } = {}) =>
  Effect.flatMap(reporterCallback, (say) => Effect.async<void, StepFailed>((resume) => {
    const child = spawn(command, [...args], { cwd: options.cwd, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } })
    const tail: Array<string> = []
    const onLine = (chunk: Buffer) => {
      for (const line of chunk.toString().split("\n")) {
        if (line.trim() === "") continue
        tail.push(line)
        if (tail.length > 12) tail.shift()
        if (!options.quiet) say(output(step, line))
      }
    }
    child.stdout.on("data", onLine)
    child.stderr.on("data", onLine)
    child.once("error", (e) => resume(Effect.fail(new StepFailed({ step, detail: e.message }))))
    child.once("close", (code) =>
      resume(code === 0 ? Effect.void : Effect.fail(new StepFailed({ step, detail: `${command} exited ${code}\n${tail.join("\n")}` }))))
    return Effect.sync(() => child.kill("SIGTERM"))
  })).pipe(Effect.scoped)
