// The layer order of src/, written down once. A folder may import its own files and folders
// of a lower rank, never a sibling of the same rank or anything above it, and nothing may
// import in a circle. `npm run lint` enforces it.
const LAYERS = [
  ["fs", "docker", "report"], //             engine, files, and where progress and notes go: no roster knowledge
  ["config"], //                             org.toml, worker files, the three roots
  ["contract", "journal"], //                what box and gateway both read: identity, labels, sentinel, gateway state, CA files, addresses, scope, run files, pi events; the worker's journal
  ["vault", "run", "worker", "task", "knowledge", "memory"], // stored credentials, run records, workers, task records, gated repos (host git), worker memory
  ["box", "gateway", "image", "rehearsal", "api"], // a box of one run; the gateway; building the box image; the rehearsal model; the control API's declaration
  ["session", "supervisor"], //              warm sessions (boxes in rpc mode); the task queue's dispatch, adoption and reaper
  ["chat"], //                               Slack and Discord listeners: a mapped channel's messages as turns of its worker's session
  ["daemon", "deployment", "web"], //        gateway + supervisor + control API + image pulls; making a deployment; the browser UI
  ["cli"], //                                the roster command
  ["(root)"] //                              src/bin.ts, src/index.ts, src/RosterLive.ts
]

const rank = new Map(LAYERS.flatMap((names, i) => names.map((n) => [n, i])))
const folders = [...rank.keys()].filter((n) => n !== "(root)")
const pathOf = (name) => (name === "(root)" ? "^src/[^/]+\\.ts$" : `^src/${name}/`)

const forbidden = [
  {
    name: "no-circular",
    severity: "error",
    comment: "an import circle makes two modules one module in disguise",
    from: { path: "^src/" },
    to: { circular: true }
  },
  ...[...rank.keys()].map((from) => {
    const above = folders.filter((to) => to !== from && rank.get(to) >= rank.get(from))
    return {
      name: `layer-${from.replace(/[()]/g, "")}`,
      severity: "error",
      comment: `${from} (rank ${rank.get(from)}) may not import a sibling or anything above it`,
      from: { path: pathOf(from) },
      to: { path: above.length > 0 ? `^src/(${above.join("|")})/` : "^$" }
    }
  }),
  {
    name: "no-unknown-folder",
    severity: "error",
    comment: "every folder of src/ has a place in LAYERS (.dependency-cruiser.cjs)",
    from: { path: `^src/(?!(${folders.join("|")})/)[^/]+/` },
    to: {}
  }
]

module.exports = {
  forbidden,
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".js"] }
  }
}
