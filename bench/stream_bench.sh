#!/usr/bin/env bash
# Streaming latency: a sandboxed print() -> its stdout event at the client, against a bare
# python3 pipe measured in the same run (bench/stream_bench.mjs). Starts a throwaway PostgreSQL
# cluster and one `toolcage serve`; needs root like scripts/test.
#   bench/stream_bench.sh [N]      N runs (default 20)
# TOOLCAGE_BIN selects the binary (default build/toolcage, built if missing);
# TOOLCAGE_BENCH_ENFORCE=1 exits 1 when the median misses the 50 ms target.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

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
  TOOLCAGE_LOG_LEVEL="${TOOLCAGE_LOG_LEVEL:-info}" node bench/stream_bench.mjs "$@"
