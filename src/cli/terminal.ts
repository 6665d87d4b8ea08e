import type { Console } from "effect"
export { colourOn, dim, visible } from "../report/terminal.js"
import { colourOn } from "../report/terminal.js"

 
const SGR = /\x1b\[[0-9;]*m/g

const strip = (arg: unknown) => (typeof arg === "string" ? arg.replace(SGR, "") : arg)

/**
 * The console roster prints through: what goes to stdout passes `tidy` (the help's rewording),
 * and colour (SGR sequences — @effect/cli's help and errors carry them) is removed from a
 * stream that is not a terminal or under NO_COLOR.
 */
export const plainConsole = (c: Console.Console, tidy: (text: string) => string = (t) => t): Console.Console => {
  const out = colourOn(process.stdout)
  const err = colourOn(process.stderr)
  const tidied = (args: ReadonlyArray<unknown>) => args.map((a) => (typeof a === "string" ? tidy(a) : a))
  const o = (args: ReadonlyArray<unknown>) => (out ? tidied(args) : tidied(args).map(strip))
  const e = (args: ReadonlyArray<unknown>) => (err ? args : args.map(strip))
  return {
    ...c,
    log: (...args) => c.log(...o(args)),
    info: (...args) => c.info(...o(args)),
    error: (...args) => c.error(...e(args)),
    warn: (...args) => c.warn(...e(args)),
    unsafe: {
      ...c.unsafe,
      log: (...args) => c.unsafe.log(...o(args)),
      info: (...args) => c.unsafe.info(...o(args)),
      error: (...args) => c.unsafe.error(...e(args)),
      warn: (...args) => c.unsafe.warn(...e(args))
    }
  }
}
