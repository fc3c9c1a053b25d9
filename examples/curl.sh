#!/usr/bin/env bash
# The approval loop with curl. Needs the keys scripts/run printed:
#   source var/demo-keys.env; examples/curl.sh
set -euo pipefail
URL=${TOOLCAGE_URL:-http://127.0.0.1:8080}
AGENT="Authorization: Bearer $TOOLCAGE_DEMO_AGENT_KEY"
REVIEWER="Authorization: Bearer $TOOLCAGE_DEMO_REVIEWER_KEY"

echo "== run a snippet"
curl -s -H "$AGENT" -d '{"tool":"python","code":"print(6*7)"}' "$URL/v1/execute"; echo

echo "== ask for an irreversible call: it is held (202)"
held=$(curl -s -H "$AGENT" -d '{"tool":"deploy","code":"echo deploying"}' "$URL/v1/execute")
echo "$held"
id=$(printf '%s' "$held" | sed -E 's/.*"id":"([^"]+)".*/\1/')
approval=$(printf '%s' "$held" | sed -E 's/.*"approval_id":"([^"]+)".*/\1/')

echo "== a reviewer approves it"
curl -s -H "$REVIEWER" -d '{"reason":"looks right"}' "$URL/v1/approvals/$approval/approve"; echo

echo "== the agent learns the outcome (long-poll)"
curl -s -H "$AGENT" "$URL/v1/executions/$id?wait=30"; echo
