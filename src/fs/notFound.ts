import { Effect } from "effect"

/** A file system error that says the file is not there (not made yet): what "none" means, unlike any other failure. */
export const isNotFound = (e: { readonly _tag: string }) => e._tag === "SystemError" && (e as { readonly reason?: string }).reason === "NotFound"

/**
 * For a reader that shows what it can: a file not there yet reads as `empty`, silently; one that is
 * there and cannot be read is said, naming it, and reads as `empty` too — never silently.
 */
export const readOr = <A>(file: string, empty: A, prefix = "") =>
<B, E extends { readonly _tag: string; readonly message: string }, R>(self: Effect.Effect<B, E, R>): Effect.Effect<A | B, never, R> =>
  self.pipe(Effect.catchAll((e) =>
    isNotFound(e)
      ? Effect.succeed(empty)
      : Effect.logWarning(`${prefix}${file} could not be read (${e.message}): what it holds is not shown`).pipe(Effect.as(empty))
  ))
