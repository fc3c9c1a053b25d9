#!/usr/bin/env bash
# The whole path against a bare process and its peers, side by side in one run
# (bench/e2e.mjs; issue 16). Installs bubblewrap and firejail if missing. Starts a throwaway PostgreSQL
# cluster and one `toolcage serve`; needs root like scripts/test.
#   bench/e2e.sh [N]      N runs per measurement (default 30); TOOLCAGE_BENCH_SECONDS (10) for the concurrent ones
# TOOLCAGE_BIN selects the binary (default build/toolcage, built if missing);
# Prints ratios; enforces nothing (machines are noisy).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

BIN="${TOOLCAGE_BIN:-build/toolcage}"
[[ -x "$BIN" ]] || build_tree build >&2
for p in bubblewrap firejail; do
  pkg_installed "$p" || { [[ $(id -u) -eq 0 ]] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null; } || true
done
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
pg_createdb "$PG" toolcage_e2e >/dev/null
pg_export_urls "$PG" toolcage_e2e
TOOLCAGE_BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")" TOOLCAGE_IT_LABEL=bench \
  TOOLCAGE_LOG_LEVEL="${TOOLCAGE_LOG_LEVEL:-info}" node bench/e2e.mjs "$@"
