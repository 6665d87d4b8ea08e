import Dockerode from "dockerode"
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest"
import { addViaApi, engineEvents, tasksViaApi } from "../support/control.js"
import { type Deployment, makeDeployment } from "../support/deployment.js"
import { type Postgres, SECOND_ADDRESS, startPostgres } from "../support/postgres.js"

const docker = new Dockerode()

interface Task {
  readonly task_id: string
  readonly created_at: string
  readonly started_at: string | null
  readonly finished_at: string | null
  readonly worker: string
  readonly status: string
  readonly node?: string
  readonly attempt?: number
  readonly run_ids: ReadonlyArray<string>
  readonly origin: { readonly run_id: string | null }
  readonly lost?: ReadonlyArray<{ readonly node: string; readonly attempt: number; readonly run_id: string | null; readonly by: string }>
  readonly interrupted?: { readonly run_id: string; readonly by: string }
  readonly continues?: { readonly task_id: string | null; readonly run_id: string } | null
}
interface FleetNode { readonly name: string; readonly state: string; readonly fenced_by?: string | null }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * Polls `check` until it gives a value; one that never does fails with what `check` last noted
 * (`seen`), so a miss on a slow machine says where the fleet stood rather than only that time ran out.
 */
const until = async <A>(what: string, check: (seen: (x: unknown) => void) => Promise<A | undefined>, ms: number): Promise<A> => {
  const end = Date.now() + ms
  let last: unknown
  const seen = (x: unknown) => { last = x }
  for (;;) {
    const got = await check(seen)
    if (got !== undefined) return got
    if (Date.now() > end) throw new Error(`${what}: not within ${ms / 1000} s; last seen: ${JSON.stringify(last) ?? "nothing"}`)
    await sleep(300)
  }
}

/** A node's tasks from its daemon's API (what `task list --json` prints from it): polled often, without a CLI start each time. */
const tasksOf = (d: Deployment) => tasksViaApi<Task>(d)
const nodesOf = async (d: Deployment) => {
  const r = await d.roster(["server", "status", "--json"])
  return ((JSON.parse(r.stdout) as { supervisor?: { fleet?: { nodes: Array<FleetNode> } } }).supervisor?.fleet?.nodes) ?? []
}
/**
 * Each node's share of its slots left empty while tasks were still waiting to start (from each
 * task's claim to its end, as its record says; the backlog lasts until the last task is claimed).
 */
const idleWhileBacklog = (tasks: ReadonlyArray<Task>, names: ReadonlyArray<string>, slots: number) => {
  const from = Math.min(...tasks.map((t) => Date.parse(t.created_at)))
  const to = Math.max(...tasks.map((t) => Date.parse(t.started_at!)))
  const out: Record<string, number> = {}
  for (const n of names) {
    // Busy slot-milliseconds within [from, to], over what the node's slots could have given.
    const busy = tasks.filter((t) => t.node === n).reduce((sum, t) =>
      sum + Math.max(0, Math.min(to, Date.parse(t.finished_at!)) - Math.max(from, Date.parse(t.started_at!))), 0)
    out[n] = 1 - busy / (slots * (to - from))
  }
  return out
}

const daemonPid = (d: Deployment) => (JSON.parse(fs.readFileSync(d.file("state", "gateway.json"), "utf8")) as { pid: number }).pid
const boxesOf = (d: Deployment, ...labels: Array<string>) =>
  docker.listContainers({ all: true, filters: { label: [`roster.deployment=${d.file("config")}`, ...labels] } })

// A box action from inside the box, as the pi extensions post it (busybox nc, the request through
// a fifo held open until the answer is in): prints "<name> <status line>". Each action has its own
// fifo and answer file, so several can be in flight at once.
const ACT = `act() { tok=\${HTTP_PROXY#*://}; tok=\${tok%%:*}; q=/tmp/.q.$1; a=/tmp/.a.$1; rm -f $q $a; mkfifo $q; ` +
  `nc -w 120 host.docker.internal \${ROSTER_GATEWAY##*:} <$q >$a & p=$!; ` +
  `{ printf 'POST /v1/actions/%s HTTP/1.0\\r\\nAuthorization: Bearer %s\\r\\nContent-Length: %s\\r\\n\\r\\n%s' "$1" "$tok" "\${#2}" "$2"; ` +
  `while kill -0 $p 2>/dev/null; do usleep 10000; done; } >$q; echo "$1 $(head -n 1 $a | tr -d '\\r')"; }; `

