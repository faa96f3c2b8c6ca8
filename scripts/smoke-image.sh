#!/usr/bin/env bash
# Smoke test of a release's container image (coffer-<version>-linux-<arch>.oci.tar) without a
# container runtime: its layer unpacked into a directory (scripts/oci-image.mjs checks every digest
# on the way) and its ENTRYPOINT + CMD run there under chroot, as its USER, with its Env, in a mount
# namespace of its own with /proc mounted, as a runtime would. The arm64 image runs under
# qemu-aarch64-static, copied into that directory (not into the image). Checks: the default command
# serves on a new /data, answers /health, takes a signed S3 PutObject and GetObject with fixed
# credentials, `coffer health` exits 0 inside, SIGTERM exits 0 with "shutdown complete"; then
# `serve --ephemeral` in place of the CMD prints its JSON line, answers and stops. The image's ports
# are replaced by free ones through COFFER_PORT / COFFER_S3_PORT, as `docker run -p` would map them.
# Needs root (chroot, mount). Every wait is bounded; the whole test stops after SMOKE_TIMEOUT s.
# Usage: scripts/smoke-image.sh [dist/release/coffer-<version>-linux-<arch>.oci.tar] (default arm64)
set -euo pipefail
if [ -z "${SMOKE_IMAGE_BOUNDED:-}" ]; then
  SMOKE_IMAGE_BOUNDED=1 exec timeout --kill-after=10 "${SMOKE_TIMEOUT:-300}" bash "$0" "$@"
fi

ROOT=$(realpath "$(dirname "$0")/..")
VERSION=$(sed -nE 's/^  "version": "([^"]+)".*/\1/p' "$ROOT/package.json")
IMAGE=$(realpath "${1:-$ROOT/dist/release/coffer-$VERSION-linux-arm64.oci.tar}")
NODE=$ROOT/node_modules/.bin/node
WORK=$(mktemp -d)
SERVER=
say() { echo "smoke-image: $*" >&2; }
fail() {
  say "FAILED: $*"
  [ -s "$WORK/coffer.log" ] && { say "its log:"; cat "$WORK/coffer.log" >&2; }
  exit 1
}
cleanup() {
  if [ -n "$SERVER" ]; then kill -KILL "$SERVER" 2> /dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'fail "not done after ${SMOKE_TIMEOUT:-300} s"' TERM

[ "$(id -u)" = 0 ] || fail "needs root: chroot and mount"
[ -f "$IMAGE" ] || fail "no image at $IMAGE (npm run release builds it)"
[ -x "$NODE" ] || fail "no $NODE: run npm ci first"

"$NODE" "$ROOT/scripts/oci-image.mjs" unpack "$IMAGE" "$WORK/image" >&2 || fail "unpacking $IMAGE"
RFS=$WORK/image/rootfs
# The config's run settings as bash arrays: ENTRYPOINT, CMD, ENV (NAME=value), and RUN_AS (its User), ARCH.
"$NODE" -e '
const c = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"))
const q = (s) => `'\''${String(s).replace(/'\''/g, `'\''\\'\'''\''`)}'\''`
const arr = (name, a) => console.log(`${name}=(${(a ?? []).map(q).join(" ")})`)
arr("ENTRYPOINT", c.config.Entrypoint); arr("CMD", c.config.Cmd); arr("ENV", c.config.Env)
console.log(`RUN_AS=${q(c.config.User)}`); console.log(`ARCH=${q(c.architecture)}`)
' "$WORK/image/config.json" > "$WORK/config.sh"
. "$WORK/config.sh"
case "$RUN_AS" in root | 0 | 0:*) fail "the image runs as root ($RUN_AS)" ;; esac

EMU=()
if [ "$ARCH" = arm64 ]; then
  bash "$ROOT/scripts/cross-tools.sh" || fail "qemu-user-static is needed (scripts/cross-tools.sh)"
  cp "$(command -v qemu-aarch64-static)" "$RFS/.qemu-aarch64-static"
  EMU=(/.qemu-aarch64-static)
  # A worker is the executable run again, which needs binfmt_misc to run under qemu: one process.
  ENV+=(COFFER_WORKERS=1)
