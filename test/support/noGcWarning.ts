/**
 * Every test file ends with the garbage collector run and no "Closing file descriptor … on
 * garbage collection" from Node: a file handle left for the GC is a resource no scope closed.
 */
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { afterAll, expect } from "vitest"

// The collector, callable without starting node with --expose-gc.
v8.setFlagsFromString("--expose-gc")
const gc = vm.runInNewContext("gc") as () => void

// One listener a process (the integration files share one): each file reads what came during it.
const KEY = Symbol.for("roster.test.gcWarnings")
const shared = globalThis as { [KEY]?: Array<string> }
const seen = shared[KEY] ?? (shared[KEY] = [])
if (process.listeners("warning").every((l) => l.name !== "rosterGcWarning")) {
  process.on("warning", function rosterGcWarning(w) {
    if (/on garbage collection/.test(w.message)) seen.push(w.message)
  })
}
seen.length = 0

afterAll(async () => {
  for (let i = 0; i < 2; i++) {
    gc()
    await new Promise((r) => setTimeout(r, 20))
  }
  expect(seen, "a file handle was left for the garbage collector to close: open it as a scoped resource (acquireRelease) and let its scope close it").toEqual([])
})
