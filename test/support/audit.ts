import fs from "node:fs"
import path from "node:path"
import type { AuditRecord } from "../../src/gateway/base/Audit.js"

/** Every line of a deployment's audit folder, parsed (none when the folder is not there yet). */
export const auditLines = (dir: string): Array<AuditRecord> =>
  (fs.existsSync(dir) ? fs.readdirSync(dir) : [])
    .flatMap((f) => fs.readFileSync(path.join(dir, f), "utf8").split("\n"))
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as AuditRecord)

/**
 * The audit lines once `ready` holds of them, or as they are after `ms`. The gateway writes a
 * request's line after its answer has gone out (and a tunnel's after both sides closed): a test
 * that reads the log the moment its client has the answer races that write.
 */
export const auditedOnce = async (
  dir: string,
  ready: (lines: Array<AuditRecord>) => boolean,
  ms = 2_000
): Promise<Array<AuditRecord>> => {
  const until = Date.now() + ms
  let lines = auditLines(dir)
  while (!ready(lines) && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 50))
    lines = auditLines(dir)
  }
  return lines
}
