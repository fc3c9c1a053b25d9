# shellcheck shell=bash
# Shared functions for scripts/run and scripts/test. Source it after `set -euo pipefail`;
# it sets ROOT to the repository root and cds there.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1

PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"

log() { printf '==> %s (at %d s)\n' "$*" "$SECONDS" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------
# Dependencies

RUNTIME_PACKAGES=(build-essential cmake pkg-config libmicrohttpd-dev libjansson-dev
  libseccomp-dev libsodium-dev libpcre2-dev libpq-dev libcurl4-openssl-dev libssl-dev libarchive-dev liblzma-dev postgresql-15 curl ca-certificates
  runsc
  # toolcage-init, the sandbox's PID 1, against musl (sandbox/init/CMakeLists.txt)
  musl-tools)
# nodejs/npm are checked as commands, not packages: a machine may have Node from
# another source (whose nodejs package conflicts with Debian's npm package).
TEST_PACKAGES=(chromium clang clang-format libclang-rt-14-dev python3 python3-venv
  # tests/integration/plots.test.mjs: figures drawn with matplotlib
  python3-matplotlib
  # tests/deploy/install.test.mjs: which launcher binary was exec'd
  strace
  # scripts/test-cgroup2: a cgroup v2 kernel under qemu
  qemu-system-x86 linux-image-amd64 busybox-static cpio
  # scripts/test-compose: docker-compose.yml with podman (rootful, runc) and images from Debian
  podman podman-compose runc netavark aardvark-dns iptables catatonit debootstrap
  # tests/integration/images-pull.test.mjs: a local registry (the CNCF distribution server)
  docker-registry
  # tests/deploy: systemd-analyze verify
  systemd)

pkg_installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

# ensure_deps [runtime|test]: apt-get install whatever is missing (nothing if all present).
ensure_deps() {
  local want=("${RUNTIME_PACKAGES[@]}") missing=() p
  if [[ "${1:-runtime}" == test ]]; then
    want+=("${TEST_PACKAGES[@]}")
    command -v node >/dev/null 2>&1 || want+=(nodejs)
    command -v npm >/dev/null 2>&1 || want+=(npm)
  fi
  for p in "${want[@]}"; do
    pkg_installed "$p" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  [[ $(id -u) -eq 0 ]] || die "missing packages (${missing[*]}); run as root or install them"
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian's postgresql-common creates and starts a system cluster on port 5432. We use
  # private clusters only; leave the system one alone.
}

# ---------------------------------------------------------------------------
# Build

# build_tree DIR [extra cmake args...]
build_tree() {
  local dir="$1"; shift
  local args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  [[ "${CI:-}" == true || "${TOOLCAGE_WERROR:-}" == ON ]] && args+=(-DTOOLCAGE_WERROR=ON)
  log "configuring $dir"
  cmake -S . -B "$dir" "${args[@]}" "$@" >/dev/null || return 1
  log "building $dir"
  cmake --build "$dir" -j"$(nproc)" || return 1
}

# ---------------------------------------------------------------------------
# PostgreSQL: a private cluster, reachable only through a Unix socket in a directory
# of mode 0700 owned by postgres. Only postgres and root can connect through it, which
# is why local trust authentication is acceptable here: nobody else can reach the socket.
# TCP is off (listen_addresses='') and host auth rejects anyway.

as_postgres() { runuser -u postgres -- "$@"; }

# pg_psql BASEDIR [psql args...]: run psql as the superuser over the socket.
pg_psql() {
  local base="$1"; shift
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$base/socket" -U postgres -d postgres "$@"
}

pg_running() {
  as_postgres "$PG_BIN/pg_ctl" -D "$1/data" status >/dev/null 2>&1
}

# pg_init BASEDIR [test]: create a cluster under BASEDIR (data/, socket/, log) if absent.
# Returns 0 if it created one, 1 if one was already there.
pg_init() {
  local base="$1" kind="${2:-persistent}"
  id postgres >/dev/null 2>&1 || die "no 'postgres' system user (is postgresql-15 installed?)"
  mkdir -p "$base"
  chown postgres:postgres "$base"
  chmod 0700 "$base"
  # postgres must be able to reach the directory (every parent traversable).
  as_postgres test -x "$base" \
    || die "$base is not reachable by the postgres user (a parent directory is not o+x)"
  if [[ -f "$base/data/PG_VERSION" ]]; then
    return 1
  fi
  log "creating PostgreSQL cluster in $base"
  rm -rf "$base/data" "$base/socket"
  as_postgres mkdir -m 0700 "$base/socket"
  as_postgres "$PG_BIN/initdb" -D "$base/data" --auth-local=trust --auth-host=reject \
    -U postgres -E UTF8 --locale=C.UTF-8 >"$base/initdb.log" 2>&1 \
    || { cat "$base/initdb.log" >&2; die "initdb failed"; }
  {
    echo ""
    echo "# toolcage private cluster (scripts/lib.sh)"
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$base/socket'"
    echo "max_connections = 100"
    if [[ "$kind" == test ]]; then
      # Throwaway cluster: durability buys nothing here.
      echo "fsync = off"
      echo "synchronous_commit = off"
      echo "full_page_writes = off"
    fi
  } >>"$base/data/postgresql.conf"
  return 0
}

pg_start() {
  local base="$1"
  pg_running "$base" && return 0
  log "starting PostgreSQL ($base)"
  as_postgres "$PG_BIN/pg_ctl" -D "$base/data" -l "$base/postgresql.log" -w -t 60 start >/dev/null \
    || { tail -n 30 "$base/postgresql.log" >&2 || true; die "pg_ctl start failed"; }
}

pg_stop() {
  local base="$1"
  [[ -d "$base/data" ]] || return 0
  pg_running "$base" || return 0
  log "stopping PostgreSQL ($base)"
  as_postgres "$PG_BIN/pg_ctl" -D "$base/data" -m fast -w -t 60 stop >/dev/null || true
}

# pg_setup_roles BASEDIR: roles toolcage_owner (owns the database, runs migrations) and
# toolcage_app (the server's runtime role); database toolcage. Idempotent.
pg_setup_roles() {
  local base="$1"
  pg_psql "$base" <<'SQL'
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'toolcage_owner') THEN
    CREATE ROLE toolcage_owner LOGIN;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'toolcage_app') THEN
    CREATE ROLE toolcage_app LOGIN;
  END IF;
