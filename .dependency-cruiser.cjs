// The layer order of src/, written down once. A folder may import its own files and folders
// of a lower rank, never a sibling of the same rank or anything above it, and nothing may
// import in a circle. `npm run lint` enforces it.
const LAYERS = [
  ["fs", "docker", "report"], //             engine, files, and where progress and notes go: no roster knowledge
  ["config"], //                             org.toml, worker files, the three roots
  ["contract", "journal"], //                what box and gateway both read: identity, labels, sentinel, gateway state, CA files, addresses, scope, run files, pi events; the worker's journal
  ["vault", "run", "worker", "task", "knowledge", "memory", "spend"], // stored credentials, run records, workers, task records, gated repos (host git), worker memory, the spend ledger
  ["reply", "chat", "backend"], //                      where a task's answer may go (a reply target checked against the tasks, runs and org.toml, and the asking run's own places); Slack's and Discord's clients — listening and posting; where boxes run (BoxBackend: a box in roster's words)
  ["box", "gateway", "image", "rehearsal", "api", "fleet"], // a box of one run; the gateway; building the box image; the rehearsal model; the control API's declaration; the fleet's database (nodes, schema, shared folder)
  ["session"], //                            warm sessions (boxes in rpc mode)
  ["runner"], //                             the one way every surface starts a run (Runner), holding a run's services
  ["supervisor"], //                         the task queue's dispatch, adoption and reaper
  ["chatHub"], //                            the daemon's chat surfaces: a mapped channel's messages as turns of its worker's session
  ["daemon", "deployment", "web"], //        gateway + supervisor + control API + image pulls; making a deployment; the browser UI
  ["cli"], //                                the roster command
  ["(root)"] //                              src/bin.ts, src/index.ts, src/RosterLive.ts
]

// The gateway's own folders, ranked the same way within src/gateway (server.ts, at its root, is the top).
const GATEWAY = [
  ["secrets", "certs"], //                   sentinels and secret shapes, scrubbing; the CA and leaf certificates: no gateway knowledge
  ["base"], //                               its services (Audit, Dialer, LiveRuns), refusals, callers and taints, the ledger, request supervision
  ["policy"], //                             the one decision: a request as read, the compiled policy, the verdict (and roster policy check, which prints it)
  ["upstream"], //                           the way out: verified TLS, trust roots, keep-alive pools
  ["egress"], //                             the Gateway service, authorization and the checked dial, CONNECT tunnels, plain forwards
  ["metering", "actions"], //                model answers counted against budgets; the box's actions (remember, set_tasks, chat sends, …)
  ["inject"], //                             TLS termination, credential injection, OAuth refresh
  ["(gateway)"] //                           server.ts: the listeners
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
  ...GATEWAY.flat().map((from) => {
    const at = GATEWAY.findIndex((names) => names.includes(from))
    const above = GATEWAY.slice(at).flat().filter((to) => to !== from && to !== "(gateway)")
    const fromPath = from === "(gateway)" ? "^src/gateway/[^/]+\\.ts$" : `^src/gateway/${from}/`
    const toPaths = [...(above.length > 0 ? [`^src/gateway/(${above.join("|")})/`] : []), ...(from === "(gateway)" ? [] : ["^src/gateway/[^/]+\\.ts$"])]
    return {
      name: `gateway-${from.replace(/[()]/g, "")}`,
      severity: "error",
      comment: `gateway/${from} (rank ${at}) may not import a sibling or anything above it`,
      from: { path: fromPath },
      to: { path: toPaths.length > 0 ? toPaths.join("|") : "^$" }
    }
  }),
  {
    name: "no-unknown-gateway-folder",
    severity: "error",
    comment: "every folder of src/gateway/ has a place in GATEWAY (.dependency-cruiser.cjs)",
    from: { path: `^src/gateway/(?!(${GATEWAY.flat().filter((n) => n !== "(gateway)").join("|")})/)[^/]+/` },
    to: {}
  },
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
