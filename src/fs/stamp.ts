import { FileSystem } from "@effect/platform"
import { Effect, Option } from "effect"

/**
 * Which version of a file is on disk, from one stat: roster writes by rename (a new inode), and any
 * other edit moves the time or the size. None when the file is not there. Lets a reader keep what
 * it decoded until the file changes, without reading it again to find out.
 */
export const fileStamp = (file: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.stat(file)).pipe(
    Effect.map((s) => `${Option.getOrElse(s.ino, () => 0)}:${Option.getOrElse(Option.map(s.mtime, (d) => d.getTime()), () => 0)}:${s.size}`),
    Effect.option
  )
