#!/usr/bin/env bash
# A warm session's call against a cold interpreter: `print(1)` in an open python session
# (POST /v1/sessions/{id}/execute, end to end over HTTP) against bare `python3 -c pass`
# started on this host, alternated in the same run (bench/session_bench.mjs, through
# bench/node_bench.sh). Target (issue 21): ratio <= 0.3.
#   bench/session_bench.sh [N]      N runs of each (default 40)
# TOOLCAGE_BENCH_ENFORCE=1 exits 1 when the median ratio misses the target.
exec "$(dirname "${BASH_SOURCE[0]}")/node_bench.sh" bench/session_bench.mjs "$@"
