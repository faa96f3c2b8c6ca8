#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the metadata-in-PostgreSQL work (#30): Debian's PostgreSQL,
# one cluster under $COFFER_PG_DIR (default /tmp/coffer-pg) owned by the `postgres` user (the server
# refuses to run as root: as root it is run through runuser), TCP on 127.0.0.1 only, on a free port
# chosen at the cluster's creation and kept, a `coffer` role (password auth, CREATEDB so that tests
# can make databases) owning a `coffer` database.
#
#   scripts/pg-fixture.sh start    start (installing the packages when missing); prints the env
#   scripts/pg-fixture.sh env      prints COFFER_DATABASE_URL of the running fixture
#   scripts/pg-fixture.sh status   exit 0 and "running" when the server answers, else exit 3
#   scripts/pg-fixture.sh stop     stops the server (state kept: the next start is warm)
#   scripts/pg-fixture.sh stop --purge   stops and removes the state directory
#   scripts/pg-fixture.sh crash    stops the server as a crash would (pg_ctl -m immediate), only a
#                                  private cluster's (COFFER_PG_DIR set): the crash loop's (#30)
#
# `start` is idempotent and fast on a running fixture (it only prints the env); concurrent starts
# serialise on a lock file. The env line goes to stdout, everything else to stderr.
#
# fsync = off: a test fixture survives no power loss anyway, and the machine is shared. Commits are
# still synchronous to the server (synchronous_commit stays on), so a server stopped with
# `pg_ctl -m immediate` (the crash tests #30 asks for) loses nothing it acknowledged.
set -euo pipefail

DIR=${COFFER_PG_DIR:-/tmp/coffer-pg}
DATA=$DIR/data
RUN=$DIR/run
LOG=$DIR/server.log
ROLE=coffer
DATABASE=coffer

log() { printf 'pg-fixture: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The newest installed major version's binaries (Debian keeps them off PATH).
bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [[ -n $d && -x $d/initdb ]] && echo "$d"
}

# As root, the server and its tools run as `postgres`; as anyone else, as themselves.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

port() { cat "$DIR/port" 2>/dev/null; }

print_env() {
  [[ -f $DIR/password && -f $DIR/port ]] || die "no credentials in $DIR (not started?)"
  echo "COFFER_DATABASE_URL=postgres://$ROLE:$(cat "$DIR/password")@127.0.0.1:$(port)/$DATABASE"
}

running() {
  local bin p
  bin=$(bindir) || return 1
  p=$(port) || return 1
  [[ -n $p && -f $DATA/postmaster.pid ]] && as_owner "$bin/pg_isready" -q -h 127.0.0.1 -p "$p" -t 2
}

install_packages() {
  bindir >/dev/null && return 0
  [[ $(id -u) -eq 0 ]] || die "PostgreSQL is not installed and installing it needs root"
  command -v apt-get >/dev/null || die "PostgreSQL is not installed and there is no apt-get"
  log "installing postgresql (Debian packages)"
  local apt=(apt-get -o DPkg::Lock::Timeout=900 -y -q install postgresql)
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" >&2 || {
    apt-get -o DPkg::Lock::Timeout=900 -q update >&2
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" >&2
  }
  # The package's own cluster (port 5432) is not this fixture's.
  systemctl disable --now postgresql >/dev/null 2>&1 || true
  bindir >/dev/null || die "installed postgresql but found no /usr/lib/postgresql/*/bin/initdb"
}

# A port nothing listens on now, among the high ones. Chosen once, when the cluster is made.
free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
  done
  die "found no free port"
}

start_server() {
  local bin=$1
  # -w waits until the server accepts connections; -t bounds it. The log keeps the reason of a failure.
  if ! as_owner "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null 2>&1 9>&-; then
    log "the server did not start; last lines of $LOG:"
    tail -n 15 "$LOG" >&2 || true
    return 1
  fi
}