fi
mkdir -p "$RFS/proc"
free_port() { "$NODE" -e 's=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
PORT=$(free_port)
S3_PORT=$(free_port)

# Runs ARGS (in place of the CMD) in the image, as a runtime would, with extra NAME=value settings
# from the array EXTRA; the command keeps this shell's pid through every exec.
in_image() {
  exec unshare --mount --propagation private /bin/sh -c 'root=$1; shift; mount -t proc proc "$root/proc" && exec "$@"' sh "$RFS" \
    /usr/bin/env -i "${ENV[@]}" COFFER_PORT="$PORT" COFFER_S3_PORT="$S3_PORT" "${EXTRA[@]}" \
    /usr/sbin/chroot --userspec="$RUN_AS" "$RFS" "${EMU[@]}" "${ENTRYPOINT[@]}" "$@"
}

# Sends SIGTERM to the server and fails unless it exits 0 after logging "shutdown complete".
stop() {
  local rc=0
  kill -TERM "$SERVER"
  wait "$SERVER" || rc=$?
  SERVER=
  [ "$rc" = 0 ] || fail "exit code $rc after SIGTERM"
  grep -q '"msg":"shutdown complete"' "$1" || fail "no \"shutdown complete\" in its log"
}

say "$IMAGE ($ARCH): ${ENTRYPOINT[*]} ${CMD[*]} as $RUN_AS"
EXTRA=(COFFER_S3_ACCESS_KEY_ID=smokeimage COFFER_S3_SECRET_ACCESS_KEY=smoke-image-secret COFFER_S3_BUCKETS=smoke)
(in_image "${CMD[@]}") > "$WORK/coffer.log" 2>&1 &
SERVER=$!
URL=http://127.0.0.1:$PORT
# Polls /health until it answers 200 (qemu on a loaded machine is slow), the server exits, or 2 minutes pass.
wait_health() {
  rm -f "$WORK/health.json"
  for _ in $(seq 600); do
    curl -sf --max-time 5 -o "$WORK/health.json" "$URL/health" && break
    kill -0 "$SERVER" 2> /dev/null || fail "it exited before it answered /health"
    sleep 0.2
  done
  grep -q '"status":"ok"' "$WORK/health.json" 2> /dev/null || fail "/health did not answer 200 within 2 minutes"
}
wait_health
owner=$(stat -c %u:%g "$RFS/data/coffer.db") || fail "no coffer.db in /data"
[ "$owner" = "$RUN_AS" ] || fail "/data/coffer.db is owned by $owner, not $RUN_AS"

say "coffer health inside the image"
EXTRA=()
out=$(in_image health) || fail "coffer health: exit $? ($out)"
[ "$out" = "http://127.0.0.1:$PORT/health: 200" ] || fail "coffer health said: $out"

say "S3 PutObject and GetObject, signed"
head -c 300000 /dev/urandom > "$WORK/put.bin"
AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT AWS_ACCESS_KEY_ID=smokeimage AWS_SECRET_ACCESS_KEY=smoke-image-secret AWS_REGION=us-east-1 \
  NODE_PATH=$ROOT/node_modules timeout 60 "$NODE" -e '
const fs = require("node:fs")
const { S3Client, PutObjectCommand, GetObjectCommand } = require("@aws-sdk/client-s3")
const s3 = new S3Client({ endpoint: process.env.AWS_ENDPOINT_URL, forcePathStyle: true })
;(async () => {
  const body = fs.readFileSync(process.argv[1])
  await s3.send(new PutObjectCommand({ Bucket: "smoke", Key: "dir/put.bin", Body: body }))
  const got = Buffer.from(await (await s3.send(new GetObjectCommand({ Bucket: "smoke", Key: "dir/put.bin" }))).Body.transformToByteArray())
  if (!got.equals(body)) throw new Error(`GetObject returned ${got.length} other bytes`)
})().catch((err) => { console.error(err); process.exit(1) })
' "$WORK/put.bin" || fail "the S3 round trip"

say "SIGTERM"
stop "$WORK/coffer.log"
[ -z "$(ls -A "$RFS/tmp")" ] || fail "left behind in /tmp: $(ls -A "$RFS/tmp")"

say "serve --ephemeral in place of the CMD"
EXTRA=()
(in_image serve --ephemeral) > "$WORK/ephemeral.json" 2> "$WORK/coffer.log" &
SERVER=$!
for _ in $(seq 600); do
  [ -s "$WORK/ephemeral.json" ] && break
  kill -0 "$SERVER" 2> /dev/null || fail "serve --ephemeral exited before its JSON line"
  sleep 0.2
done
grep -qE "^\{\"url\":\"http://[0-9.]+:$PORT\",.*\"s3\":\\{\"endpoint\":\"http://[0-9.]+:$S3_PORT\"" "$WORK/ephemeral.json" ||
  fail "the JSON line: $(cat "$WORK/ephemeral.json")"
wait_health
stop "$WORK/coffer.log"
[ -z "$(ls -A "$RFS/tmp")" ] || fail "serve --ephemeral left its data dir in /tmp: $(ls -A "$RFS/tmp")"

say "all passed"
