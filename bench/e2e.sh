#!/usr/bin/env bash
# The whole path against a bare process and its peers, side by side in one run (issue 16;
# bench/e2e.mjs, through bench/node_bench.sh). Installs bubblewrap and firejail if missing.
#   bench/e2e.sh [N]      N runs per measurement (default 30); TOOLCAGE_BENCH_SECONDS (10) for
#                         the concurrent ones
# Prints ratios; enforces nothing (machines are noisy).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
for p in bubblewrap firejail; do
  pkg_installed "$p" || { [[ $(id -u) -eq 0 ]] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null; } || true
done
exec "$(dirname "${BASH_SOURCE[0]}")/node_bench.sh" bench/e2e.mjs "$@"
