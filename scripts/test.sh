#!/usr/bin/env bash
# The test command: make sure the engine is there (the integration suite talks to a real one),
# then run every test, unit and integration. Extra arguments go to vitest.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d node_modules ] || npm ci
node scripts/node-check.mjs
scripts/ensure-host.sh
exec npx vitest run --project unit --project integration "$@"
