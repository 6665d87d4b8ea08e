import { FileSystem, Path } from "@effect/platform"
import { type Context, Effect } from "effect"
import { Paths } from "../config/Paths.js"
import { Files } from "../fs/Files.js"

/** What a task store reads and writes through, taken when its layer is built: its methods need nothing of their caller. */
export interface TaskPlace {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  readonly paths: Context.Tag.Service<Paths>
  readonly files: Context.Tag.Service<Files>
}

export const taskPlace = Effect.all({ fs: FileSystem.FileSystem, path: Path.Path, paths: Paths, files: Files })
