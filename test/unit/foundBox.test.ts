import { describe, expect, it } from "vitest"
import { foundBox } from "../../src/box/docker/dockerBackend.js"
import * as C from "../../src/contract/constants.js"

const MADE_AS = "2026-12-07-09-00-00-aaaaaaaa"
const TAKEN_BY = "2026-12-07-09-05-00-bbbbbbbb"
const warmBox = (name: string) => ({
  id: "c1", names: [`/${name}`], state: "running", created: 0,
  labels: { [C.LABEL_KIND]: "warm", [C.LABEL_RUN_ID]: MADE_AS, [C.LABEL_WORKER]: "alice" }
})

// The Now page, the fleet's live boxes and the supervisor's adoption all read a box through this: a warm box
// still waiting is not a run's (it was counted as "1 live" on an idle node, and adopted as if a run held it).
describe("a warm box as the engine lists it", () => {
  it("under the name it was made with, it waits: not taken, its own run id", () => {
    const b = foundBox(warmBox(`roster-box-${MADE_AS}`))
    expect(b).toMatchObject({ runId: MADE_AS, kind: "warm", named: true })
    expect(b.takenWarm).toBeUndefined()
  })

  it("renamed to a run's id, a run took it: taken, that run's id", () => {
    expect(foundBox(warmBox(`roster-box-${TAKEN_BY}`))).toMatchObject({ runId: TAKEN_BY, kind: "warm", takenWarm: true })
  })

  it("a cold box is never taken warm", () => {
    const b = foundBox({ ...warmBox(`roster-box-${TAKEN_BY}`), labels: { [C.LABEL_KIND]: "run", [C.LABEL_RUN_ID]: MADE_AS, [C.LABEL_WORKER]: "alice" } })
    expect(b.takenWarm).toBeUndefined()
  })
})
