import { Effect } from "effect"
import * as fsp from "node:fs/promises"
import * as path from "node:path"

/** Why a file could not be read from inside a folder, in words for whoever named it. */
export type Refused = "symlink" | "missing" | "outside" | "not-a-file" | { readonly tooBig: number } | { readonly error: string }

const inside = (root: string, p: string) => p === root || p.startsWith(`${root}${path.sep}`)

/**
 * A regular file read only if it really is inside `root` and at most `maxBytes`: opened without
 * following a last symlink, and the path its open descriptor has (/proc/self/fd) checked to be
 * inside — so a folder swapped for a symlink between a check and the read gains nothing. Node's
 * own fs: the platform FileSystem gives no descriptor's path.
 */
export const readFileInside = (root: string, file: string, maxBytes: number) =>
  Effect.tryPromise({
    try: async (): Promise<Uint8Array | Refused> => {
      const realRoot = await fsp.realpath(root)
      const handle = await fsp.open(file, fsp.constants.O_RDONLY | fsp.constants.O_NOFOLLOW | fsp.constants.O_NONBLOCK).catch((e: NodeJS.ErrnoException) => e)
      if (handle instanceof Error) return handle.code === "ELOOP" ? "symlink" : handle.code === "ENOENT" ? "missing" : { error: handle.code ?? handle.message }
      try {
        if (!inside(realRoot, await fsp.realpath(`/proc/self/fd/${handle.fd}`))) return "outside"
        const stat = await handle.stat()
        if (!stat.isFile()) return "not-a-file"
        if (stat.size > maxBytes) return { tooBig: stat.size }
        const bytes = await handle.readFile()
        return bytes.byteLength > maxBytes ? { tooBig: bytes.byteLength } : bytes
      } finally {
        await handle.close()
      }
    },
    catch: (e): Refused => ({ error: e instanceof Error ? e.message : String(e) })
  }).pipe(Effect.merge)
