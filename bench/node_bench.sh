#!/usr/bin/env bash
# bench/node_bench.sh SCRIPT.mjs [ARGS...]: runs one of the benches written in node
# (approval_bench, stream_bench, e2e) against a throwaway PostgreSQL cluster of its own; the
# script starts its `toolcage serve` (tests/integration/harness.mjs). Needs root like
# scripts/test. TOOLCAGE_BIN selects the binary (default build/toolcage, built if missing).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

SCRIPT="$1"
shift
BIN="${TOOLCAGE_BIN:-build/toolcage}"
[[ -x "$BIN" ]] || build_tree build >&2
[[ -d tests/node_modules ]] || npm ci --prefix tests --no-audit --no-fund --loglevel=error >/dev/null

PG="$(mktemp -d /tmp/toolcage-bench-pg.XXXXXX)"
# shellcheck disable=SC2317 # invoked by trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  pg_stop "$PG" 2>/dev/null
  rm -rf "$PG"
  exit "$rc"
}
trap cleanup EXIT
pg_init "$PG" test >/dev/null 2>&1 || true
pg_start "$PG" 2>/dev/null
pg_setup_roles "$PG" >/dev/null
pg_createdb "$PG" toolcage_bench >/dev/null
pg_export_urls "$PG" toolcage_bench
TOOLCAGE_BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")" TOOLCAGE_IT_LABEL=bench \
  TOOLCAGE_LOG_LEVEL="${TOOLCAGE_LOG_LEVEL:-info}" node "$SCRIPT" "$@"
