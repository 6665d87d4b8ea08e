import type Dockerode from "dockerode"

/**
 * The run id of the warm box the engine runs for `worker` of the deployment whose config folder is
 * `config`, looked for until `ms` have passed (once, with 0); "" when there is none by then.
 */
export const warmBoxOf = async (docker: Dockerode, config: string, worker: string, ms = 30_000): Promise<string> => {
  const by = Date.now() + ms
  for (;;) {
    const [c] = await docker.listContainers({ filters: { label: [`roster.deployment=${config}`, "roster.kind=warm", `roster.worker=${worker}`] } })
    if (c) return c.Labels["roster.run-id"] ?? ""
    if (Date.now() >= by) return ""
    await new Promise((r) => setTimeout(r, 200))
  }
}
