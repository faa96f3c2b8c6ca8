#!/usr/bin/env bash
# A throwaway one-node Ceph cluster with a RADOS Gateway: the real S3 server the S3 blob store is
# tested against (#16). Debian 12's packages (Ceph 16.2), one mon + one OSD, no mgr, no cephx, the
# OSD in RAM (memstore), everything bound to 127.0.0.1 on fixed uncommon ports, state under
# $COFFER_CEPH_DIR (default /tmp/coffer-ceph), daemons stopped by PID.
#
#   scripts/ceph-fixture.sh start    start (installing the packages when missing); prints the env
#   scripts/ceph-fixture.sh env      prints COFFER_BLOB_S3_* lines of the running fixture
#   scripts/ceph-fixture.sh status   exit 0 and "running" when the gateway answers, else exit 3
#   scripts/ceph-fixture.sh stop     stops the daemons (state kept: the next start is warm)
#   scripts/ceph-fixture.sh stop --purge   stops and removes the state directory
#
# `start` is idempotent: on a running fixture it only prints the env. Concurrent starts (two test
# files at once) serialise on a lock file. The env lines go to stdout, everything else to stderr.
#
# Ports (chosen to clash with nothing common): mon 16789 (msgr v1) and 13300 (msgr v2), OSD
# 16800-16899, gateway 17480 (RGW's default is 7480). Override with COFFER_CEPH_RGW_PORT etc.
set -euo pipefail

DIR=${COFFER_CEPH_DIR:-/tmp/coffer-ceph}
RGW_PORT=${COFFER_CEPH_RGW_PORT:-17480}
MON_PORT=${COFFER_CEPH_MON_PORT:-16789}
MON_V2_PORT=${COFFER_CEPH_MON_V2_PORT:-13300}
OSD_PORT_MIN=${COFFER_CEPH_OSD_PORT_MIN:-16800}
# memstore keeps objects in RAM, about 2x the stored bytes: cap the device (the machine is shared).
# 4 GiB: a bench of 100 MiB objects beside a day of test runs whose killed processes leave objects.
MEMSTORE_BYTES=${COFFER_CEPH_MEMSTORE_BYTES:-4294967296}
BUCKET=${COFFER_CEPH_BUCKET:-coffer}
ACCESS_KEY=COFFERCEPHACCESSKEY0
CONF=$DIR/ceph.conf
ENDPOINT=http://127.0.0.1:$RGW_PORT

log() { printf 'ceph-fixture: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
ceph_() { ceph -c "$CONF" --connect-timeout 15 "$@"; }

pid_alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
gateway_up() { curl -s -o /dev/null --max-time 2 "$ENDPOINT/" ; }
# curl signs with SigV4 but (7.88) sends no x-amz-content-sha256, which RGW requires: the empty body's.
s3curl() { curl -s --aws-sigv4 aws:amz:us-east-1:s3 --user "$ACCESS_KEY:$(cat "$DIR/secret")" -H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' "$@"; }

print_env() {
  [[ -f $DIR/secret ]] || die "no credentials in $DIR (not started?)"
  cat <<EOF
COFFER_BLOB_S3_ENDPOINT=$ENDPOINT
COFFER_BLOB_S3_BUCKET=$BUCKET
COFFER_BLOB_S3_REGION=us-east-1
COFFER_BLOB_S3_ACCESS_KEY_ID=$ACCESS_KEY
COFFER_BLOB_S3_SECRET_ACCESS_KEY=$(cat "$DIR/secret")
COFFER_BLOB_S3_FORCE_PATH_STYLE=true
EOF
}

running() { pid_alive "$DIR/run/mon.a.pid" && pid_alive "$DIR/run/osd.0.pid" && pid_alive "$DIR/run/rgw.pid" && gateway_up; }

install_packages() {
  command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null && command -v radosgw >/dev/null && return 0
  [[ $(id -u) -eq 0 ]] || die "ceph-mon/ceph-osd/radosgw are not installed and installing them needs root"
  command -v apt-get >/dev/null || die "ceph-mon/ceph-osd/radosgw are not installed and there is no apt-get"
  log "installing ceph-mon ceph-osd radosgw (Debian packages)"
  local apt=(apt-get -o DPkg::Lock::Timeout=900 -y -q install ceph-mon ceph-osd radosgw)
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" >&2 || {
    apt-get -o DPkg::Lock::Timeout=900 -q update >&2
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" >&2
  }
  # The packages' own units must not start a second cluster on the default ports.
  systemctl disable --now ceph.target >/dev/null 2>&1 || true
}

write_conf() {
  local fsid=$1
  cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$MON_V2_PORT,v1:127.0.0.1:$MON_PORT]
public addr = 127.0.0.1
public network = 127.0.0.0/8
ms bind port min = $OSD_PORT_MIN
ms bind port max = $((OSD_PORT_MIN + 99))
# No cephx: a throwaway local cluster. Without auth, clients (radosgw) only reach the mon once
# the mon client mode is crc.
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = false
ms mon client mode = crc
keyring = $DIR/keyring
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
log file = $DIR/log/\$name.log
pid file = $DIR/run/\$name.pid
mon data = $DIR/mon/\$id
osd data = $DIR/osd/\$id
# memstore saves its objects to the OSD dir only on a clean umount, which fast shutdown skips:
# without this a restart (warm start) finds empty PGs and the gateway never comes up.
osd fast shutdown = false
osd objectstore = memstore
memstore device bytes = $MEMSTORE_BYTES
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
# Out of the box the first bucket and object take ~2 s each: paxos batches proposals for 1 s.
paxos propose interval = 0.05
mon osd full ratio = 0.97
osd op num shards = 2
osd op num threads per shard = 1
debug ms = 0
[mon]
mon cluster log file = $DIR/log/cluster.log
[client.rgw.coffer]
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
rgw data = $DIR/rgw
pid file = $DIR/run/rgw.pid
log file = $DIR/log/rgw.log
rgw thread pool size = 64
rgw enable usage log = false
rgw dns name = localhost
EOF
}

