import { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"
import { INBOX } from "../contract/constants.js"
import { FILES_PER_MESSAGE, type FileNote, type MessageFile, safeFileName } from "../contract/messageFile.js"

/** Fetches one file to `dest`, at most `maxBytes` of it (more is a failure); gives the bytes written. */
export type FetchFile = (file: MessageFile, dest: string, maxBytes: number) => Effect.Effect<number, { readonly message: string }>

const megabytes = (bytes: number) => `${Number((bytes / 1024 / 1024).toFixed(1))} MB`

/** A name not yet used in the folder: `a.txt`, then `a (2).txt`, … */
const unused = (name: string, used: Set<string>) => {
  const dot = name.lastIndexOf(".")
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""]
  let candidate = name
  for (let n = 2; used.has(candidate.toLowerCase()); n++) candidate = `${stem} (${n})${ext}`
  used.add(candidate.toLowerCase())
  return candidate
}

/**
 * A message's files brought into the run's inbox (`<inbox>/files/<message-id>/<name>`), read-only
 * in the box under /pihome/inbox: each fetched by the host (the box never holds what fetches it),
 * at most {@link FILES_PER_MESSAGE} and `maxBytes` each; one that cannot be is named with why.
 */
export const takeFiles = (files: ReadonlyArray<MessageFile>, messageId: string, inboxDir: string, fetch: FetchFile, maxBytes: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const folder = safeFileName(messageId)
    const dir = path.join(inboxDir, "files", folder)
    const used = new Set<string>()
    const notes: Array<FileNote> = []
    for (const [i, file] of files.entries()) {
      const said = { name: file.name, type: file.type, size: file.size }
      if (i >= FILES_PER_MESSAGE) {
        notes.push({ ...said, skipped: `a message brings at most ${FILES_PER_MESSAGE} files` })
        continue
      }
      if (file.size > maxBytes) {
        notes.push({ ...said, skipped: `larger than [[chat]] file_max (${megabytes(maxBytes)})` })
        continue
      }
      const name = unused(safeFileName(file.name), used)
      const got = yield* fs.makeDirectory(dir, { recursive: true, mode: 0o755 }).pipe(
        Effect.mapError((e) => ({ message: e.message })),
        Effect.zipRight(fetch(file, path.join(dir, name), maxBytes)),
        Effect.either
      )
      if (got._tag === "Left") {
        yield* Effect.logWarning(`a chat file (${file.name}) could not be fetched: ${got.left.message}`)
        notes.push({ ...said, skipped: `it could not be fetched (${got.left.message})` })
      } else notes.push({ ...said, size: got.right, path: `${INBOX}/files/${folder}/${name}` })
    }
    return notes
  })
