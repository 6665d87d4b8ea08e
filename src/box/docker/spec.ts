import { parseSize } from "../../config/schema.js"
import type { ContainerSpec } from "../../docker/Docker.js"
import * as C from "../../contract/constants.js"
import { deploymentId } from "../../contract/deployment.js"
import { withPreflight } from "../preflight.js"
import { proxyUrl } from "../../contract/identity.js"
import { boxDir, knowledgeEnv, originDir } from "../../knowledge/Checkout.js"
import { type BoxPlan, containerName, type Engine } from "../../backend/plan.js"

/** The pi command line: the baked wrapper, or node + the checkout's entry with roster's extensions only. */
export const piCommand = (engine: Engine, mode: "json" | "rpc"): Array<string> =>
  engine.kind === "baked"
    ? [C.BAKED_RUN_PI, "--mode", mode]
    : ["node", engine.entry, "--mode", mode, "--no-extensions", ...engine.extensions.flatMap((e) => ["-e", e])]

const binds = (plan: BoxPlan): Array<string> => {
  const d = plan.dirs
  const out = [
    // The home first, then what nests inside it (the reading order matches the mount order).
    `${d.pihome}:${C.PIHOME}`,
    `${d.store}:${C.STORE}`,
    `${d.inbox}:${C.INBOX}:ro`
  ]
  for (const m of plan.mounts) {
    const target = `${C.MNT}/${m.name}`
    if (m.kind === "dir") out.push(`${m.path}:${target}${m.rw ? "" : ":ro"}`)
    // A gated repo is never bound raw: only its per-run clone (below) is.
    else if (!m.gated) out.push(`${m.path}:${target}:ro`)
  }
  // The canonical repo is read-only: a ref write from the box is a filesystem error.
  for (const c of plan.checkouts) out.push(`${c.clone}:${boxDir(c.connection)}${c.mode === "rw" ? "" : ":ro"}`, `${c.canonical}:${originDir(c.connection)}:ro`)
  // The store's mountpoint sits inside the read-only channel folder: it exists there already (docker cannot make it through a ro bind).
  if (plan.channel) out.push(`${plan.channel.dir}:${C.CHANNEL}:ro`, `${plan.channel.store}:${C.CHANNEL}/store`)
  out.push(`${d.selfView}:${C.SELF}:ro`, `${d.workerConfig}:${C.SELF}/config:ro`, `${d.workerRuns}:${C.SELF}/runs:ro`)
  // A tainted run's folder is not shown to the worker's other runs: an empty folder over each.
  for (const id of d.hiddenRuns) out.push(`${d.emptyDir}:${C.SELF}/runs/${id}:ro`)
  if (d.journal) out.push(`${d.journal}:${C.SELF}/journal/journal.jsonl:ro`)
  out.push(`${d.tasksView}:${C.TASKS_FILE}:ro`, `${d.ca}:${C.BOX_CA}:ro`, `${d.caBundle}:${C.BOX_CA_BUNDLE}:ro`)
  if (plan.engine.kind === "mounted") out.push(`${plan.engine.hostDir}:${C.MOUNTED_ENGINE}:ro`)
  return out
}

