import { FileSystem } from "@effect/platform"
import { Effect } from "effect"

/**
 * The process that owns a box: its pid and its start time (clock ticks since boot, field 22 of
 * /proc/<pid>/stat), so a pid the kernel has since given to another process is not mistaken
 * for the owner. `start` is "" where /proc cannot tell (then only the pid is checked).
 */
export interface Owner {
  readonly pid: number
  readonly start: string
}

// The command name (field 2) is in parentheses and may itself hold spaces or ")": read after the last ")".
const fieldsAfterName = (stat: string) => stat.slice(stat.lastIndexOf(")") + 2).split(" ")

/** What /proc says of a process: its state letter (field 3) and start time (field 22); undefined when it cannot be read. */
const procStat = (pid: number) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(`/proc/${pid}/stat`)).pipe(
    Effect.map((stat) => {
      const fields = fieldsAfterName(stat)
      return { state: fields[0] ?? "", start: fields[19] ?? "" }
    }),
    // No /proc entry to read: no such process (it ended), which callers read as not alive.
    Effect.orElseSucceed(() => undefined)
  )

export const processStart = (pid: number) => Effect.map(procStat(pid), (s) => s?.start ?? "")

export const currentOwner = Effect.map(processStart(process.pid), (start): Owner => ({ pid: process.pid, start }))

/** Whether a process with this pid exists (EPERM: it does, but belongs to another user). */
export const pidExists = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    // EPERM: it exists but belongs to someone else.
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * Is this exact process still running? Gone means: no such pid, a zombie (killed, its exit not
 * yet collected by its parent — a daemon's parent is often an init that reaps late), or a pid
 * whose start time is known and differs (the kernel gave it to another process). A start time
 * that cannot be read right now is not proof of anything: the owner counts as alive, and the
 * next look decides — a box is killed for a dead owner only when the owner is surely dead.
 */
export const ownerAlive = (owner: Owner) =>
  Number.isInteger(owner.pid) && owner.pid > 0 && pidExists(owner.pid)
    ? Effect.map(procStat(owner.pid), (s) =>
      s === undefined || ((s.state !== "Z" && s.state !== "X") && (owner.start === "" || s.start === "" || s.start === owner.start)))
    : Effect.succeed(false)

/** Whether a process with this pid runs (a zombie does not), whoever started it. */
export const pidAlive = (pid: number) => ownerAlive({ pid, start: "" })
