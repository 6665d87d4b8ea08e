#!/usr/bin/env bash
# Makes this machine ready for roster's boxes, idempotently: a Docker engine that answers,
# iptables and iproute2 (lockdown and the tests' network namespaces), and a static busybox
# (the scripted engine image), debootstrap and gcc (the offline box image build), chromium (the web UI's
# browser tests), mitmproxy (the gateway bench's peer), runsc (gVisor: the boxes' runtime, registered
# with the engine), postgresql (the fleet's database: its tests start their own server in a temp folder), docker-registry (a registry on loopback for the image-pull test). Installs from Debian's packages when root; otherwise says what to run.
set -euo pipefail

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
# A C compiler: the offline box build compiles the box's statx shim (box/engine/statx-shim.c).
command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
# Debian's chromium: the browser the web UI's tests drive through playwright-core (no browser download).
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# Debian's mitmproxy: the peer the gateway's bench measures roster's grant path against.
command -v mitmdump >/dev/null 2>&1 || missing+=(mitmproxy)
# Debian's gVisor: boxes run under it ([box] runtime = "auto" takes it when the engine has it registered).
command -v runsc >/dev/null 2>&1 || missing+=(runsc)
# Debian's Postgres: a fleet's database ([cluster]); its tests run their own server as the postgres user.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
# Debian's docker-registry: a real registry on loopback, which the daemon's image-pull test pushes to.
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "roster needs: ${missing[*]} — install them: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "installing ${missing[*]} …" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq "${missing[@]}" >&2
fi

# runsc registered in daemon.json, what the file had kept (as roster doctor --fix does); true when it changed it.
register_runsc() {
  [ "$(id -u)" = 0 ] || return 1
  mkdir -p /etc/docker
  node -e '
    const fs = require("fs"), file = "/etc/docker/daemon.json", runsc = process.argv[1]
    let cfg = {}
    try { cfg = JSON.parse(fs.readFileSync(file, "utf8") || "{}") } catch (e) { if (e.code !== "ENOENT") throw e }
    const entry = { path: runsc, runtimeArgs: ["--network=host"] }
    if (JSON.stringify(cfg.runtimes?.runsc) === JSON.stringify(entry)) process.exit(1)
    cfg.runtimes = { ...(cfg.runtimes ?? {}), runsc: entry }
    fs.writeFileSync(file, JSON.stringify(cfg, null, 2) + "\n")
  ' "$(command -v runsc)"
}
register_runsc || true

engine_up() { [ -S /var/run/docker.sock ] && docker version >/dev/null 2>&1; }
if ! engine_up; then
  if [ "$(id -u)" != 0 ]; then
    echo "the Docker engine is not running — start it: sudo systemctl start docker (or sudo dockerd &)" >&2
    exit 1
  fi
  start_engine() {
    echo "starting dockerd (log: /var/log/roster-dockerd.log) …" >&2
    nohup dockerd > /var/log/roster-dockerd.log 2>&1 &
    local pid=$!
    for _ in $(seq 1 120); do
      engine_up && return 0
      kill -0 "$pid" 2>/dev/null || return 1
      sleep 0.5
    done
    return 1
  }
  # Docker 20.10 (Debian's) panics at start in libnetwork's reservePools when a network's deletion was cut short
  # (the machine stopped mid `docker network rm`): its network store keeps a network with no IPAM config
  # (moby/moby#45057, fixed upstream in 24.0). The store holds only network definitions — the engine rebuilds its
  # default ones — so it is moved aside (kept, named) and the engine started once more.
  if ! start_engine && grep -q 'reservePools' /var/log/roster-dockerd.log 2>/dev/null; then
    store=/var/lib/docker/network/files/local-kv.db
    if [ -f "$store" ]; then
      aside="$store.broken-$(date -u +%Y%m%dT%H%M%SZ)"
      echo "dockerd panicked restoring its networks (moby/moby#45057: a network deletion was interrupted);" \
        "moving its network store aside to $aside and starting it again" >&2
      pkill -f /var/run/docker/containerd/containerd.toml 2>/dev/null || true  # the panicked engine's own containerd
      mv "$store" "$aside"
      start_engine || true
    fi
  fi
  if ! engine_up; then
    echo "dockerd did not come up in 60 s; its log:" >&2
    tail -n 30 /var/log/roster-dockerd.log >&2 || true
    exit 1
  fi
fi
runsc_registered() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }
if ! runsc_registered; then
  echo "registering gVisor (runsc) with the engine: reloading dockerd …" >&2
  kill -HUP "$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd)"
  for _ in $(seq 1 50); do
    runsc_registered && break
    sleep 0.2
  done
fi
if ! runsc_registered; then
  echo "the engine has no runsc runtime: boxes would run under runc. Register it: sudo roster doctor --fix" >&2
  exit 1
fi
echo "docker engine: $(docker version --format '{{.Server.Version}}' 2>/dev/null)" >&2
