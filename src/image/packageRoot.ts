import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** The roster checkout or installed package this code runs from (holds box/). Works from src/ and dist/. */
export const packageRoot = (): string => {
  let dir = path.dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const pkg = path.join(dir, "package.json")
    if (fs.existsSync(pkg) && fs.existsSync(path.join(dir, "box"))) return dir
    const up = path.dirname(dir)
    if (up === dir) throw new Error("roster's package root (with box/) was not found above " + fileURLToPath(import.meta.url))
    dir = up
  }
}
