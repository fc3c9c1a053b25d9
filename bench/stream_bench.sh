#!/usr/bin/env bash
# Streaming latency: a sandboxed print() -> its stdout event at the client, against a bare
# python3 pipe measured in the same run (bench/stream_bench.mjs, through bench/node_bench.sh).
#   bench/stream_bench.sh [N]      N runs (default 20)
# TOOLCAGE_BENCH_ENFORCE=1 exits 1 when the median misses the 50 ms target.
exec "$(dirname "${BASH_SOURCE[0]}")/node_bench.sh" bench/stream_bench.mjs "$@"