const environment = (plan: BoxPlan): Array<string> => {
  const proxy = proxyUrl(plan.token, plan.gatewayPort)
  const env = [
    `HOME=${C.PIHOME}`,
    `PI_CODING_AGENT_DIR=${C.AGENT_DIR}`,
    `ROSTER_RUN_ID=${plan.runId}`,
    // For the preflight: where the gateway is, and which deployment it must answer for (an id, never the host path).
    `ROSTER_GATEWAY=host.docker.internal:${plan.gatewayPort}`,
    `ROSTER_DEPLOYMENT_ID=${deploymentId(plan.deployment)}`,
    `ROSTER_PREFLIGHT_PROBE=${plan.preflightProbe ?? plan.policy.preflight_probe ?? "203.0.113.1:443"}`,
    `ROSTER_TASKS_FILE=${C.TASKS_FILE}`,
    `ROSTER_STORE_DIR=${C.STORE}`,
    `ROSTER_SELF_DIR=${C.SELF}`,
    ...(plan.channel ? [`ROSTER_CHANNEL_DIR=${C.CHANNEL}`] : []),
    ...knowledgeEnv(plan.checkouts),
    "TMPDIR=/tmp",
    "PI_OFFLINE=1",
    "PI_SKIP_VERSION_CHECK=1",
    "PI_TELEMETRY=0"
  ]
  if (plan.ceilingMin !== null) env.push(`ROSTER_CEILING_MIN=${plan.ceilingMin}`)
  if (plan.taskId) env.push(`ROSTER_TASK_ID=${plan.taskId}`)
  if (plan.chatSend) env.push(`ROSTER_CHAT_SEND=${plan.chatSend}`)
  if (plan.termSend) env.push("ROSTER_TERM_SEND=1")
  for (const name of plan.exposedEnv) env.push(`${name}=${C.SENTINEL}`)
  // A host ANTHROPIC_API_KEY is a credential the gateway injects; the box only ever sees the sentinel.
  if (plan.anthropicEnvKey) env.push(`ANTHROPIC_API_KEY=${C.SENTINEL}`)
  for (const k of ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]) env.push(`${k}=${proxy}`)
  // Node's own fetch and http use the proxy variables only when asked: programs the worker writes reach out like pi does.
  env.push("NO_PROXY=", "no_proxy=", "NODE_USE_ENV_PROXY=1")
  // git's libcurl waits for a 407 challenge before sending proxy credentials; preemptive Basic
  // puts the run token on every CONNECT so git runs as the worker, not as an anonymous caller.
  env.push("GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.proxyAuthMethod", "GIT_CONFIG_VALUE_0=basic")
  // Node's warning that its env-proxy agent is experimental would open every box's stderr.
  env.push("NODE_OPTIONS=--disable-warning=UNDICI-EHPA")
  // NODE_EXTRA_CA_CERTS adds to Node's roots; the others replace their tool's roots, so they get
  // the combined bundle (system roots + roster CA).
  env.push(`NODE_EXTRA_CA_CERTS=${C.BOX_CA}`)
  for (const k of ["SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT"]) {
    env.push(`${k}=${C.BOX_CA_BUNDLE}`)
  }
  return env
}

/** The full create body of one box: hardening, labels, mounts, environment and the pi command. */
export const containerSpec = (plan: BoxPlan): ContainerSpec => {
  const p = plan.policy
  const memory = p.memory ? parseSize(p.memory) : undefined
  const cpus = p.cpus ? Number(p.cpus) : plan.hostCpus / 2
  return {
    name: containerName(plan.runId),
    Image: plan.image,
    Cmd: withPreflight([...piCommand(plan.engine, plan.mode), "--session-dir", C.SESSION, ...plan.piArgs]),
    Env: environment(plan),
    Labels: {
      [C.LABEL_RUN_ID]: plan.runId,
      [C.LABEL_WORKER]: plan.worker,
      [C.LABEL_KIND]: plan.kind,
      [C.LABEL_DEPLOYMENT]: plan.deployment,
      [C.LABEL_DEADLINE]: String(plan.deadline),
      [C.LABEL_OWNER_PID]: String(plan.owner.pid),
      [C.LABEL_OWNER_START]: plan.owner.start,
      ...(plan.taskId ? { [C.LABEL_TASK_ID]: plan.taskId } : {})
    },
    User: `${plan.user.uid}:${plan.user.gid}`,
    WorkingDir: C.WORKSPACE,
    // json mode reads stdin to EOF before it starts: a one-shot box gets no stdin at all.
    OpenStdin: plan.mode === "rpc",
    StdinOnce: plan.mode === "rpc",
    AttachStdin: plan.mode === "rpc",
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    HostConfig: {
      AutoRemove: true,
      // gVisor's runsc (registered with --network=host) runs in the namespace Docker made for the
      // box, so the internal network and the host pinning hold under either runtime.
      Runtime: plan.runtime,
      NetworkMode: plan.network,
      ExtraHosts: [`host.docker.internal:${plan.gatewayAddress}`],
      // Proxied clients hand host names to CONNECT, so the box needs no DNS; a dead resolver
      // closes the exfiltration path Docker's embedded one would leave open.
      Dns: ["127.0.0.1"],
      CapDrop: ["ALL"],
      SecurityOpt: ["no-new-privileges"],
      ...(p.pids_limit > 0 ? { PidsLimit: p.pids_limit } : {}),
      ...(memory !== undefined && Number.isFinite(memory) && memory > 0 ? { Memory: memory } : {}),
      ...(cpus !== undefined && Number.isFinite(cpus) ? { NanoCpus: Math.round(cpus * 1e9) } : {}),
      Tmpfs: { "/tmp": `rw,nosuid,nodev,size=${parseSize(p.tmp_size)},mode=1777` },
      Binds: binds(plan)
    }
  }
}
