import Dockerode from "dockerode"
import { execFileSync } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { buildPiImage, buildScriptedOnPi } from "../support/images.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
export const TEST_IMAGE = "roster-scripted:test"
export { GIT_IMAGE, PI_IMAGE } from "../support/images.js"

/**
 * The integration suite needs a real engine: no engine is a loud failure with the fix, never
 * a skip. Builds roster (the tests drive the real CLI) and the scripted-engine image once.
 */
export default async function setup() {
  // This run's deployments live under roster-it-<run>-*: the teardown removes only what this run
  // made (another suite on the same engine — a second checkout, CI — keeps its boxes).
  const run = crypto.randomBytes(4).toString("hex")
  process.env.ROSTER_TEST_RUN = run
  const docker = new Dockerode()
  try {
    await docker.ping()
  } catch (e) {
    throw new Error(
      `The integration tests need a running Docker engine and none answered (${e instanceof Error ? e.message : e}).\n` +
        `Fix: apt-get install -y docker.io && (dockerd > /var/log/dockerd.log 2>&1 &) — or run .ci/run, which does this.`
    )
  }
  execFileSync("npm", ["run", "--silent", "build"], { cwd: root, stdio: "inherit" })
  execFileSync(path.join(root, "bin/roster.js"), ["box", "build-scripted", "--tag", TEST_IMAGE], {
    cwd: root,
    stdio: ["ignore", "inherit", "pipe"],
    env: { ...process.env, ROSTER_HOME: path.join(root, ".roster-dev", "build") }
  })
  buildPiImage()
  buildScriptedOnPi()
  // The mounted-engine test runs pi from this checkout's box/engine.
  if (!fs.existsSync(path.join(root, "box/engine/node_modules/@earendil-works/pi-coding-agent/package.json"))) {
    execFileSync("npm", ["ci", "--omit=dev", "--no-audit", "--no-fund", "--ignore-scripts"], { cwd: path.join(root, "box/engine"), stdio: "inherit" })
  }
  return async () => {
    const ours = (c: Dockerode.ContainerInfo) => (c.Labels["roster.deployment"] ?? "").includes(`${path.sep}roster-it-${run}-`)
    const left = (await docker.listContainers({ all: true, filters: { label: ["roster.run-id"] } })).filter(ours)
    for (const c of left) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)
    if (left.length > 0) throw new Error(`the integration tests left ${left.length} roster container(s) behind: ${left.map((c) => c.Names.join(",")).join(" ")}`)
  }
}
