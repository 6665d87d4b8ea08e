import Dockerode from "dockerode"
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { REHEARSAL_LONG_WORK, REHEARSAL_LONG_WORK_ASK } from "../../src/rehearsal/script.js"
import { type Received, serveRehearsal } from "../../src/rehearsal/server.js"
import { type Deployment, makeDeployment } from "../support/deployment.js"
import { expectOnlyWarm } from "../support/leftovers.js"
import { tasksViaApi } from "../support/control.js"
import { PI_IMAGE } from "./globalSetup.js"

const docker = new Dockerode()

interface Task {
  readonly task_id: string
  readonly worker: string
  readonly status: string
  readonly run_ids: ReadonlyArray<string>
  readonly final_text?: string | null
  readonly interrupted?: { readonly run_id: string; readonly by: string }
  readonly continues?: { readonly task_id: string | null; readonly run_id: string } | null
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Polls until `check` gives a value; a miss fails saying what it last saw. */
const until = async <A>(what: string, check: (seen: (x: unknown) => void) => Promise<A | undefined>, ms: number): Promise<A> => {
  const end = Date.now() + ms
  let last: unknown
  for (;;) {
    const got = await check((x) => (last = x))
    if (got !== undefined) return got
    if (Date.now() > end) throw new Error(`${what}: not within ${ms / 1000} s; last seen: ${JSON.stringify(last) ?? "nothing"}`)
    await sleep(300)
  }
}

const WORKERS = ["ann", "ben", "cat", "dan"]

/**
 * Work that survives roster's own interruptions, with real pi and the rehearsal model (a local
 * stand-in for Claude): four tasks mid-work and six waiting when the daemon stops — or is killed
 * with its boxes gone, as a reboot leaves it. After the next start every task is done once, and
 * each of the four carried on from its interrupted run: its pi session resumed, it recalls a word
 * said only before the stop.
 */
describe("tasks through a stop and a reboot (real daemon, real pi in real boxes, the rehearsal model)", () => {
  let d: Deployment
  let scope: Scope.CloseableScope
  let model: { port: number; received: Array<Received> }

  beforeAll(async () => {
    scope = Effect.runSync(Scope.make())
    model = await Effect.runPromise(serveRehearsal({ port: 0, delayMs: 200 }).pipe(Scope.extend(scope)))
    d = await makeDeployment([
      "[[grant]]", `name = "anthropic"`, `hosts = ["api.anthropic.com"]`, `scope = ["org/*"]`, `credential = "anthropic"`,
      "[[route]]", `host = "api.anthropic.com"`, `upstream = "http://127.0.0.1:${model.port}"`,
      "[supervisor]", "concurrency = 4"
    ].join("\n"), PI_IMAGE)
    for (const w of WORKERS) expect((await d.roster(["worker", "add", w])).code).toBe(0)
  })

  afterAll(async () => {
    await d?.stop()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  const tasks = () => tasksViaApi<Task>(d)
  const add = async (worker: string, prompt: string) => {
    const r = await d.roster(["task", "add", worker, prompt])
    expect(r.code, r.stderr).toBe(0)
    return /^task (t-[0-9a-f]{8}) queued$/m.exec(r.stdout)?.[1] ?? ""
  }
  const transcript = (worker: string, runId: string) => {
    const file = d.file("data", "runs", worker, runId, "stdout.jsonl")
    return fs.existsSync(file) ? fs.readFileSync(file, "utf8") : ""
  }
  /**
   * Whether the run's pi session (what a continuation resumes, data/runs/<worker>/<run>/home/session) holds
   * `text`: pi writes it a moment after its output says so, and under a loaded machine the stop could fall
   * between the two — the continuation would then start the job again, correctly, and never recall the word.
   */
  const sessionSays = (worker: string, runId: string, text: string) => {
    const dir = d.file("data", "runs", worker, runId, "home", "session")
    if (!fs.existsSync(dir)) return false
    return fs.readdirSync(dir, { recursive: true }).map((f) => path.join(dir, String(f)))
      .some((f) => fs.statSync(f).isFile() && fs.readFileSync(f, "utf8").includes(text))
  }
  const boxesOf = () => docker.listContainers({ all: true, filters: { label: [`roster.deployment=${d.file("config")}`] } })
  const daemonPid = () => (JSON.parse(fs.readFileSync(d.file("state", "gateway.json"), "utf8")) as { pid: number }).pid

  for (const how of ["stop", "restart"] as const) {
    it(`${how === "stop" ? "roster server stop" : "kill -9 of the daemon with its boxes removed (a reboot)"}: 4 running and 6 queued → after the start all 10 done once; the 4 carry on their interrupted runs and recall what was said before`, async () => {
      const working = await Promise.all(WORKERS.map((w) => add(w, `${REHEARSAL_LONG_WORK_ASK}: make up a word, say it, then get on with the long job.`)))
      // Six behind them: each worker has a box, so these wait whatever the concurrency.
      const waiting: Array<string> = []
      for (let i = 0; i < 6; i++) waiting.push(await add(WORKERS[i % 4]!, "What system is your box running?"))
      // All four mid-work: each run's pi has started the long bash command, and its session holds the word it said.
      const runs = await until("the four tasks mid-work", async (seen) => {
        const ts = (await tasks()).filter((t) => working.includes(t.task_id))
        const busy = ts.filter((t) => t.status === "running" && transcript(t.worker, t.run_ids.at(-1) ?? "").includes(REHEARSAL_LONG_WORK) &&
          sessionSays(t.worker, t.run_ids.at(-1) ?? "", "the word is WORD-"))
        seen(ts.map((t) => [t.worker, t.status]))
        return busy.length === 4 ? new Map(busy.map((t) => [t.task_id, t.run_ids.at(-1) ?? ""])) : undefined
      }, 120_000)
      expect((await tasks()).filter((t) => waiting.includes(t.task_id)).map((t) => t.status)).toEqual(Array(6).fill("queued"))

      if (how === "stop") {
        expect((await d.roster(["server", "stop"])).code).toBe(0)
      } else {
        process.kill(daemonPid(), "SIGKILL")
        // A reboot takes every box, including one the engine finishes making after the daemon died (a create it was
        // already asked for, a warm box say): removed until none is left for a moment.
        for (let quiet = 0, tries = 0; quiet < 2 && tries < 40; tries++) {
          const left = await boxesOf()
          for (const b of left) await docker.getContainer(b.Id).remove({ force: true }).catch(() => undefined)
          quiet = left.length === 0 ? quiet + 1 : 0
          await new Promise((r) => setTimeout(r, 250))
        }
      }
      expect(await boxesOf()).toEqual([])
      const started = await d.roster(["server", "start"])
      expect(started.code, started.stderr).toBe(0)

      const done = await until("all ten done", async (seen) => {
        const ts = (await tasks()).filter((t) => [...working, ...waiting].includes(t.task_id))
        seen(ts.map((t) => [t.task_id, t.status, t.run_ids.length]))
        return ts.length === 10 && ts.every((t) => t.status === "done") ? ts : undefined
      }, 240_000)
      for (const t of done.filter((x) => waiting.includes(x.task_id))) expect(t.run_ids, t.task_id).toHaveLength(1)
      for (const id of working) {
        const t = done.find((x) => x.task_id === id)!
        const first = runs.get(id)!
        // The word the model said in the interrupted run, before the stop.
        const word = /the word is (WORD-[0-9a-z]+)/.exec(transcript(t.worker, first))?.[1]
        expect(word, id).toBeDefined()
        // Once as a task: the interrupted run, then the one that carried it on.
        expect(t.run_ids, id).toEqual([first, expect.any(String)])
        expect(t.interrupted, id).toMatchObject({ run_id: first, by: how })
        expect(t.continues, id).toEqual({ task_id: id, run_id: first })
        // The resumed session remembers its own words: the word was said only before the stop.
        expect(String(t.final_text), id).toContain(`before it I said the word is ${word}`)
        const record = JSON.parse(fs.readFileSync(d.file("data", "runs", t.worker, first, "run.json"), "utf8")) as { ended_by: string }
        expect(record.ended_by, id).not.toBe("exit")
        const context = JSON.parse(fs.readFileSync(path.join(d.file("data", "runs", t.worker, t.run_ids[1]!), "context.json"), "utf8")) as { input_prompt: string }
        expect(context.input_prompt).not.toContain(word!)
      }
      // No box of a run is left; what waits are the workers' warm boxes (a user's deployment keeps them), each with its token.
      await expectOnlyWarm(d, { warmMax: 2 })
    }, 420_000)
  }
})