describe("three daemons as one roster, and a node lost: its attempts fenced, its tasks re-run once elsewhere (three real daemons, real Postgres)", () => {
  let pg: Postgres
  const shared = fs.mkdtempSync(path.join(os.tmpdir(), "roster-shared-"))
  const nodes: Array<Deployment> = []
  const WORKERS = ["w1", "w2", "w3", "w4", "w5", "w6"]
  // n1 reaches the database at its second address, so that one iptables rule can cut it alone off.
  const cluster = (node: string) =>
    `[cluster]\ndatabase = "${node === "n1" ? pg.url.replace("127.0.0.1", SECOND_ADDRESS) : pg.url}"\nshared_data = "${shared}"\nnode_timeout_s = 5\n`
  const nameOf = (d: Deployment) => `n${nodes.indexOf(d) + 1}`
  const frozen: Array<number> = []

  beforeAll(async () => {
    pg = await startPostgres()
    for (const name of ["n1", "n2", "n3"]) {
      // Cold boxes: this suite counts one box per task attempt in the engine's events and kills a node's boxes by
      // hand; a warm box (made ahead on each node, recycled when a worker's next task lands elsewhere) would be
      // another box in both. Warm boxes on a fleet are fleet.test's and warm.test's.
      const d = await makeDeployment(cluster(name), undefined, undefined, { env: { ROSTER_NODE: name, PGPASSWORD: pg.password }, start: false, box: [`warm = "off"`] })
      nodes.push(d)
      for (const w of WORKERS) {
        const added = await d.roster(["worker", "add", w])
        expect(added.code, added.stderr).toBe(0)
      }
    }
    await Promise.all(nodes.map(async (d) => {
      const started = await d.roster(["server", "start"])
      expect(started.code, started.stdout + started.stderr).toBe(0)
    }))
  })

  // A miss on a slower machine leaves its why in the nodes' logs: each one's tail beside the failure.
  const logTails = () => {
    for (const d of nodes) {
      const log = d.file("state", "gateway.log")
      const lines = fs.existsSync(log) ? fs.readFileSync(log, "utf8").trim().split("\n").slice(-40) : ["(no log)"]
      console.log(`--- ${nameOf(d)}: the last of ${log}\n${lines.join("\n")}`)
    }
  }

  afterAll(async () => {
    for (const pid of frozen) {
      try {
        process.kill(pid, "SIGCONT")
      } catch { /* gone */ }
    }
    for (const d of nodes) await d.stop().catch(() => undefined)
    for (const d of nodes) for (const c of await boxesOf(d)) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)
    pg?.remove()
    fs.rmSync(shared, { recursive: true, force: true })
  })

  // The scale. FLEET_TASKS=40 for a quick pass while working on it.
  const TASKS = Number(process.env.FLEET_TASKS ?? 300)
  const SLOTS = 3

  it(`${TASKS} tasks over 20 workers, added on all three nodes: each done exactly once, never two boxes of one worker at once (the engine's events), every node ran some`, async () => {
    onTestFailed(logTails)
    const workers = Array.from({ length: 20 }, (_, i) => `q${i}`)
    // A worker is its identity.md, the same file on every node (sixty `worker add`s would take a minute).
    for (const d of nodes) {
      for (const w of workers) {
        fs.mkdirSync(d.file("config", "workers", w), { recursive: true })
        fs.writeFileSync(d.file("config", "workers", w, "identity.md"), `You are ${w}, a worker of the fleet test.\n`)
      }
    }
    // The engine's own account of every box of these three deployments: when each started and died.
    const seen: Array<{ readonly action: string; readonly worker: string; readonly run: string; readonly at: number }> = []
    const events = await engineEvents(["start", "die"], (e) => {
      const a = e.labels
      if (nodes.some((d) => a["roster.deployment"] === d.file("config")) && a["roster.worker"]?.startsWith("q")) {
        seen.push({ action: e.action, worker: a["roster.worker"], run: a["roster.run-id"] ?? "", at: e.at })
      }
    })
    // Three slots a node for this one: a `!true` box is mostly the engine's own work, and a third
    // slot keeps the 2-core machine busier (90 tasks: 88 s against 98.5 with two).
    for (const d of nodes) d.writeOrg(`${cluster(nameOf(d))}[supervisor]\nconcurrency = ${SLOTS}\n`)
    try {
      const started = Date.now()
      const ids = await Promise.all(Array.from({ length: TASKS }, (_, i) => addViaApi(nodes[i % 3]!, workers[i % 20]!, "!true")))
      const done = await until(`${TASKS} tasks done`, async () => {
        const ts = (await tasksOf(nodes[1]!)).filter((t) => ids.includes(t.task_id))
        return ts.length === TASKS && ts.every((t) => t.status === "done") ? ts : undefined
      }, 600_000)
      const took = (Date.now() - started) / 1000
      // Done exactly once: one run, the first attempt, each.
      expect(done.filter((t) => t.run_ids.length !== 1 || t.attempt !== 1).map((t) => t.task_id)).toEqual([])
      expect(new Set(done.map((t) => t.node))).toEqual(new Set(["n1", "n2", "n3"]))
      // The engine started exactly one box for each run, and no worker ever had two at once.
      await until("the engine's last events", async () => (seen.filter((e) => e.action === "die").length >= TASKS ? true : undefined), 20_000)
      const runs = new Set(done.map((t) => t.run_ids[0]!))
      expect(seen.filter((e) => e.action === "start").map((e) => e.run).sort()).toEqual([...runs].sort())
      for (const w of workers) {
        let live = 0
        for (const e of seen.filter((x) => x.worker === w).sort((x, y) => x.at - y.at || (x.action === "die" ? -1 : 1))) {
          live += e.action === "start" ? 1 : -1
          expect(live, `${w} at ${e.at}`).toBeLessThanOrEqual(1)
        }
      }
      // Work goes where there is room: while tasks still waited, how much of each node's slots stood empty.
      const idle = idleWhileBacklog(done, ["n1", "n2", "n3"], SLOTS)
      console.log(`${TASKS} tasks on three nodes: ${took.toFixed(1)} s, ${(TASKS / took).toFixed(1)} tasks/s; by node: ` +
        ["n1", "n2", "n3"].map((n) => `${n} ${done.filter((t) => t.node === n).length} (idle ${(100 * idle[n]!).toFixed(0)} % of its slots while tasks waited)`).join(", "))
      for (const n of ["n1", "n2", "n3"]) expect(idle[n], `${n} idle while tasks waited`).toBeLessThan(0.5)
      // Each run's folder is in the shared folder, its record naming the node that ran it; any node lists them all.
      for (const t of done) {
        const record = JSON.parse(fs.readFileSync(path.join(shared, "runs", t.worker, t.run_ids[0]!, "run.json"), "utf8")) as { node: string }
        expect(record.node, t.task_id).toBe(t.node)
      }
      const listed = JSON.parse((await nodes[1]!.roster(["runs", "list", "--json", "--limit", String(TASKS + 50)])).stdout) as Array<{ run_id: string; node: string }>
      expect(new Set(listed.filter((r) => runs.has(r.run_id)).map((r) => r.node))).toEqual(new Set(["n1", "n2", "n3"]))
    } finally {
      events.close()
      for (const d of nodes) d.writeOrg(cluster(nameOf(d)))
    }
  }, 1_000_000)

  it("SIGKILL of a node with boxes running, its boxes removed: its tasks finish on the others, each done once, the lost attempt fenced and recorded", async () => {
    onTestFailed(logTails)
    const [n1, n2, n3] = nodes as [Deployment, Deployment, Deployment]
    const ids: Array<string> = []
    for (const w of WORKERS) {
      // Long enough that what runs on n1 when it is seen there still runs when it is killed (adding takes seconds).
      const r = await n2.roster(["task", "add", w, "!sleep 12"])
      expect(r.code, r.stderr).toBe(0)
      ids.push(/task (t-[0-9a-f]{8}) queued/.exec(r.stdout)?.[1] ?? "")
    }
    // Six tasks, two slots on each node: every node takes some.
    const onN1 = await until("n1 running a task", async () => {
      const running = (await tasksOf(n2)).filter((t) => ids.includes(t.task_id) && t.status === "running" && t.node === "n1")
      return running.length > 0 ? running : undefined
    }, 30_000)
    process.kill(daemonPid(n1), "SIGKILL")
    // The machine is lost with its boxes (a box the engine is already removing is as good as gone).
    // Removed again while any is left: a box n1 asked the engine for just before it died shows up after a first look.
    await until("n1's boxes gone", async () => {
      const left = await boxesOf(n1)
      for (const c of left) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)
      return left.length === 0 ? true : undefined
    }, 15_000)
    const killedAt = Date.now()
    const done = await until("every task done", async () => {
      const ts = (await tasksOf(n3)).filter((t) => ids.includes(t.task_id))
      return ts.every((t) => t.status === "done") ? ts : undefined
    }, 60_000)
    expect(Date.now() - killedAt).toBeLessThan(60_000)
    for (const t of done) {
      const lostHere = onN1.some((x) => x.task_id === t.task_id)
      if (lostHere) {
        // Its first attempt was n1's: fenced, recorded, and the task run once more elsewhere.
        expect(t.lost, t.task_id).toEqual([expect.objectContaining({ node: "n1", attempt: 1, run_id: onN1.find((x) => x.task_id === t.task_id)?.run_ids[0] })])
        expect(t.attempt).toBe(2)
        expect(t.run_ids).toHaveLength(2)
        expect(t.node).not.toBe("n1")
      } else {
        expect(t.lost, t.task_id).toBeUndefined()
        expect(t.run_ids).toHaveLength(1)
      }
    }
    const view = await nodesOf(n2)
    expect(view.find((n) => n.name === "n1")).toMatchObject({ state: "lost", fenced_by: expect.stringMatching(/^n[23]$/) })
    // Any node shows any run whole: a run of n3's, shown on n2, with its requests from n3's audit log.
    const onN3 = done.find((t) => t.node === "n3")
    expect(onN3, "a task done on n3").toBeDefined()
    const shown = await n2.roster(["runs", "show", onN3!.run_ids.at(-1)!])
    expect(shown.stdout).toContain("  node:      n3")
    expect(shown.stdout).toMatch(/gateway requests \(\d+\):\n.*POST \S+\/v1\/preflight/)
    // The other two took everything meanwhile; nothing of this test runs anywhere now.
    expect((await boxesOf(n2)).length + (await boxesOf(n3)).length).toBe(0)
  })

  it("a node frozen (SIGSTOP) past its lease and thawed before any node wrote the fence: its box's set_tasks, remember and knowledge_push are refused, its box killed, its old instance fenced by itself as it joins again (issue 64.4)", async () => {
    onTestFailed(logTails)
    const [n1, n2, n3] = nodes as [Deployment, Deployment, Deployment]
    // n1 is back (a restart after the kill: its name's old instance is already fenced).
    const restarted = await n1.roster(["server", "start"])
    expect(restarted.code, restarted.stdout + restarted.stderr).toBe(0)
    await until("n1 up again", async () => ((await nodesOf(n2)).find((n) => n.name === "n1")?.state === "up" ? true : undefined), 20_000)
    // The three actions at once, while the node is frozen: all three wait in its gateway's socket, so
    // none is sent only after the resumed node has already killed the box (one after another, the
    // second raced the kill under load).
    const script = `!${ACT}act message_user '{"text":"ready"}'; sleep 4; ` +
      `act set_tasks '{"tasks":[{"prompt":"!echo queued by a fenced run"}]}' & act remember '{"text":"remembered by a fenced run"}' & ` +
      `act knowledge_push '{"repo":"knowledge"}' & wait; sleep 30`
    const added = await n3.roster(["task", "add", "w1", script])
    const id = /task (t-[0-9a-f]{8}) queued/.exec(added.stdout)?.[1] ?? ""
    const first = await until("the task running with its box past its preflight", async () => {
      const t = (await tasksOf(n3)).find((x) => x.task_id === id)
      if (t?.status !== "running" || !t.node) return undefined
      const d = nodes[Number(t.node.slice(1)) - 1]!
      const messages = path.join(shared, "runs", "w1", t.run_ids[0]!, "messages.jsonl")
      return fs.existsSync(messages) && fs.readFileSync(messages, "utf8").includes("ready") ? { t, d } : undefined
    }, 30_000)
    const runId = first.t.run_ids[0]!
    const owner = first.d
    const others = nodes.filter((d) => d !== owner)
    const pid = daemonPid(owner)
    // Every daemon frozen, so no node can write the fence: the owner's lease lapses (the fleet shows it lost) with nothing fenced.
    const pids = nodes.map(daemonPid)
    for (const p of pids) {
      process.kill(p, "SIGSTOP")
      frozen.push(p)
    }
    await until("the owner's lease lapsed by the database's clock", async () =>
      Number(pg.sql(`SELECT extract(epoch FROM now() - heartbeat_at) FROM roster_nodes WHERE name = '${nameOf(owner)}'`)) > 6 ? true : undefined, 30_000)
    expect(pg.sql("SELECT count(*) FROM roster_nodes WHERE fenced_at IS NOT NULL")).toBe("0")
    // Its box sent its actions while the node was frozen: they wait in the gateway's socket. The owner thaws first.
    process.kill(pid, "SIGCONT")
    const refused = await until("the frozen run's actions answered", async () => {
      const dir = path.join(shared, "audit", nameOf(owner))
      const lines = fs.existsSync(dir)
        ? fs.readdirSync(dir).flatMap((f) => fs.readFileSync(path.join(dir, f), "utf8").trim().split("\n")).filter((l) => l !== "").map((l) => JSON.parse(l) as { run_id: string; path: string; status: number })
        : []
      const acts = lines.filter((l) => l.run_id === runId && /set_tasks|remember|knowledge_push/.test(l.path))
      return acts.length === 3 ? acts : undefined
    }, 30_000)
    // Sent at once, answered in whichever order they were read: each refused, whether the beat or the landing came first.
    expect(refused.map((l) => [l.path, l.status]).sort()).toEqual([
      ["/v1/actions/knowledge_push", 409], ["/v1/actions/remember", 409], ["/v1/actions/set_tasks", 409]
    ])
    // Its box is killed, its run says why, and it is back in the fleet as a new instance: its old one fenced by itself, the task queued again.
    await until("the fenced box gone", async () => ((await boxesOf(owner, `roster.run-id=${runId}`)).length === 0 ? true : undefined), 20_000)
    const record = await until("the fenced run's record finished", async () => {
      const r = JSON.parse(fs.readFileSync(path.join(shared, "runs", "w1", runId, "run.json"), "utf8")) as { ended_by: string | null; error: string | null }
      return r.ended_by !== null ? r : undefined
    }, 20_000)
    expect(record.ended_by).toBe("fenced")
    for (const p of pids.filter((p) => p !== pid)) process.kill(p, "SIGCONT")
    for (const d of nodes) await until(`${nameOf(d)} up again`, async () => ((await nodesOf(others[0]!)).find((n) => n.name === nameOf(d))?.state === "up" ? true : undefined), 30_000)
    const again = await until("the task claimed again", async (seen) => {
      const t = (await tasksOf(others[0]!)).find((x) => x.task_id === id)
      seen(t)
      return t?.attempt === 2 ? t : undefined
    }, 60_000)
    expect(again.lost).toEqual([expect.objectContaining({ node: nameOf(owner), attempt: 1, run_id: runId, by: nameOf(owner) })])
    // Nothing of the fenced attempt landed: no task queued by it, no memory of it.
    expect((await tasksOf(others[0]!)).filter((t) => t.origin.run_id === runId)).toEqual([])
    expect(pg.sql(`SELECT count(*) FROM roster_memory WHERE event->>'run_id' = '${runId}'`)).toBe("0")
    const cancel = await others[1]!.roster(["task", "cancel", id])
    expect(cancel.code, cancel.stderr).toBe(0)
  })

  it("Postgres stopped for 20 s mid-run: every node stops its boxes before its lease could expire and says so, starts none meanwhile; once it is back each task carries on from its stopped run, done once, no node taken for lost", async () => {
    onTestFailed(logTails)
    const [n1, n2, n3] = nodes as [Deployment, Deployment, Deployment]
    await until("every node up", async () => ((await nodesOf(n2)).filter((n) => n.state === "up").length === 3 ? true : undefined), 30_000)
    const ids = await Promise.all(WORKERS.map((w, i) => addViaApi(nodes[i % 3]!, w, "!sleep 15")))
    // Each node's box started (a task claimed is running before its box is).
    await until("boxes running on every node", async (seen) => {
      const running = await Promise.all(nodes.map(async (d) => (await boxesOf(d)).filter((b) => b.State === "running").length))
      seen(running)
      return running.every((n) => n > 0) ? true : undefined
    }, 30_000)
    pg.stop()
    const stoppedAt = Date.now()
    try {
      // node_timeout_s 5, beats every second: each node stands down 3 s after its last beat, the
      // fleet could fence it only after 7 s — so every box is gone well inside the timeout.
      const goneAfter = await Promise.all(nodes.map(async (d) => {
        await until(`${nameOf(d)}'s boxes stopped`, async (seen) => {
          const live = (await boxesOf(d)).filter((b) => b.State !== "exited" && b.State !== "dead")
          seen(live.map((b) => `${b.Labels["roster.worker"]} ${b.State}`))
          return live.length === 0 ? true : undefined
        }, 15_000)
        return Date.now() - stoppedAt
      }))
      for (const ms of goneAfter) expect(ms, "a node's boxes gone after the database stopped (ms)").toBeLessThan(7_000)
      const status = await n3.roster(["server", "status"])
      expect(status.stdout).toContain("cut off from the fleet's database: my boxes are stopped")
      // And none starts while it is down.
      while (Date.now() - stoppedAt < 20_000) {
        const live = (await Promise.all(nodes.map((d) => boxesOf(d)))).flat().filter((b) => b.State === "running")
        expect(live.map((b) => b.Labels["roster.worker"]), "boxes running while the database is down").toEqual([])
        await sleep(1_000)
      }
    } finally {
      pg.start()
    }
    const done = await until("every task done after the outage", async (seen) => {
      const ts = (await tasksOf(n2)).filter((t) => ids.includes(t.task_id))
      seen(ts.map((t) => [t.task_id, t.status, t.run_ids.length]))
      return ts.length === ids.length && ts.every((t) => t.status === "done") ? ts : undefined
    }, 120_000)
    // Each task once, carried on from the run its node stopped: two runs, the second continuing the first, nothing lost to a fence.
    for (const t of done) {
      expect(t.run_ids, t.task_id).toHaveLength(2)
      expect(t.continues?.run_id, t.task_id).toBe(t.run_ids[0])
      expect(t.interrupted, t.task_id).toMatchObject({ run_id: t.run_ids[0], by: "cut-off" })
      expect(t.lost, t.task_id).toBeUndefined()
      const first = JSON.parse(fs.readFileSync(path.join(shared, "runs", t.worker, t.run_ids[0]!, "run.json"), "utf8")) as { ended_by: string }
      expect(first.ended_by, t.task_id).toBe("cut-off")
    }
    const view = await nodesOf(n3)
    expect(view.filter((n) => ["n1", "n2", "n3"].includes(n.name)).map((n) => [n.name, n.state, n.fenced_by ?? null]))
      .toEqual([["n1", "up", null], ["n2", "up", null], ["n3", "up", null]])
    // The queue moves again: a task added now runs.
    const after = await addViaApi(n1, "w2", "!true")
    await until("a task added after the outage done", async () => ((await tasksOf(n1)).find((t) => t.task_id === after)?.status === "done" ? true : undefined), 30_000)
  }, 300_000)

  it("one node cut off from Postgres (its packets dropped): its boxes are gone before the fleet fences it, its task carries on elsewhere, never two boxes of one worker at once; it joins again", async () => {
    onTestFailed(logTails)
    const [n1, n2] = nodes as [Deployment, Deployment, Deployment]
    await until("every node up", async () => ((await nodesOf(n2)).filter((n) => n.state === "up").length === 3 ? true : undefined), 30_000)
    const seen: Array<{ readonly action: string; readonly worker: string; readonly node: string; readonly at: number }> = []
    const events = await engineEvents(["start", "die"], (e) => {
      const d = nodes.find((x) => e.labels["roster.deployment"] === x.file("config"))
      if (d && WORKERS.includes(e.labels["roster.worker"] ?? "")) seen.push({ action: e.action, worker: e.labels["roster.worker"]!, node: nameOf(d), at: e.at })
    })
    // Both directions of n1's connections to the database's second address: no RST, no answer — a cut cable.
    const rules = [
      ["OUTPUT", "-p", "tcp", "-d", SECOND_ADDRESS, "--dport", String(pg.port), "-j", "DROP"],
      ["OUTPUT", "-p", "tcp", "-s", SECOND_ADDRESS, "--sport", String(pg.port), "-j", "DROP"]
    ]
    let cut = false
    const uncut = () => {
      if (!cut) return
      for (const r of rules) spawnSync("iptables", ["-w", "-D", ...r])
      cut = false
    }
    try {
      const ids = await Promise.all(WORKERS.map((w, i) => addViaApi(nodes[i % 3]!, w, "!sleep 25")))
      const onN1 = await until("n1 running a task", async () => {
        const t = (await tasksOf(n2)).find((x) => ids.includes(x.task_id) && x.status === "running" && x.node === "n1")
        return t && (await boxesOf(n1, `roster.task-id=${t.task_id}`)).some((b) => b.State === "running") ? t : undefined
      }, 30_000)
      for (const r of rules) execFileSync("iptables", ["-w", "-I", ...r])
      cut = true
      const cutAt = Date.now()
      // n1 stands down by itself; the others fence it no sooner than the timeout and its margin (7 s).
      await until("n1's boxes stopped", async () => ((await boxesOf(n1)).some((b) => b.State === "running") ? undefined : true), 15_000)
      const stoppedAfter = Date.now() - cutAt
      expect((await n1.roster(["server", "status"])).stdout).toContain("cut off from the fleet's database: my boxes are stopped")
      const fenced = await until("n1 fenced by the fleet", async (note) => {
        const n = (await nodesOf(n2)).find((x) => x.name === "n1")
        note(n)
        return n?.fenced_by ?? undefined
      }, 30_000)
      const fencedAfter = Date.now() - cutAt
      expect(stoppedAfter, "n1's boxes gone (ms after the cut)").toBeLessThan(fencedAfter)
      expect(["n2", "n3"]).toContain(fenced)
      const again = await until("n1's task claimed again elsewhere", async (note) => {
        const t = (await tasksOf(n2)).find((x) => x.task_id === onN1.task_id)
        note(t)
        return t?.status === "running" && t.node !== "n1" ? t : undefined
      }, 60_000)
      expect(again.lost).toEqual([expect.objectContaining({ node: "n1", attempt: onN1.attempt, run_id: onN1.run_ids.at(-1) })])
      uncut()
      await until("n1 up again", async () => ((await nodesOf(n2)).find((n) => n.name === "n1")?.state === "up" ? true : undefined), 90_000)
      await until("every task done", async (note) => {
        const ts = (await tasksOf(n2)).filter((t) => ids.includes(t.task_id))
        note(ts.map((t) => [t.task_id, t.status, t.node]))
        return ts.every((t) => t.status === "done") ? true : undefined
      }, 120_000)
      // The engine's own account: no worker ever had two boxes at once, on any node.
      for (const w of WORKERS) {
        let live = 0
        for (const e of seen.filter((x) => x.worker === w).sort((x, y) => x.at - y.at || (x.action === "die" ? -1 : 1))) {
          live += e.action === "start" ? 1 : -1
          expect(live, `${w} at ${e.at} (${e.node})`).toBeLessThanOrEqual(1)
        }
      }
      expect(seen.some((e) => e.node === "n1" && e.action === "die" && e.worker === onN1.worker)).toBe(true)
    } finally {
      uncut()
      events.close()
    }
  }, 400_000)
})
