#!/bin/sh
# The compose deployment's one-shot set-up (docker-compose.yml, service "setup"), run as the
# unprivileged user toolcage on every `up`, before the server starts:
#   1. the master key, created once in the keys volume (mode 0600, never printed);
#   2. the database migrations, as the schema owner (retried while PostgreSQL starts);
#   3. once per database: a demo console user (admin) and one API key per role for the
#      tenant "demo", printed here, once. `docker compose logs setup` shows them again.
# Then it marks the keys volume ready; the server waits for that mark.
set -eu
KEYS=/var/lib/toolcage/keys
rm -f "$KEYS/ready"
if [ ! -s "$KEYS/master.key" ]; then
  (umask 077 && head -c 32 /dev/urandom >"$KEYS/master.key.tmp" && mv "$KEYS/master.key.tmp" "$KEYS/master.key")
  echo "setup: created the master key in the keys volume"
fi

tries=0
until toolcage migrate; do
  tries=$((tries + 1))
  if [ "$tries" -ge 60 ]; then
    echo "setup: the database did not accept the migrations; giving up" >&2
    exit 1
  fi
  sleep 2
done

pw="$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')"
if out="$(printf '%s\n' "$pw" | toolcage users add --name demo --role admin --tenant demo 2>&1)"; then
  agent="$(toolcage keys create --tenant demo --role agent | tail -n1)"
  reviewer="$(toolcage keys create --tenant demo --role reviewer | tail -n1)"
  auditor="$(toolcage keys create --tenant demo --role auditor | tail -n1)"
  admin="$(toolcage keys create --tenant demo --role admin | tail -n1)"
  cat <<INFO

toolcage demo (tenant "demo"); shown once, keep them:
  console   http://localhost:8080/console  user demo  password $pw
  agent     $agent
  reviewer  $reviewer
  auditor   $auditor
  admin     $admin

Try it:
  curl -s -H 'Authorization: Bearer $agent' \\
    -d '{"tool":"python","code":"print(6*7)"}' localhost:8080/v1/execute

INFO
elif printf '%s' "$out" | grep -q 'exists'; then
  echo "setup: the demo user and keys exist (they were shown at the first start)"
else
  printf '%s\n' "$out" >&2
  exit 1
fi
touch "$KEYS/ready"
echo "setup: done"
