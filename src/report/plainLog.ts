import { Cause, type LogLevel } from "effect"
import { visible } from "./terminal.js"

/**
 * A log entry as roster prints it for a person (the CLI's stderr, or a daemon's answer to a CLI
 * that handed it a run): "warning: " or "error: " before it by level, what failed with its cause
 * (a background fiber's), box text escaped. One line per entry, without its newline.
 */
export const plainLogLine = (entry: { readonly cause: Cause.Cause<unknown>; readonly logLevel: LogLevel.LogLevel; readonly message: unknown }) => {
  const said = Array.isArray(entry.message) ? entry.message.join(" ") : String(entry.message)
  const text = Cause.isEmpty(entry.cause) ? said : `${said}: ${Cause.pretty(entry.cause)}`
  const level = entry.logLevel._tag
  const prefix = level === "Warning" ? "warning: " : level === "Error" || level === "Fatal" ? "error: " : ""
  return visible(`${prefix}${text}`)
}

/** What a failure says, whatever shape it has (a tagged error's message, an Error's, or itself). */
export const errorMessage = (e: unknown) =>
  e instanceof Error ? e.message : typeof e === "object" && e !== null && "message" in e ? String(e.message) : String(e)
