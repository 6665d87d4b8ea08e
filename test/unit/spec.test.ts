import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { boxUser } from "../../src/box/provision.js"
import { runOnce } from "../../src/box/runOnce.js"
import { containerSpec } from "../../src/box/docker/spec.js"
import type { BoxPlan } from "../../src/backend/plan.js"
import { OrgSchema, parseSize } from "../../src/config/schema.js"
import { deploymentId, lockdownNetworkName } from "../../src/contract/deployment.js"
import { PREFLIGHT_SCRIPT } from "../../src/box/preflight.js"
import type { ContainerSpec } from "../../src/docker/Docker.js"
import { DockerFake } from "../../src/docker/DockerTest.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const org = Schema.decodeUnknownSync(OrgSchema)({
  box: { memory: "4g", cpus: "1.5", pids_limit: 256, tmp_size: "64m" },
  expose: [
    { env: "GITHUB_TOKEN", credential: "github", scope: ["org/alice"] },
    { env: "OTHER_TOKEN", credential: "other", scope: ["org/bob"] }
  ],
  mount: [
    { name: "notes", path: "/srv/notes", kind: "dir" },
    { name: "scratch", path: "/srv/scratch", kind: "dir", rw: true },
    { name: "code", path: "/srv/code", kind: "repo" },
    { name: "gated", path: "/srv/gated", kind: "repo", gated: true },
    { name: "bobs", path: "/srv/bobs", workers: ["bob"] }
  ]
})

const envOf = (spec: ContainerSpec) => Object.fromEntries(spec.Env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]))

