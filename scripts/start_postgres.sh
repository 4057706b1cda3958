#!/usr/bin/env bash
# PostgreSQL 15 for studies shared by several workers (and for the multi-worker test suites).
#
#   scripts/start_postgres.sh --install      install the server binaries if missing (apt, root)
#   scripts/start_postgres.sh DIR [PORT]     also start a throwaway cluster in DIR on 127.0.0.1
#                                            (trust auth, user postgres) and print its URL;
#                                            stop it with: runuser -u postgres -- \
#                                              /usr/lib/postgresql/15/bin/pg_ctl -D DIR/data -m fast stop
#
# The test fixture (tests/e2e/conftest.py) starts its own cluster and needs only --install.
set -euo pipefail
BIN=/usr/lib/postgresql/15/bin

if [ ! -x "$BIN/initdb" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "PostgreSQL 15 is not installed in $BIN and installing it needs root" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
fi
[ "${1:-}" = "--install" ] && exit 0

DIR=${1:?usage: $0 --install | DIR [PORT]}
PORT=${2:-5433}
mkdir -p "$DIR/data"
chown -R postgres:postgres "$DIR"
if [ ! -f "$DIR/data/PG_VERSION" ]; then
  runuser -u postgres -- "$BIN/initdb" -D "$DIR/data" -A trust -U postgres >/dev/null
fi
runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w \
  -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1" start >/dev/null
echo "postgresql://postgres@127.0.0.1:$PORT/postgres"