wait_for() { # seconds, description, command...
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { log "timed out after ${secs}s waiting for $what (logs: $DIR/log)"; return 1; }
    sleep 0.1
  done
}

start_daemons() {
  daemon ceph-mon -c "$CONF" -i a
  wait_for 30 "the mon" ceph_ mon stat
  daemon ceph-osd -c "$CONF" -i 0
  wait_for 60 "the OSD to be up" osd_up
  daemon radosgw -c "$CONF" -n client.rgw.coffer
  wait_for 60 "the gateway on $ENDPOINT" gateway_up
}

# The daemons fork into the background; their inherited stdout/stderr must not be the caller's,
# or a caller waiting for this script's output (a test's execFile, CI's pipe) waits forever.
# Nor may they inherit the start lock (fd 9), or the next start waits for them to exit.
daemon() { "$@" </dev/null >>"$DIR/log/daemons.out" 2>&1 9>&-; }

osd_up() { ceph_ osd dump 2>/dev/null | grep -q '^osd.0 up'; }

cold_start() {
  log "cold start in $DIR"
  rm -rf "$DIR"
  mkdir -p "$DIR"/{run,log,mon/a,osd/0,rgw}
  chmod 700 "$DIR"
  local fsid osd_uuid
  fsid=$(cat /proc/sys/kernel/random/uuid)
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  write_conf "$fsid"
  ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$DIR/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' >/dev/null
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$MON_V2_PORT,v1:127.0.0.1:$MON_PORT]" "$DIR/monmap" >/dev/null
  ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/keyring"
  daemon ceph-mon -c "$CONF" -i a
  wait_for 30 "the mon" ceph_ mon stat
  local id
  id=$(ceph_ osd new "$osd_uuid")
  [[ $id == 0 ]] || die "expected osd id 0, got $id"
  ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" </dev/null >>"$DIR/log/daemons.out" 2>&1
  daemon ceph-osd -c "$CONF" -i 0
  wait_for 60 "the OSD to be up" osd_up
  # The gateway's pools, made now rather than lazily by its first request (each lazy creation is a
  # paxos round and a PG peering on the request path).
  local pool
  for pool in .rgw.root default.rgw.control default.rgw.meta default.rgw.log default.rgw.buckets.index default.rgw.buckets.data default.rgw.buckets.non-ec; do
    ceph_ osd pool create "$pool" 8 8 >/dev/null 2>&1
    ceph_ osd pool application enable "$pool" rgw >/dev/null 2>&1
  done
  daemon radosgw -c "$CONF" -n client.rgw.coffer
  wait_for 60 "the gateway on $ENDPOINT" gateway_up
  local secret
  secret=cofferS3secret$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  radosgw-admin -c "$CONF" user create --uid=coffer --display-name=coffer --access-key="$ACCESS_KEY" --secret-key="$secret" >/dev/null
  printf '%s' "$secret" >"$DIR/secret"
  chmod 600 "$DIR/secret"
  # The bucket, created through the S3 API itself (signed with curl's SigV4): proof it answers.
  local code
  code=$(s3curl -o "$DIR/log/make-bucket.out" -w '%{http_code}' --max-time 30 -X PUT "$ENDPOINT/$BUCKET")
  [[ $code == 200 ]] || die "creating bucket $BUCKET answered $code: $(cat "$DIR/log/make-bucket.out")"
  touch "$DIR/complete"
}

cmd_start() {
  mkdir -p "$(dirname "$DIR")"
  exec 9>"$DIR.lock"
  flock -w 600 9 || die "another start held $DIR.lock for 10 minutes"
  if [[ -f $DIR/complete ]] && running; then print_env; return; fi
  install_packages
  local t0=$SECONDS
  if [[ -f $DIR/complete ]]; then
    log "warm start from $DIR"
    stop_daemons
    if ! start_daemons || ! bucket_ok; then
      log "warm start failed; starting cold"
      stop_daemons
      cold_start
    fi
  else
    stop_daemons
    cold_start
  fi
  log "gateway ready on $ENDPOINT after $((SECONDS - t0)) s"
  print_env
}

bucket_ok() {
  local code
  code=$(s3curl -o /dev/null -w '%{http_code}' --max-time 10 -I "$ENDPOINT/$BUCKET")
  [[ $code == 200 ]]
}

stop_one() { # pid file
  local f=$1 pid
  [[ -f $f ]] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# Gateway first, then the OSD (memstore saves its objects on a clean shutdown), the mon last.
stop_daemons() { stop_one "$DIR/run/rgw.pid"; stop_one "$DIR/run/osd.0.pid"; stop_one "$DIR/run/mon.a.pid"; }

case ${1:-} in
  start) cmd_start ;;
  env) running || die "not running (scripts/ceph-fixture.sh start)"; print_env ;;
  status) if running; then echo running; else echo stopped; exit 3; fi ;;
  stop)
    stop_daemons
    if [[ ${2:-} == --purge ]]; then rm -rf "$DIR" "$DIR.lock"; log "stopped; removed $DIR"; else log "stopped (state kept in $DIR)"; fi ;;
  *) echo "usage: $0 start|stop [--purge]|status|env" >&2; exit 2 ;;
esac
