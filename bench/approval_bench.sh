#!/usr/bin/env bash
# Approval gate latency, decision -> execution start, against a plain-execute baseline
# measured in the same run (bench/approval_bench.mjs, through bench/node_bench.sh).
#   bench/approval_bench.sh [N]      N decisions (default 50)
# TOOLCAGE_BENCH_ENFORCE=1 exits 1 when the median misses the 50 ms target.
exec "$(dirname "${BASH_SOURCE[0]}")/node_bench.sh" bench/approval_bench.mjs "$@"