describe("the box's create spec", () => {
  it.effect("carries every hardening, label, mount and variable of the design, field by field", () => {
    const paths = tempPaths()
    const gated = path.join(paths.home, "gated")
    fs.mkdirSync(gated)
    for (const args of [["init", "-q", "--initial-branch=main"], ["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"]]) {
      execFileSync("git", args, { cwd: gated })
    }
    writeFixture({
      paths,
      orgToml: `[box]\nmemory = "4g"\ncpus = "1.5"\npids_limit = 256\ntmp_size = "64m"\n` +
        `[[expose]]\nenv = "GITHUB_TOKEN"\ncredential = "github"\nscope = ["org/alice"]\n` +
        `[[expose]]\nenv = "OTHER_TOKEN"\ncredential = "other"\nscope = ["org/bob"]\n` +
        `[[mount]]\nname = "notes"\npath = "/srv/notes"\n` +
        `[[mount]]\nname = "scratch"\npath = "/srv/scratch"\nrw = true\n` +
        `[[mount]]\nname = "code"\npath = "/srv/code"\nkind = "repo"\n` +
        `[[mount]]\nname = "gated"\npath = "${gated}"\nkind = "repo"\ngated = true\n` +
        `[[mount]]\nname = "bobs"\npath = "/srv/bobs"\nworkers = ["bob"]\n`
    })
    return Effect.gen(function*() {
      const outcome = yield* runOnce({ worker: "alice", prompt: "hello there", ceilingMin: 12 })
      const [spec] = (yield* (yield* DockerFake).callsOf("containerCreate")) as Array<ContainerSpec>
      if (!spec) throw new Error("no container was created")
      const runId = outcome.runId
      expect(spec.name).toBe(`roster-box-${runId}`)
      expect(spec.Image).toBe("roster-box:1")
      expect(spec.Labels).toEqual({
        "roster.run-id": runId, "roster.worker": "alice", "roster.kind": "box",
        "roster.deployment": paths.config, "roster.deadline": String(12 * 60_000),
        "roster.owner-pid": String(process.pid), "roster.owner-start": expect.stringMatching(/^\d+$/)
      })
      expect(spec.WorkingDir).toBe("/pihome/workspace")
      expect(spec.OpenStdin).toBe(false)
      expect(spec.AttachStdin).toBe(false)
      const hc = spec.HostConfig
      expect(hc.AutoRemove).toBe(true)
      expect(hc.NetworkMode).toBe(lockdownNetworkName(paths.config))
      expect(hc.ExtraHosts).toEqual(["host.docker.internal:172.30.0.1"])
      expect(hc.Dns).toEqual(["127.0.0.1"])
      expect(hc.CapDrop).toEqual(["ALL"])
      expect(hc.SecurityOpt).toEqual(["no-new-privileges"])
      // [box] runtime = "auto" on an engine without gVisor registered.
      expect(hc.Runtime).toBe("runc")
      expect(hc.PidsLimit).toBe(256)
      expect(hc.Memory).toBe(4 * 1024 ** 3)
      expect(hc.NanoCpus).toBe(1_500_000_000)
      expect(hc.Tmpfs).toEqual({ "/tmp": `rw,nosuid,nodev,size=${64 * 1024 ** 2},mode=1777` })
      const uid = process.getuid?.() ?? 0
      const user = boxUser(uid, process.getgid?.() ?? 0)
      expect(spec.User).toBe(`${user.uid}:${user.gid}`)
      expect(spec.User.startsWith("0:")).toBe(false)

      const binds = hc.Binds
      const runDir = outcome.runDir
      expect(binds).toContain(`${path.join(runDir, "home")}:/pihome`)
      expect(fs.readFileSync(path.join(runDir, "home", ".gitconfig"), "utf8")).toBe("[safe]\n\tdirectory = *\n")
      expect(binds).toContain(`${path.join(paths.data, "stores", "alice")}:/pihome/store`)
      // What people send the run (a chat message's files): the host writes it, the box only reads it.
      expect(binds).toContain(`${path.join(runDir, "inbox")}:/pihome/inbox:ro`)
      expect(binds.indexOf(`${path.join(runDir, "inbox")}:/pihome/inbox:ro`)).toBeGreaterThan(binds.indexOf(`${path.join(runDir, "home")}:/pihome`))
      expect(fs.statSync(path.join(runDir, "inbox", "files")).isDirectory()).toBe(true)
      expect(binds).toContain("/srv/notes:/pihome/mnt/notes:ro")
      expect(binds).toContain("/srv/scratch:/pihome/mnt/scratch")
      expect(binds).toContain("/srv/code:/pihome/mnt/code:ro")
      // A gated repo: the run's clone (read-only without rw) and the canonical repo as its read-only origin, never a raw bind.
      const clone = path.join(paths.data, "repos", "alice", runId, "gated")
      expect(binds).toContain(`${clone}:/pihome/mnt/gated:ro`)
      expect(binds).toContain(`${gated}:/pihome/mnt/.origins/gated:ro`)
      expect(binds.filter((b) => b.startsWith(`${gated}:`))).toEqual([`${gated}:/pihome/mnt/.origins/gated:ro`])
      expect(binds.some((b) => b.includes("/srv/bobs"))).toBe(false)
      expect(binds).toContain(`${path.join(runDir, "self")}:/pihome/self:ro`)
      expect(binds).toContain(`${path.join(paths.config, "workers", "alice")}:/pihome/self/config:ro`)
      expect(binds).toContain(`${path.join(paths.data, "runs", "alice")}:/pihome/self/runs:ro`)
      expect(binds).toContain(`${path.join(paths.data, "tasks", "views", "alice.json")}:/pihome/self/schedule.json:ro`)
      // The journal is always there to mount (created empty), so a worker's first run sees it too.
      expect(binds).toContain(`${path.join(paths.data, "journal", "alice.jsonl")}:/pihome/self/journal/journal.jsonl:ro`)
      expect(binds).toContain(`${path.join(paths.state, "ca", "ca.crt")}:/opt/roster/ca.crt:ro`)
      expect(binds).toContain(`${path.join(paths.state, "ca", "ca-bundle.crt")}:/opt/roster/ca-bundle.crt:ro`)
      // Every writable bind lands at a fixed box path, never at the host path.
      for (const b of binds) {
        const [host, target, mode] = b.split(":")
        if (mode !== "ro") expect(target).not.toBe(host)
        expect(target?.startsWith("/pihome") || target?.startsWith("/opt/roster")).toBe(true)
      }

      const env = envOf(spec)
      const token = /^http:\/\/([0-9a-f]{64}):x@host\.docker\.internal:7300$/.exec(env.HTTPS_PROXY ?? "")?.[1]
      expect(token).toBeDefined()
      for (const k of ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]) {
        expect(env[k]).toBe(`http://${token}:x@host.docker.internal:7300`)
      }
      expect(env).toMatchObject({
        HOME: "/pihome",
        PI_CODING_AGENT_DIR: "/pihome/agent",
        ROSTER_RUN_ID: runId,
        ROSTER_TASKS_FILE: "/pihome/self/schedule.json",
        ROSTER_STORE_DIR: "/pihome/store",
        ROSTER_SELF_DIR: "/pihome/self",
        ROSTER_CEILING_MIN: "12",
        NO_PROXY: "",
        NODE_USE_ENV_PROXY: "1",
        NODE_OPTIONS: "--disable-warning=UNDICI-EHPA",
        GIT_CONFIG_COUNT: "1",
        GIT_CONFIG_KEY_0: "http.proxyAuthMethod",
        GIT_CONFIG_VALUE_0: "basic",
        NODE_EXTRA_CA_CERTS: "/opt/roster/ca.crt",
        SSL_CERT_FILE: "/opt/roster/ca-bundle.crt",
        CURL_CA_BUNDLE: "/opt/roster/ca-bundle.crt",
        REQUESTS_CA_BUNDLE: "/opt/roster/ca-bundle.crt",
        GIT_SSL_CAINFO: "/opt/roster/ca-bundle.crt",
        PIP_CERT: "/opt/roster/ca-bundle.crt",
        PI_OFFLINE: "1",
        PI_SKIP_VERSION_CHECK: "1",
        PI_TELEMETRY: "0",
        GITHUB_TOKEN: "roster-sentinel-no-real-credential-in-box",
        ANTHROPIC_API_KEY: "roster-sentinel-no-real-credential-in-box"
      })
      expect(JSON.parse(env.ROSTER_REPOS_JSON ?? "[]")).toEqual([
        { connection: "gated", dir: "/pihome/mnt/gated", base: expect.stringMatching(/^[0-9a-f]{40}$/), branch: `roster/alice/${runId}`, mode: "ro" }
      ])
      expect(env.ROSTER_KNOWLEDGE_DIR).toBeUndefined()
      expect(env.ROSTER_CHANNEL_DIR).toBeUndefined()
      expect(binds.some((b) => b.includes("/pihome/channel"))).toBe(false)
      // The clone is gone once the run ended (its backstop found nothing to keep).
      expect(fs.existsSync(path.join(paths.data, "repos", "alice", runId))).toBe(false)
      expect(env.OTHER_TOKEN).toBeUndefined()
      expect(env.ROSTER_TASK_ID).toBeUndefined()
      // The host's real key never enters the box, in any field.
      expect(JSON.stringify(spec)).not.toContain("sk-ant-real-key")

      // The egress self-test runs first, then execs pi with its arguments.
      expect(spec.Cmd.slice(0, 4)).toEqual(["/bin/sh", "-c", PREFLIGHT_SCRIPT, "roster-preflight"])
      expect(spec.Cmd.slice(4, 9)).toEqual(["/opt/roster/engine/run-pi", "--mode", "json", "--session-dir", "/pihome/session"])
      expect(spec.Env).toContain("ROSTER_GATEWAY=host.docker.internal:7300")
      expect(spec.Env).toContain(`ROSTER_DEPLOYMENT_ID=${deploymentId(paths.config)}`)
      expect(spec.Env.join("\n")).not.toContain(paths.config)
      const sid = spec.Cmd.indexOf("--session-id")
      expect(spec.Cmd[sid + 1]).toMatch(/^roster-pc-[0-9a-f]{16}$/)
      const sys = spec.Cmd.indexOf("--append-system-prompt")
      expect(spec.Cmd[sys + 1]).toContain("You are alice.")
      expect(spec.Cmd.at(-1)).toMatch(/\n## Your task\nhello there$/)
      // The identity token the proxy URL carries is the file the gateway will look up, and it is gone now.
      expect(fs.existsSync(path.join(paths.state, "identity", `${token}.json`))).toBe(false)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it("a mounted engine runs node on the checkout's pi entry with roster's extensions only", () => {
    const plan: BoxPlan = {
      runId: "2026-01-01-00-00-00-abcdef01", worker: "alice", kind: "box", taskId: "t1", image: "img", runtime: "runsc", policy: org.box,
      user: { uid: 1000, gid: 1000 }, network: "roster-locked-test", gatewayAddress: "172.30.0.1", gatewayPort: 7300, token: "a".repeat(64),
      dirs: { pihome: "/h", inbox: "/in", store: "/s", selfView: "/sv", workerConfig: "/wc", workerRuns: "/wr", hiddenRuns: [], emptyDir: "/tmp/roster-empty", journal: "/j.jsonl", tasksView: "/t.json", ca: "/ca", caBundle: "/cab" },
      mounts: [], checkouts: [], channel: null, exposedEnv: [], anthropicEnvKey: false, ceilingMin: null, deployment: "/cfg", deadline: 1, owner: { pid: 1, start: "1" }, hostCpus: 2,
      engine: { kind: "mounted", hostDir: "/src/roster", entry: "/opt/roster/checkout/node_modules/pi/cli.js", extensions: ["/opt/roster/checkout/box/extensions/a.ts", "/opt/roster/checkout/box/extensions/b.ts"] },
      mode: "rpc", piArgs: ["--session-id", "k"], chatSend: "slack", termSend: false
    }
    const spec = containerSpec(plan)
    expect(spec.Cmd.slice(4)).toEqual([
      "node", "/opt/roster/checkout/node_modules/pi/cli.js", "--mode", "rpc", "--no-extensions",
      "-e", "/opt/roster/checkout/box/extensions/a.ts", "-e", "/opt/roster/checkout/box/extensions/b.ts",
      "--session-dir", "/pihome/session", "--session-id", "k"
    ])
    expect(spec.HostConfig.Runtime).toBe("runsc")
    expect(spec.HostConfig.Binds).toContain("/src/roster:/opt/roster/checkout:ro")
    expect(spec.HostConfig.Binds).toContain("/j.jsonl:/pihome/self/journal/journal.jsonl:ro")
    expect(spec.OpenStdin).toBe(true)
    expect(spec.Env).toContain("ROSTER_TASK_ID=t1")
    expect(spec.Env).toContain("ROSTER_CHAT_SEND=slack")
    expect(spec.Env.some((e) => e.startsWith("ROSTER_CEILING_MIN="))).toBe(false)
    expect(spec.Env.some((e) => e.startsWith("ANTHROPIC_API_KEY="))).toBe(false)
  })

  it("a default box is bounded: 4g of memory, half the host's cores, a 1g /tmp", () => {
    const defaults = Schema.decodeSync(OrgSchema)({})
    const plan: BoxPlan = {
      runId: "2026-01-01-00-00-00-abcdef02", worker: "alice", kind: "box", taskId: null, image: "img", runtime: "runc", policy: defaults.box,
      user: { uid: 1000, gid: 1000 }, network: "roster-locked-test", gatewayAddress: "172.30.0.1", gatewayPort: 7300, token: "a".repeat(64),
      dirs: { pihome: "/h", inbox: "/in", store: "/s", selfView: "/sv", workerConfig: "/wc", workerRuns: "/wr", hiddenRuns: [], emptyDir: "/tmp/roster-empty", journal: "/j.jsonl", tasksView: "/t.json", ca: "/ca", caBundle: "/cab" },
      mounts: [], checkouts: [], channel: null, exposedEnv: [], anthropicEnvKey: false, ceilingMin: 30, deployment: "/cfg", deadline: 1, owner: { pid: 1, start: "1" }, hostCpus: 6,
      engine: { kind: "baked" }, mode: "json", piArgs: [], chatSend: null, termSend: false
    }
    const hc = containerSpec(plan).HostConfig
    expect(hc.Memory).toBe(4 * 1024 ** 3)
    expect(hc.NanoCpus).toBe(3e9)
    expect(hc.Tmpfs["/tmp"]).toContain(`size=${1024 ** 3},`)
  })

  it("root on the host never means root in the box", () => {
    expect(boxUser(0, 0)).toEqual({ uid: 65532, gid: 65532 })
    expect(boxUser(1000, 100)).toEqual({ uid: 1000, gid: 100 })
  })

  it("reads sizes as docker does", () => {
    expect(parseSize("2g")).toBe(2 * 1024 ** 3)
    expect(parseSize("512m")).toBe(512 * 1024 ** 2)
    expect(parseSize("10")).toBe(10)
    expect(Number.isNaN(parseSize("lots"))).toBe(true)
  })
})
