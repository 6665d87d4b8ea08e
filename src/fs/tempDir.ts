import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/**
 * A fresh folder under the OS temp folder, with `sub` made inside it, at once: for callers that
 * must have a path before any Effect runs (`tempDeployment` of roster/testing, a test's setup).
 */
export const makeTempDirSync = (prefix: string, sub?: string) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  if (sub !== undefined) fs.mkdirSync(path.join(root, sub), { recursive: true })
  return root
}