END
$$;
SQL
  pg_createdb "$base" toolcage
}

# pg_createdb BASEDIR NAME: database NAME owned by toolcage_owner, if absent.
pg_createdb() {
  local base="$1" name="$2"
  if [[ -z "$(pg_psql "$base" -tAc "SELECT 1 FROM pg_database WHERE datname = '$name'")" ]]; then
    pg_psql "$base" -c "CREATE DATABASE \"$name\" OWNER toolcage_owner"
  fi
}

pg_dropdb() {
  pg_psql "$1" -c "DROP DATABASE IF EXISTS \"$2\" WITH (FORCE)"
}

# pg_export_urls BASEDIR [DBNAME]
pg_export_urls() {
  local base db="${2:-toolcage}"
  base="$(cd "$1" && pwd)" # libpq takes a relative host for a host name
  export TOOLCAGE_DATABASE_URL="host=$base/socket dbname=$db user=toolcage_app"
  export TOOLCAGE_MIGRATE_DATABASE_URL="host=$base/socket dbname=$db user=toolcage_owner"
}

# ---------------------------------------------------------------------------
# Secrets

# ensure_master_key FILE: 32 random bytes, mode 0600, created once.
ensure_master_key() {
  local f="$1"
  if [[ ! -s "$f" ]]; then
    log "creating master key $f"
    (umask 077 && head -c 32 /dev/urandom >"$f.tmp" && mv "$f.tmp" "$f")
  fi
  chmod 0600 "$f"
  export TOOLCAGE_MASTER_KEY_FILE="$f"
}
