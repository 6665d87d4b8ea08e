import { Effect } from "effect"
import * as path from "node:path"
import { INBOX, PIHOME } from "../../../contract/constants.js"
import { runFiles } from "../../../contract/runFiles.js"
import { readFileInside } from "../../../fs/readInside.js"

/** A file the box named, read host-side: its name and bytes. */
export interface BoxFile {
  readonly name: string
  readonly bytes: Uint8Array
}

/** Folders under /pihome that are not the run's own (the worker's store, mounts, the channel, the self view). */
const NOT_THE_RUNS = ["store", "mnt", "channel", "self"]

const under = (root: string, p: string) => p === root || p.startsWith(`${root}/`)

/** The host path a box path names among the run's own folders (its home and its inbox), or why none. */
const hostPathOf = (runDir: string, boxPath: string): { readonly host: string; readonly root: string } | string => {
  const norm = path.posix.normalize(boxPath)
  if (!path.posix.isAbsolute(norm) || !under(PIHOME, norm)) return `${boxPath}: name a file under ${PIHOME} (e.g. ${PIHOME}/workspace/report.txt)`
  const files = runFiles(runDir)
  if (under(INBOX, norm)) return { host: path.join(files.inbox, path.posix.relative(INBOX, norm)), root: files.inbox }
  const top = path.posix.relative(PIHOME, norm).split("/")[0] ?? ""
  if (NOT_THE_RUNS.includes(top)) return `${boxPath}: only files of this run's own folders can be sent (not ${PIHOME}/${top}): copy it to ${PIHOME}/workspace first`
  return { host: path.join(files.home, path.posix.relative(PIHOME, norm)), root: files.home }
}

/**
 * A file the box names, read by the host for an upload: only from the run's own folders (its
 * home and inbox), a regular file of at most `maxBytes`, no symlink followed out. Gives the
 * file, or why not in words the worker acts on.
 */
export const readBoxFile = (runDir: string, boxPath: string, maxBytes: number): Effect.Effect<BoxFile | string> => {
  const where = hostPathOf(runDir, boxPath)
  if (typeof where === "string") return Effect.succeed(where)
  return Effect.map(readFileInside(where.root, where.host, maxBytes), (read) => {
    if (read instanceof Uint8Array) return { name: path.posix.basename(boxPath), bytes: read }
    switch (read) {
      case "symlink":
        return `${boxPath} is a symlink: send the file itself`
      case "missing":
        return `${boxPath}: no such file`
      case "outside":
        return `${boxPath} leads outside this run's folders: send a file of its own`
      case "not-a-file":
        return `${boxPath} is not a regular file`
    }
    return "tooBig" in read
      ? `${boxPath} is ${read.tooBig} bytes; a file sent to chat is at most ${maxBytes} ([[chat]] file_max)`
      : `${boxPath}: ${read.error}`
  })
}