cold_start() {
  local bin=$1
  log "cold start in $DIR"
  rm -rf "$DIR"
  mkdir -p "$DIR" "$RUN"
  chmod 700 "$DIR"
  [[ $(id -u) -eq 0 ]] && chown postgres: "$DIR" "$RUN"
  free_port >"$DIR/port"
  od -An -N18 -tx1 /dev/urandom | tr -d ' \n' >"$DIR/password"
  chmod 600 "$DIR/password" "$DIR/port"
  [[ $(id -u) -eq 0 ]] && chown postgres: "$DIR/port" "$DIR/password"
  # Local socket connections (the admin's, in this private directory) trust the owner; TCP needs
  # the password (scram-sha-256).
  as_owner "$bin/initdb" -D "$DATA" -U postgres -E UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >"$DIR/initdb.log" 2>&1 ||
    { tail -n 15 "$DIR/initdb.log" >&2; die "initdb failed"; }
  as_owner tee -a "$DATA/postgresql.conf" >/dev/null <<EOF
# scripts/pg-fixture.sh
listen_addresses = '127.0.0.1'
port = $(port)
unix_socket_directories = '$RUN'
fsync = off
full_page_writes = off
shared_buffers = 64MB
max_connections = 200
log_min_messages = warning
EOF
  start_server "$bin" || die "the new cluster did not start"
  as_owner "$bin/psql" -h "$RUN" -p "$(port)" -U postgres -d postgres -v ON_ERROR_STOP=1 -q >/dev/null <<EOF
CREATE ROLE $ROLE LOGIN CREATEDB PASSWORD '$(cat "$DIR/password")';
CREATE DATABASE $DATABASE OWNER $ROLE;
EOF
  touch "$DIR/complete"
}

cmd_start() {
  mkdir -p "$(dirname "$DIR")"
  exec 9>"$DIR.lock"
  flock -w 600 9 || die "another start held $DIR.lock for 10 minutes"
  if [[ -f $DIR/complete ]] && running; then print_env; return; fi
  install_packages
  local bin t0=$SECONDS
  bin=$(bindir)
  if [[ -f $DIR/complete ]]; then
    log "warm start from $DIR on port $(port)"
    stop_server
    if ! start_server "$bin"; then
      log "warm start failed; starting cold"
      stop_server
      cold_start "$bin"
    fi
  else
    stop_server
    cold_start "$bin"
  fi
  running || die "the server does not answer on 127.0.0.1:$(port) (log: $LOG)"
  log "PostgreSQL ready on 127.0.0.1:$(port) after $((SECONDS - t0)) s"
  print_env
}

stop_server() {
  [[ -f $DATA/postmaster.pid ]] || return 0
  local bin
  bin=$(bindir) || return 0
  as_owner "$bin/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null 2>&1 || {
    # A server that will not stop is killed by the pid it wrote.
    local pid
    pid=$(head -1 "$DATA/postmaster.pid" 2>/dev/null || true)
    [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null || true
  }
}

case ${1:-} in
  start) cmd_start ;;
  env) running || die "not running (scripts/pg-fixture.sh start)"; print_env ;;
  status) if running; then echo running; else echo stopped; exit 3; fi ;;
  stop)
    stop_server
    if [[ ${2:-} == --purge ]]; then rm -rf "$DIR" "$DIR.lock"; log "stopped; removed $DIR"; else log "stopped (state kept in $DIR)"; fi ;;
  crash)
    # Never the shared fixture: colleagues' tests run on it. `start` brings the crashed one back.
    [[ -n ${COFFER_PG_DIR:-} ]] || die "crash stops a private cluster only: set COFFER_PG_DIR"
    running || die "not running"
    as_owner "$(bindir)/pg_ctl" -D "$DATA" -m immediate -w -t 60 stop >/dev/null ;;
  *) echo "usage: $0 start|stop [--purge]|status|env|crash" >&2; exit 2 ;;
esac
