import { describe, expect, it } from "@effect/vitest"
import { belowFloor, endedOn, floorMessage } from "../../src/contract/nodeSupport.js"

describe("the Node roster runs on", () => {
  it("below 22.19 is refused, with what to install; 22.19 and newer run", () => {
    for (const v of ["v18.20.4", "v20.20.2", "v22.18.0", "21.7.3"]) expect(belowFloor(v), v).toBe(true)
    for (const v of ["v22.19.0", "v22.23.5", "v24.22.3", "v26.12.1", "v30.0.0"]) expect(belowFloor(v), v).toBe(false)
    expect(floorMessage("v20.20.2")).toMatch(/needs Node 22\.19 or newer .*this is Node v20\.20\.2 — install Node 24/)
  })

  it("a line past its end of life is said (its date), a maintained one is not", () => {
    const today = "2026-12-07"
    expect(endedOn("v20.20.2", today)).toBe("2026-04-30")
    expect(endedOn("v25.9.0", today)).toBe("2026-06-01")
    expect(endedOn("v23.11.0", today)).toBe("2025-06-01")
    for (const v of ["v22.23.5", "v24.22.3", "v26.12.1"]) expect(endedOn(v, today), v).toBeUndefined()
    // Node 22's maintenance ends in April 2027: from then the daemon says so.
    expect(endedOn("v22.23.5", "2027-04-30")).toBe("2027-04-30")
    expect(endedOn("v31.0.0", today)).toBeUndefined()
  })
})
