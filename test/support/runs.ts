import * as fs from "node:fs"
import * as path from "node:path"

/**
 * The id of the run that started last in a runs folder. By run.json's started_at (ms), not the
 * id: ids have one-second resolution and a random suffix, so two runs started in one second
 * sort by chance.
 */
export const latestRunId = (dir: string) =>
  fs.readdirSync(dir)
    .map((id) => {
      try {
        return { id, at: Date.parse((JSON.parse(fs.readFileSync(path.join(dir, id, "run.json"), "utf8")) as { started_at: string }).started_at) }
      } catch {
        return { id, at: 0 }
      }
    })
    .sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : 1))
    .at(-1)?.id ?? ""
