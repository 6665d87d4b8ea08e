import { Data } from "effect"

/** A command's chosen process exit code, carried to the edge (bin.ts) instead of calling process.exit mid-program. */
export class ExitCode extends Data.TaggedError("ExitCode")<{ readonly code: number }> {}
