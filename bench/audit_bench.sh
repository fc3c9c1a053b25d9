#!/usr/bin/env bash
# Audit trail benchmark, run by hand (not part of scripts/test):
#   bench/audit_bench.sh [RECORDS] [APPENDS]     (defaults 1000000 and 2000; as root)
# Creates its own throwaway PostgreSQL cluster (scripts/lib.sh), seeds RECORDS audit records
# with a valid hash chain and signed checkpoints (bench/audit_seed.c, linked against tccore:
# the same canonical form and chain hash as the server), starts `toolcage serve` on it and
# measures, through the real HTTP API:
#   - p50/p95 of typical filtered queries as a tenant's auditor (target p95 <= 50 ms), with
#     EXPLAIN ANALYZE of every query that misses;
#   - GET /v1/audit/verify over the whole chain;
# and the cost of one tc_audit_append against a plain INSERT of the same record into a table
# with the same columns and indexes but no chain (baseline measured in the same run).
# Removes the cluster on exit.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

RECORDS="${1:-1000000}"
APPENDS="${2:-2000}"
QUERIES="${AUDIT_BENCH_QUERIES:-200}"

ensure_deps runtime
# A tree of its own (optimised, warnings not fatal): a run never disturbs build/ of scripts/test.
build_tree build-bench -DTOOLCAGE_WERROR=OFF >/dev/null
BIN="$ROOT/build-bench/toolcage"
SEED="$ROOT/build-bench/bench/audit_seed"
[[ -x "$SEED" ]] || die "build-bench/bench/audit_seed was not built (bench/CMakeLists.txt)"

WORK="$(mktemp -d /tmp/toolcage-auditbench.XXXXXX)"
PG="$WORK/pg"
SERVER_PID=""
# shellcheck disable=SC2317 # invoked by trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  pg_stop "$PG"
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

chmod 0755 "$WORK"
pg_init "$PG" test || true
pg_start "$PG"
pg_setup_roles "$PG"
pg_export_urls "$PG" toolcage
ensure_master_key "$WORK/master.key"
export TOOLCAGE_STATE_DIR="$WORK/state" TOOLCAGE_POLICY="$ROOT/examples/policy.json" TOOLCAGE_LOG_LEVEL=warn

"$BIN" migrate >/dev/null
KEY="$("$BIN" keys create --tenant bench-a --role auditor | tail -n1)"
TENANT_ID="$(pg_psql "$PG" -d toolcage -tAc "SELECT id FROM tenants WHERE name = 'bench-a'")"

log "seeding $RECORDS audit records (tenant bench-a is 1 in 20)"
"$SEED" seed "$TOOLCAGE_MIGRATE_DATABASE_URL" "$TOOLCAGE_MASTER_KEY_FILE" "$RECORDS" "$TENANT_ID"
pg_psql "$PG" -d toolcage -c "VACUUM ANALYZE audit_log" >/dev/null
echo "audit_log: $(pg_psql "$PG" -d toolcage -tAc "SELECT pg_size_pretty(pg_total_relation_size('audit_log'))") with indexes;" \
  "tenant bench-a has $(pg_psql "$PG" -d toolcage -tAc "SELECT count(*) FROM audit_log WHERE tenant_id = '$TENANT_ID'") records"

log "append cost ($APPENDS each)"
"$SEED" append "$TOOLCAGE_MIGRATE_DATABASE_URL" "$TOOLCAGE_MASTER_KEY_FILE" "$APPENDS" "$TENANT_ID"

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
TOOLCAGE_LISTEN="127.0.0.1:$PORT" "$BIN" serve >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 300); do
  curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null || { tail -n 30 "$WORK/server.log"; die "server did not start"; }

log "query latency through the HTTP API ($QUERIES requests each, one client, keep-alive)"
OUT="$(node "$ROOT/bench/audit_http.mjs" "http://127.0.0.1:$PORT" "$KEY" "$QUERIES")"
grep -v '^RESULT ' <<<"$OUT"

# EXPLAIN ANALYZE the SQL the server runs for each query that missed the target.
MISSES="$(grep '^RESULT ' <<<"$OUT" | sed 's/^RESULT //' | node -e '
  let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    for (const r of JSON.parse(s)) if (r.p95 > 50) console.log(r.path);
  });')"
if [[ -n "$MISSES" ]]; then
  while IFS= read -r path; do
    sql="$(node -e '
      const [path, tenant] = process.argv.slice(1);
      const u = new URL(path, "http://x");
      const w = [`tenant_id = ${lit(tenant)}`];
      function lit(s) { return "'"'"'" + s.replaceAll("'"'"'", "'"'"''"'"'") + "'"'"'"; }
      for (const k of ["actor", "tool", "action", "status"]) if (u.searchParams.has(k)) w.push(`${k} = ${lit(u.searchParams.get(k))}`);
      const ms = (t) => (t.length === 20 ? t.slice(0, 19) + ".000Z" : t);
      if (u.searchParams.has("since")) w.push(`ts >= ${lit(ms(u.searchParams.get("since")))}`);
      if (u.searchParams.has("until")) w.push(`ts < ${lit(ms(u.searchParams.get("until")))}`);
      if (u.searchParams.has("q")) w.push(`search ILIKE ${lit("%" + u.searchParams.get("q").replace(/[%_\\]/g, "\\$&") + "%")}`);
      w.push(`seq < ${u.searchParams.get("cursor") ?? "9223372036854775807"}`);
      console.log(`EXPLAIN (ANALYZE, BUFFERS) SELECT seq, record::text, hash FROM audit_log WHERE ${w.join(" AND ")} ORDER BY seq DESC LIMIT 101`);
    ' "$path" "$TENANT_ID")"
    echo
    echo "--- $path misses the target; the plan of the server's query:"
    pg_psql "$PG" -d toolcage -c "$sql"
  done <<<"$MISSES"
fi

log "GET /v1/audit/verify over the whole chain"
VSTART=$(date +%s.%N)
VERDICT="$(curl -fsS -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/audit/verify")"
VEND=$(date +%s.%N)
echo "verify: $VERDICT"
python3 -c "import sys; t=float(sys.argv[2])-float(sys.argv[1]); n=int(sys.argv[3]); print(f'verify: {t:.2f} s for {n} records ({n/t/1000:.0f}k records/s)')" \
  "$VSTART" "$VEND" "$(( RECORDS + APPENDS ))"
grep -q '"ok": *true' <<<"$VERDICT" || die "the seeded chain does not verify"
