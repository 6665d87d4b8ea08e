import { FileSystem } from "@effect/platform"
import { Effect, Option } from "effect"

/**
 * The last `lines` lines of a text file, read from its last `maxBytes` only (a box's stderr may
 * be hundreds of MB); "" when the file is not there or cannot be read — a tail is said beside
 * an error, never in place of it. The handle is closed with the read.
 */
export const tailOfFile = (file: string, lines: number, maxBytes = 64 * 1024) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const handle = yield* fs.open(file, { flag: "r" })
    const size = Number((yield* handle.stat).size)
    const length = Math.min(size, maxBytes)
    yield* handle.seek(size - length, "start")
    const bytes = yield* handle.readAlloc(length)
    const text = Option.match(bytes, { onNone: () => "", onSome: (b) => Buffer.from(b).toString("utf8") })
    return text.trimEnd().split("\n").slice(-lines).join("\n")
  // A log that cannot be read adds no lines to the message it completes; the message itself still goes out.
  }).pipe(Effect.scoped, Effect.orElseSucceed(() => ""))
