import Dockerode from "dockerode"
import { Effect, Exit, Scope } from "effect"
import { serveRehearsal } from "../../src/rehearsal/server.js"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { collect, freePort, makeDeployment } from "../support/deployment.js"
import { spawn } from "node:child_process"
import { PI_IMAGE } from "./globalSetup.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const docker = new Dockerode()

/** A command's stdout; a non-zero exit fails with its stderr. Asynchronous: npm takes a while, and the test runner must stay responsive. */
const run = async (cmd: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv = process.env) => {
  const r = await collect(spawn(cmd, [...args], { cwd, env, stdio: ["ignore", "pipe", "pipe"] }))
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(" ")} exited ${r.code}:\n${r.stderr}`)
  return r.stdout
}

/**
 * roster as people get it: the package `npm pack` makes (built by globalSetup), installed into a
 * project of its own and globally — never imported from src/.
 */
describe("the packed package", () => {
  let work: string
  let tarball: string

  beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), "roster-pack-"))
    await run("npm", ["pack", "--silent", "--pack-destination", work], root)
    const [name] = fs.readdirSync(work).filter((f) => f.endsWith(".tgz"))
    tarball = path.join(work, name ?? "")
  }, 120_000)

  afterAll(() => {
    fs.rmSync(work, { recursive: true, force: true })
  })

  it("holds the library, the CLI and the box files, and nothing of the tests or the engine's installed modules", async () => {
    const listed = (await run("tar", ["-tzf", tarball], work)).split("\n")
    for (const f of ["package/dist/src/index.js", "package/dist/src/index.d.ts", "package/dist/src/testing.js", "package/dist/roster.cjs",
      "package/dist/help.cjs", "package/dist/help-root.json", "package/dist/help-pages.json", "package/bin/roster.js", "package/box/Dockerfile", "package/box/extensions/knowledge_push.ts", "package/box/scripted/run-pi"]) {
      expect(listed, f).toContain(f)
    }
    expect(listed.filter((f) => /^package\/(test|src|box\/engine\/node_modules)\//.test(f))).toEqual([])
    expect(fs.statSync(tarball).size).toBeLessThan(5 * 1024 * 1024)
  })

  it("an embedder installs it, compiles examples/embed.ts against its types, and runs it against RosterTest", async () => {
    const project = path.join(work, "embedder")
    fs.mkdirSync(project)
    fs.writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "embedder", private: true, type: "module" }))
    // effect and @effect/* are roster's dependencies: an Effect 3 program's own copy is the one (npm dedupes them).
    await run("npm", ["install", tarball, "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], project)
    const effects = (await run("npm", ["ls", "effect", "--all", "--parseable"], project)).trim().split("\n").filter((l) => l.endsWith("/effect"))
    expect(effects).toEqual([path.join(project, "node_modules", "effect")])
    fs.copyFileSync(path.join(root, "examples", "embed.ts"), path.join(project, "embed.ts"))
    fs.writeFileSync(path.join(project, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, exactOptionalPropertyTypes: true,
        skipLibCheck: true, outDir: "out", typeRoots: [path.join(root, "node_modules", "@types")], types: ["node"]
      },
      include: ["embed.ts"]
    }))
    await run(process.execPath, [path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], project)
    const out = await run(process.execPath, ["out/embed.js"], project)
    expect(out).toContain(`one-shot: ended by exit, exit 0, said "hello from a fake box"`)
    expect(out).toContain("interrupted: 0 box(es) still running")
    expect(out).toContain("session: 2 turns, ended closed: you said: first / you said: second")
  }, 300_000)

  it("an embedder on Effect 4 installs it beside its own effect@4 and runs a real box through roster/promise, typed, reading the run's record", async () => {
    const project = path.join(work, "effect4")
    fs.mkdirSync(project)
    fs.writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "effect4", private: true, type: "module" }))
    await run("npm", ["install", "effect@4", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], project)
    // Accepted beside effect 4 (no peer to refuse): roster's own Effect 3 nests under it, the project's stays 4.
    await run("npm", ["install", tarball, "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], project)
    const own = JSON.parse(fs.readFileSync(path.join(project, "node_modules", "effect", "package.json"), "utf8")) as { version: string }
    expect(own.version).toMatch(/^4\./)
    // The face's types stand alone: no Effect in them, compiled with the library checks on.
    const types = fs.readFileSync(path.join(project, "node_modules", "roster", "dist", "src", "promise.d.ts"), "utf8")
    expect(types).not.toMatch(/from ["']effect|import\(["']effect/)
    fs.writeFileSync(path.join(project, "main.ts"), [
      `import { Effect, Fiber } from "effect"`,
      `import * as fs from "node:fs"`,
      `import { openRoster, type RunResult } from "roster/promise"`,
      `const home = process.env.ROSTER_HOME ?? ""`,
      `const roster = await openRoster({ home })`,
      `const ran: RunResult = await roster.run("alice", "What system is your box running?", { ceilingMin: 5 })`,
      `const turns: Array<string> = []`,
      `for await (const t of roster.talk("alice", ["the word is PROMISE-FACE", "what was the word?"])) turns.push(t.turn + ": " + t.reply)`,
      `const added = await roster.tasks.add("alice", "later", { key: "promise-face" })`,
      `const again = await roster.tasks.add("alice", "later", { key: "promise-face" })`,
      // The README's example: a fiber awaiting a run, interrupted once the box is at its long work (pi's bash
      // running sleep 600): Effect 4 aborts the signal it gave, and roster ends the run as Ctrl-C does.
      `const runs = home + "/data/runs/alice"`,
      `const before = new Set(fs.readdirSync(runs))`,
      `let pending: Promise<unknown> = Promise.resolve()`,
      `const fiber = Effect.runFork(Effect.tryPromise({ try: (signal) => (pending = roster.run("alice", "CONT-SAY: a long job", { ceilingMin: 5, signal })), catch: (e) => e }))`,
      `const atWork = () => fs.readdirSync(runs).filter((r) => !before.has(r)).some((r) => fs.existsSync(runs + "/" + r + "/stdout.jsonl") && fs.readFileSync(runs + "/" + r + "/stdout.jsonl", "utf8").includes("sleep 600"))`,
      `for (let i = 0; i < 900 && !atWork(); i++) await new Promise((r) => setTimeout(r, 200))`,
      `const wasAtWork = atWork()`,
      `await Effect.runPromise(Fiber.interrupt(fiber))`,
      `const aborted = await pending.then(() => "resolved", (e: Error) => e.name + ": " + e.message)`,
      // A talk aborted mid-turn (its box at the same long work), and a wait for a task queued behind it aborted while it waits.
      `const beforeTalk = new Set(fs.readdirSync(runs))`,
      `const talkAbort = new AbortController()`,
      `const talked = (async () => { for await (const t of roster.talk("alice", ["CONT-SAY: a long talk"], { signal: talkAbort.signal })) void t; return "ended" })().then((x) => x, (e: Error) => e.name + ": " + e.message)`,
      `const talkAtWork = () => fs.readdirSync(runs).filter((r) => !beforeTalk.has(r)).some((r) => fs.existsSync(runs + "/" + r + "/stdout.jsonl") && fs.readFileSync(runs + "/" + r + "/stdout.jsonl", "utf8").includes("sleep 600"))`,
      `for (let i = 0; i < 900 && !talkAtWork(); i++) await new Promise((r) => setTimeout(r, 200))`,
      `const talkWasAtWork = talkAtWork()`,
      `const behind = await roster.tasks.add("alice", "queued behind the talk")`,
      `const waitAborted = await roster.tasks.wait(behind.task_id, { everyMs: 50, signal: AbortSignal.timeout(400) }).then((t) => "resolved " + t.status, (e: Error) => e.name + ": " + e.message)`,
      `const behindAfter = (await roster.tasks.show(behind.task_id)).status`,
      `await roster.tasks.cancel(behind.task_id)`,
      `talkAbort.abort(new Error("enough talk"))`,
      `const talkAborted = await talked`,
      `await roster.close()`,
      // The program's own Effect is 4: its own runtime runs its own effects beside roster's.
      `const four = Effect.runSync(Effect.succeed("effect-4-ran"))`,
      `console.log(JSON.stringify({ ran, turns, added: added.task_id, again: again.existed && again.task_id === added.task_id, four, wasAtWork, aborted, talkWasAtWork, talkAborted, waitAborted, behind: behind.task_id, behindAfter }))`
    ].join("\n"))
    fs.writeFileSync(path.join(project, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, exactOptionalPropertyTypes: true,
        outDir: "out", typeRoots: [path.join(root, "node_modules", "@types")], types: ["node"], skipLibCheck: true
      },
      include: ["main.ts"]
    }))
    await run(process.execPath, [path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], project)
    // Real pi in the real box image, the rehearsal model (a local stand-in for Claude) behind the gateway.
    const scope = Effect.runSync(Scope.make())
    const model = await Effect.runPromise(serveRehearsal({ port: 0 }).pipe(Scope.extend(scope)))
    const d = await makeDeployment([
      "[[grant]]", `name = "anthropic"`, `hosts = ["api.anthropic.com"]`, `scope = ["org/*"]`, `credential = "anthropic"`,
      "[[route]]", `host = "api.anthropic.com"`, `upstream = "http://127.0.0.1:${model.port}"`
    ].join("\n"), PI_IMAGE)
    try {
      const out = JSON.parse(await run(process.execPath, ["out/main.js"], project, { ...d.env })) as {
        ran: { runId: string; runDir: string; endedBy: string; exitCode: number; finalText: string; messages: Array<string> }
        turns: Array<string>; added: string; again: boolean; four: string; wasAtWork: boolean; aborted: string
        talkWasAtWork: boolean; talkAborted: string; waitAborted: string; behind: string; behindAfter: string
      }
      expect(out.ran).toMatchObject({ endedBy: "exit", exitCode: 0 })
      expect(out.ran.finalText).toContain("Rehearsal answer: I looked at my box with bash")
      expect(out.ran.messages).toEqual([expect.stringContaining("rehearsal: hello from inside the box")])
      const record = JSON.parse(fs.readFileSync(path.join(d.file("data", "runs", "alice", out.ran.runId), "run.json"), "utf8")) as { worker: string; ended_by: string }
      expect(record).toMatchObject({ worker: "alice", ended_by: "exit" })
      // One warm box, two turns: the second recalls what was said in the first.
      expect(out.turns).toHaveLength(2)
      expect(out.turns[1]).toMatch(/^2: .*earlier in this conversation you said "the word is PROMISE-FACE"/s)
      expect(out.added).toMatch(/^t-[0-9a-f]{8}$/)
      expect(out.again).toBe(true)
      expect(out.four).toBe("effect-4-ran")
      // The interrupted fiber's run: the call rejected saying it was aborted, its record says signal, and
      // neither its box nor its token is left.
      expect(out.wasAtWork).toBe(true)
      expect(out.aborted).toMatch(/^AbortError: the run of alice \(its box killed, its token revoked, its record finished as ended by signal\) was aborted/)
      const runs = d.file("data", "runs", "alice")
      // A warm box waiting has a folder with no record yet.
      const records = fs.readdirSync(runs).filter((r) => fs.existsSync(path.join(runs, r, "run.json"))).map((r) => JSON.parse(fs.readFileSync(path.join(runs, r, "run.json"), "utf8")) as { run_id: string; ended_by: string; kind: string; prompt?: string })
      // The talk's abort ends its session as the run's did; the wait's abort ends the wait, not the task (not ended then: queued, or running).
      expect(out.talkWasAtWork).toBe(true)
      expect(out.talkAborted).toMatch(/^AbortError: the talk with alice \(its box killed, its token revoked, its record finished as ended by signal\) was aborted \(enough talk\)/)
      expect(out.waitAborted).toMatch(new RegExp(`^AbortError: the wait for task ${out.behind} \\(the task goes on; roster\.tasks\.cancel ends it\\) was aborted`))
      expect(["queued", "running"]).toContain(out.behindAfter)
      const ended = records.filter((r) => r.ended_by === "signal")
      expect(ended.map((r) => r.kind).sort()).toEqual(["box", "session"])
      const tokens = fs.readdirSync(d.file("state", "identity")).filter((f) => f.endsWith(".json"))
        .map((f) => JSON.parse(fs.readFileSync(path.join(d.file("state", "identity"), f), "utf8")) as { run_id: string })
      for (const abortedRun of ended.map((r) => r.run_id)) {
        // A warm box taken by a run keeps the label it was made under and goes by the run's name.
        const left = (await docker.listContainers({ all: true, filters: { label: [`roster.deployment=${d.file("config")}`] } }))
          .filter((c) => c.Labels["roster.run-id"] === abortedRun || c.Names.some((n) => n.endsWith(abortedRun)))
        expect(left).toEqual([])
        expect(tokens.filter((t) => t.run_id === abortedRun)).toEqual([])
      }
    } finally {
      await d.stop()
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 400_000)

  it("npm i -g installs a roster that inits, builds a box image from its own files and serves, from any folder", async () => {
    const prefix = path.join(work, "global")
    await run("npm", ["install", "--global", "--prefix", prefix, tarball, "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], work)
    const bin = path.join(prefix, "bin", "roster")
    const home = path.join(work, "home")
    const env = { ...process.env, ROSTER_HOME: home, HOME: home }
    const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), "roster-cwd-"))
    expect(await run(bin, ["--version"], elsewhere, env)).toMatch(/\d+\.\d+\.\d+/)
    // The root help from the installed package's own page: the program's, not loaded to print it.
    const installed = path.join(prefix, "lib", "node_modules", "roster")
    const build = (JSON.parse(fs.readFileSync(path.join(installed, "dist", "help-root.json"), "utf8")) as { build: string }).build
    expect(fs.readFileSync(path.join(installed, "dist", "roster.cjs"), "utf8").endsWith(`\n//# roster-build=${build}\n`)).toBe(true)
    expect(await run(bin, ["--help"], elsewhere, { ...env, COLUMNS: "80" })).toBe(await run(process.execPath, [path.join(installed, "dist", "roster.cjs"), "--help"], elsewhere, { ...env, COLUMNS: "80" }))
    // And a command's page from the installed package's own pages.
    const pages = JSON.parse(fs.readFileSync(path.join(installed, "dist", "help-pages.json"), "utf8")) as { build: string }
    expect(pages.build).toBe(build)
    expect(await run(bin, ["task", "add", "--help"], elsewhere, { ...env, COLUMNS: "80" }))
      .toBe(await run(process.execPath, [path.join(installed, "dist", "roster.cjs"), "task", "add", "--help"], elsewhere, { ...env, COLUMNS: "80" }))
    expect(await run(bin, ["init"], elsewhere, env)).toContain("created")
    const tag = `roster-pack-test:${crypto.randomBytes(3).toString("hex")}`
    try {
      await run(bin, ["box", "build-scripted", "--tag", tag], elsewhere, env)
      expect((await docker.getImage(tag).inspect()).Config.Labels?.["org.roster.engine"]).toBe("scripted")
    } finally {
      await docker.getImage(tag).remove({ force: true }).catch(() => undefined)
    }
    // The real box build reads box/ from the installed package: its engine hash matches the image
    // globalSetup built from this checkout, so the build knows it has nothing to do.
    expect(await run(bin, ["box", "build", "--offline", "--if-changed", "--tag", PI_IMAGE], elsewhere, env)).toContain(`${PI_IMAGE} is up to date`)
    const port = await freePort()
    const org = path.join(home, "config", "org.toml")
    fs.writeFileSync(org, fs.readFileSync(org, "utf8").replace(/^port = \d+$/m, `port = ${port}`))
    const started = await collect(spawn(bin, ["server", "start"], { cwd: elsewhere, env, stdio: ["ignore", "pipe", "pipe"] }))
    try {
      expect(started.code, started.stderr).toBe(0)
      const status = JSON.parse(await run(bin, ["server", "status", "--json"], elsewhere, env))
      expect(status.config_root).toBe(path.join(home, "config"))
    } finally {
      await collect(spawn(bin, ["server", "stop"], { cwd: elsewhere, env, stdio: ["ignore", "pipe", "pipe"] }))
    }
  }, 300_000)
})
