#!/bin/bash
# First start of the compose deployment's PostgreSQL (docker-compose.yml mounts this into
# /docker-entrypoint-initdb.d/): the schema owner (migrations), the runtime role the server
# connects as, and the database. Runs once, on an empty data volume.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" --dbname postgres \
  --set owner_pw="$TOOLCAGE_DB_OWNER_PASSWORD" --set app_pw="$TOOLCAGE_DB_APP_PASSWORD" <<'SQL'
CREATE ROLE toolcage_owner LOGIN PASSWORD :'owner_pw';
CREATE ROLE toolcage_app LOGIN PASSWORD :'app_pw';
CREATE DATABASE toolcage OWNER toolcage_owner;
SQL
