/** A file a chat message carries, as the service describes it: fetched host-side, never by the box. */
export interface MessageFile {
  /** The service's id of the file (Slack's file id, Discord's attachment id). */
  readonly id: string
  readonly name: string
  /** Its media type as the service says (or "application/octet-stream"). */
  readonly type: string
  /** Bytes, as the service says (the fetch counts them again). */
  readonly size: number
  /** Where the service serves it (Slack's url_private_download, Discord's attachment url). */
  readonly url: string
}

/** What became of one attached file, as the turn's input names it. */
export interface FileNote {
  readonly name: string
  readonly type: string
  readonly size: number
  /** Its path in the box (read-only), when it was fetched. */
  readonly path?: string
  /** Why it was not fetched. */
  readonly skipped?: string
}

/** Files one message may bring into a box; more are named, not fetched. */
export const FILES_PER_MESSAGE = 10

/**
 * A name safe as one path segment: the service's name with anything but letters, digits, `.`,
 * `_`, `-` and spaces replaced, no leading dot, at most 100 characters, never empty.
 */
export const safeFileName = (name: string) => {
  const base = name.split(/[\\/]/).at(-1) ?? ""
  const clean = base.replace(/[^A-Za-z0-9._ -]/g, "_").replace(/^[.\s]+/, "").slice(-100).trim()
  return clean === "" ? "file" : clean
}
