import { Effect } from "effect"
import { notice, report, step } from "../../report/Reporter.js"
import { FileSystem, Path } from "@effect/platform"
import { spawn } from "node:child_process"
import * as os from "node:os"
import { Docker } from "../../docker/Docker.js"
import { BuildError } from "../buildScripted.js"
import { BOX_USER_LINE, boxDir, engineFiles, nodePackage, pinnedNodeVersion, STATX_SHIM } from "./engineFiles.js"
import { runStep } from "./exec.js"
import { aptMirror } from "./mirror.js"

const SUITE = "bookworm"
const onPath = (cmd: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    for (const d of (process.env.PATH ?? "").split(":")) if (d && (yield* fs.exists(path.join(d, cmd)))) return true
    return false
  })

/** Appends lines to a file of the root filesystem (its mode kept). */
const appendTo = (file: string, text: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => Effect.flatMap(fs.readFileString(file), (was) => fs.writeFileString(file, was + text)))

/**
 * The box image without a registry: a Debian root filesystem from the distribution's packages
 * (debootstrap, from this machine's own apt mirror), Node 24 from the npm package that carries
 * the binary, the engine's `npm ci`, then `docker import` and a small build on top for the
 * config. Gives the same /opt/roster/engine as box/Dockerfile.
 */
export const buildOffline = Effect.fn("box.buildOffline")(function*(tag: string, labels: Record<string, string>) {
  const docker = yield* Docker
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  if (process.getuid?.() !== 0) {
    return yield* Effect.fail(new BuildError({ detail: "the offline build runs debootstrap, which needs root: sudo roster box build --offline" }))
  }
  if (!(yield* onPath("debootstrap"))) {
    return yield* Effect.fail(new BuildError({ detail: "debootstrap is missing: apt-get install -y debootstrap" }))
  }
  const mirror = yield* aptMirror(SUITE)
  if (!mirror) {
    return yield* Effect.fail(new BuildError({ detail: `no Debian ${SUITE} mirror is configured in /etc/apt (sources.list or sources.list.d)` }))
  }
  // Under /var/tmp when there is one: a root filesystem is too big for a tmpfs /tmp.
  const work = yield* fs.makeTempDirectoryScoped({ directory: (yield* fs.exists("/var/tmp")) ? "/var/tmp" : os.tmpdir(), prefix: "roster-box-" })
  const rootfs = path.join(work, "rootfs")
  const started = Date.now()
  const say = (s: string) => report(step("box build", `[${Math.round((Date.now() - started) / 1000)}s] ${s}`))

  yield* say(`1/5 Debian ${SUITE} root filesystem (debootstrap from ${mirror})`)
  yield* runStep("debootstrap", "debootstrap", ["--variant=minbase", "--include=git,ca-certificates,bash,coreutils", SUITE, rootfs, mirror])

  const node = nodePackage(yield* pinnedNodeVersion().pipe(Effect.mapError((e) => new BuildError({ detail: `box/engine/package.json names no exact engines.node: ${e.message}` }))))
  yield* say(`2/5 Node from the npm package ${node}`)
  yield* runStep("npm pack", "npm", ["pack", node, "--pack-destination", work, "--silent"], { cwd: work })
  const tgz = (yield* fs.readDirectory(work)).find((f) => f.startsWith("node-linux-") && f.endsWith(".tgz"))
  if (!tgz) return yield* Effect.fail(new BuildError({ detail: "npm pack gave no node tarball" }))
  yield* runStep("unpack node", "tar", ["-xzf", path.join(work, tgz), "-C", work, "package/bin/node"])
  yield* fs.copyFile(path.join(work, "package/bin/node"), path.join(rootfs, "usr/local/bin/node"))
  yield* fs.chmod(path.join(rootfs, "usr/local/bin/node"), 0o755)

  yield* say("3/5 the engine: pi, pinned by box/engine/package-lock.json")
  const engine = path.join(rootfs, "opt/roster/engine")
  yield* fs.makeDirectory(path.join(engine, "extensions", "lib"), { recursive: true })
  const box = yield* boxDir
  for (const f of yield* engineFiles(box)) yield* fs.copyFile(path.join(box, f), path.join(engine, f.replace(/^engine\//, "")))
  yield* fs.chmod(path.join(engine, "run-pi"), 0o755)
  yield* runStep("npm ci", "npm", ["ci", "--omit=dev", "--no-audit", "--no-fund", "--ignore-scripts"], { cwd: engine, quiet: true })
  // Built with this machine's C compiler against its libc (this is a Debian 12 root filesystem, as the host is).
  yield* fs.makeDirectory(path.join(rootfs, "opt/roster/lib"), { recursive: true })
  const shim = yield* runStep("the statx shim (cc)", "cc", ["-shared", "-fPIC", "-O2", "-o", path.join(rootfs, STATX_SHIM), path.join(box, "engine", "statx-shim.c")]).pipe(
    Effect.as(true),
    Effect.catchAll((e) =>
      report(notice(`the box's statx shim was not built (${e.message}): under Debian 12's gVisor, ls and stat fail in its boxes — install a C compiler (apt-get install gcc) and build again`, "warning")).pipe(
        Effect.as(false)
      )
    )
  )
  yield* appendTo(path.join(rootfs, "etc/passwd"), `${BOX_USER_LINE}\n`)
  yield* appendTo(path.join(rootfs, "etc/group"), "roster:x:65532:\n")
  for (const cache of ["var/cache/apt/archives", "var/lib/apt/lists"]) {
    for (const f of yield* fs.readDirectory(path.join(rootfs, cache))) {
      if (f.endsWith(".deb") || (cache.endsWith("lists") && f !== "lock" && f !== "partial")) yield* fs.remove(path.join(rootfs, cache, f), { recursive: true })
    }
  }

  const base = `roster-box-base:${tag.replace(/[^a-zA-Z0-9_.-]/g, "-")}`
  yield* say(`4/5 docker import as ${base}`)
  const tar = spawn("tar", ["--numeric-owner", "-C", rootfs, "-c", "."], { stdio: ["ignore", "pipe", "inherit"] })
  yield* docker.imageImport(tar.stdout, base).pipe(Effect.mapError((e) => new BuildError({ detail: e.message })))

  yield* say(`5/5 ${tag}: the box's config on top`)
  yield* fs.writeFileString(path.join(work, "Dockerfile"), [
    `FROM ${base}`,
    "ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8",
    // Every process of the box (pi, its tools, roster's own execs), as box/Dockerfile sets it; only when it was built.
    ...(shim ? [`ENV LD_PRELOAD=/${STATX_SHIM}`] : []),
    "WORKDIR /pihome/workspace",
    ""
  ].join("\n"))
  yield* docker.imageBuild(work, ["Dockerfile"], tag, () => undefined, { ...labels, "org.roster.build": "offline" }).pipe(
    Effect.mapError((e) => new BuildError({ detail: e.message }))
  )
  yield* say(`built ${tag}`)
}, Effect.scoped)
