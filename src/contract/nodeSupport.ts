/**
 * Which Node roster runs on. The floor is the oldest line still maintained (22.19: also what pi and
 * Effect 4's platform packages need); 24 LTS is what roster is built for, tested on, and what the
 * project's own scripts run under (the Node `npm ci` brings). End-of-life dates as the Node.js
 * release schedule gives them: past its date a line gets no security fixes.
 */
export const NODE_FLOOR = { major: 22, minor: 19 } as const

/** The day each line (even: LTS; odd: current) stops getting fixes, as the release schedule gives it. */
const END_OF_LIFE: Readonly<Record<number, string>> = {
  18: "2025-04-30", 19: "2023-06-01", 20: "2026-04-30", 21: "2024-06-01", 22: "2027-04-30", 23: "2025-06-01",
  24: "2028-04-30", 25: "2026-06-01", 26: "2029-04-30", 27: "2027-06-01", 28: "2030-04-30"
}

const parts = (version: string) => {
  const [major = 0, minor = 0] = version.replace(/^v/, "").split(".").map(Number)
  return { major, minor }
}

/** Below the floor: roster refuses to start, saying what to install. */
export const belowFloor = (version: string) => {
  const v = parts(version)
  return v.major < NODE_FLOOR.major || (v.major === NODE_FLOOR.major && v.minor < NODE_FLOOR.minor)
}

/** The day this Node line's support ended, when it has (`today` as YYYY-MM-DD); undefined while it is maintained or unknown. */
export const endedOn = (version: string, today: string) => {
  const eol = END_OF_LIFE[parts(version).major]
  return eol !== undefined && eol <= today ? eol : undefined
}

/** What a person is told on an unsupported Node, with the fix. */
export const floorMessage = (version: string) =>
  `roster needs Node ${NODE_FLOOR.major}.${NODE_FLOOR.minor} or newer (Node 24 LTS is what it is built and tested for); this is Node ${version}` +
  ` — install Node 24 (nodejs.org, your distribution's nodesource packages, or nvm install 24) and run roster again`
