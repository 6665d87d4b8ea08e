import Dockerode from "dockerode"
import { Effect } from "effect"
import * as crypto from "node:crypto"
import { afterAll, describe, expect, it } from "vitest"
import { makeDockerApi } from "../../src/docker/DockerLive.js"
import { TEST_IMAGE } from "../support/deployment.js"

const docker = new Dockerode()
/** This file's containers alone (another suite on the same engine keeps its own). */
const label = `roster.engine-test=${crypto.randomBytes(4).toString("hex")}`
const mine = () => docker.listContainers({ all: true, filters: { label: [label] } })

describe("the engine's containers as roster calls them (DockerLive, a real engine)", () => {
  const api = makeDockerApi(async () => docker)

  afterAll(async () => {
    for (const c of await mine()) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {})
  })

  it("a removal returns once the container is gone, though the engine was removing it already (an AutoRemove box just killed)", async () => {
    const [key, value] = label.split("=") as [string, string]
    for (let i = 0; i < 5; i++) {
      const c = await docker.createContainer({
        Image: TEST_IMAGE, Entrypoint: ["/bin/sh", "-c", "sleep 1000"], Labels: { [key]: value }, HostConfig: { AutoRemove: true }
      })
      await c.start()
      // The kill starts the engine's own removal; roster's remove then finds it under way (409) or done.
      await Effect.runPromise(api.containerKill(c.id).pipe(Effect.zipRight(api.containerRemove(c.id))))
      expect(await mine()).toEqual([])
    }
  })

  it("a removal of a container already gone is not an error", async () => {
    await expect(Effect.runPromise(api.containerRemove("roster-no-such-container-" + crypto.randomBytes(4).toString("hex")))).resolves.toBeUndefined()
  })
})
