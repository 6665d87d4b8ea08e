import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

export const PI_IMAGE = "roster-box:test"
/** The real box image (git, node) with the scripted engine in pi's place: boxes that do work without a model. */
export const GIT_IMAGE = "roster-scripted-git:test"

/** The real pi image, offline (no registry is probed), rebuilt only when box/ changed. */
export const buildPiImage = () =>
  execFileSync(path.join(root, "bin/roster.js"), ["box", "build", "--offline", "--if-changed", "--tag", PI_IMAGE], {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, ROSTER_HOME: path.join(root, ".roster-dev", "build") }
  })

/** GIT_IMAGE, built FROM the local pi image (no registry); the layer cache makes it instant when nothing changed. */
export const buildScriptedOnPi = () => {
  const context = fs.mkdtempSync(path.join(os.tmpdir(), "roster-git-image-"))
  fs.copyFileSync(path.join(root, "box/scripted/run-pi"), path.join(context, "run-pi"))
  fs.writeFileSync(path.join(context, "Dockerfile"), `FROM ${PI_IMAGE}\nCOPY run-pi /opt/roster/engine/run-pi\nRUN chmod 0755 /opt/roster/engine/run-pi\nLABEL org.roster.engine="scripted"\n`)
  execFileSync("docker", ["build", "--quiet", "--tag", GIT_IMAGE, context], { stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, DOCKER_BUILDKIT: "0" } })
  fs.rmSync(context, { recursive: true, force: true })
}
