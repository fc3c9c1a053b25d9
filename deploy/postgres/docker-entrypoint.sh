#!/bin/bash
# The official postgres image's entrypoint contract, reduced to what a compose file uses:
# as root, fix PGDATA's owner and re-exec as postgres; on an empty PGDATA, initdb with
# POSTGRES_USER/POSTGRES_PASSWORD, create POSTGRES_DB, run /docker-entrypoint-initdb.d once
# against a server that listens on the Unix socket only, then start the real server.
set -Eeuo pipefail

file_env() { # VAR: VAR or the contents of VAR_FILE
  local var="$1" fvar="${1}_FILE" val=""
  if [[ -n "${!var:-}" && -n "${!fvar:-}" ]]; then
    echo >&2 "error: both $var and $fvar are set"; exit 1
  fi
  if [[ -n "${!var:-}" ]]; then val="${!var}"; elif [[ -n "${!fvar:-}" ]]; then val="$(<"${!fvar}")"; fi
  export "$var"="$val"
  unset "$fvar"
}

if [[ "${1:-}" != postgres ]]; then exec "$@"; fi

if [[ "$(id -u)" == 0 ]]; then
  mkdir -p "$PGDATA"
  chown postgres:postgres "$PGDATA"
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$BASH_SOURCE" "$@"
fi

file_env POSTGRES_PASSWORD
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
: "${POSTGRES_HOST_AUTH_METHOD:=scram-sha-256}"
export POSTGRES_USER POSTGRES_PASSWORD POSTGRES_DB

if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
  if [[ -z "$POSTGRES_PASSWORD" && "$POSTGRES_HOST_AUTH_METHOD" != trust ]]; then
    echo >&2 "error: the database is uninitialised and POSTGRES_PASSWORD is not set"
    exit 1
  fi
  # A failed first start leaves no half-made cluster behind: the next start begins again.
  trap 'pg_ctl -D "$PGDATA" -m immediate -w stop >/dev/null 2>&1; find "$PGDATA" -mindepth 1 -delete' ERR
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --username="$POSTGRES_USER" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host="$POSTGRES_HOST_AUTH_METHOD" >/dev/null
  rm -f "$pwfile"
  printf '\nhost all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD" >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p 5432" -w start >/dev/null
  export PGUSER="$POSTGRES_USER" PGPASSWORD="$POSTGRES_PASSWORD"
  psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER")
  if [[ "$POSTGRES_DB" != postgres ]]; then
    "${psql[@]}" --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";' >/dev/null
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh)
        if [[ -x "$f" ]]; then echo "running $f"; "$f"; else echo "sourcing $f"; . "$f"; fi ;;
      *.sql) echo "running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
      *) [[ -e "$f" ]] && echo "ignoring $f" ;;
    esac
  done
  unset PGPASSWORD
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  trap - ERR
  echo "PostgreSQL init process complete; ready for start up."
fi
exec "$@"
