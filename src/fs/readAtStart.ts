import * as fs from "node:fs"

/**
 * A small file's text, read at once, for what must be known before any service exists (where a
 * deployment's folders are); undefined when it cannot be read. Everything later reads through
 * the FileSystem service.
 */
export const readTextAtStart = (file: string): string | undefined => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}
