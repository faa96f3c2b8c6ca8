#!/usr/bin/env bash
# Smoke test of the release's linux-arm64 executable on this x86-64 machine, under Debian's
# qemu-user-static (#28): copied alone into an empty directory, `serve --ephemeral` with fixed S3
# credentials and a seeded bucket, GET /health, one signed S3 PutObject + GetObject (the AWS SDK v3
# on this machine's Node), SIGTERM, and nothing left in TMPDIR. Every wait is bounded; the whole
# test is stopped after SMOKE_TIMEOUT seconds (default 300). Installs qemu when it is missing
# (scripts/cross-tools.sh); when qemu cannot run the executable, it fails: it never skips.
# Usage: scripts/smoke-arm64.sh [dist/release/coffer-<version>-linux-arm64]
set -euo pipefail
# The bound on the whole test: timeout signals its whole process group, the emulated server too.
if [ -z "${SMOKE_ARM64_BOUNDED:-}" ]; then
  SMOKE_ARM64_BOUNDED=1 exec timeout --kill-after=10 "${SMOKE_TIMEOUT:-300}" bash "$0" "$@"
fi

ROOT=$(realpath "$(dirname "$0")/..")
VERSION=$(sed -nE 's/^  "version": "([^"]+)".*/\1/p' "$ROOT/package.json")
BIN=$(realpath "${1:-$ROOT/dist/release/coffer-$VERSION-linux-arm64}")
NODE=$ROOT/node_modules/.bin/node
WORK=$(mktemp -d)
SERVER=
say() { echo "smoke-arm64: $*" >&2; }
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

[ -x "$BIN" ] || fail "no executable at $BIN (npm run release builds it)"
[ -x "$NODE" ] || fail "no $NODE: run npm ci first"
bash "$ROOT/scripts/cross-tools.sh" || fail "qemu-user-static and arm64's C library are needed (scripts/cross-tools.sh)"
QEMU=(qemu-aarch64-static -L /usr/aarch64-linux-gnu)
file_type=$(od -An -tx1 -j18 -N2 "$BIN" | tr -d ' ')
[ "$file_type" = b700 ] || fail "$BIN is not an arm64 (aarch64) ELF file (e_machine $file_type)"

cp "$BIN" "$WORK/coffer"
cd "$WORK"
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR" fixtures
echo '{"seeded":true}' > fixtures/seed.json
say "$("${QEMU[@]}" ./coffer version) from $BIN, under $("${QEMU[0]}" --version | head -1)"

say "serve --ephemeral"
# Fixed credentials through the environment, as a pipeline would pass them (not in ps).
COFFER_S3_ACCESS_KEY_ID=smokearm64 COFFER_S3_SECRET_ACCESS_KEY=smoke-arm64-secret \
  "${QEMU[@]}" ./coffer serve --ephemeral --bucket smoke=fixtures --write-env coffer.env > coffer.json 2> coffer.log &
SERVER=$!
for _ in $(seq 600); do
  [ -s coffer.env ] && break
  kill -0 "$SERVER" 2> /dev/null || fail "it exited before it was ready"
  sleep 0.1
done
[ -s coffer.env ] || fail "not ready after 60 s"
set -a
. ./coffer.env
set +a
[ "$AWS_ACCESS_KEY_ID" = smokearm64 ] || fail "the env file has another access key id: $AWS_ACCESS_KEY_ID"

say "GET /health"
health=$(curl -sSf --max-time 20 "$COFFER_URL/health") || fail "/health"
grep -q '"status":"ok"' <<< "$health" || fail "/health answered $health"

say "S3 PutObject and GetObject, signed"
head -c 300000 /dev/urandom > put.bin
NODE_PATH=$ROOT/node_modules timeout 60 "$NODE" -e '
const fs = require("node:fs")
const { S3Client, PutObjectCommand, GetObjectCommand } = require("@aws-sdk/client-s3")
const s3 = new S3Client({ endpoint: process.env.AWS_ENDPOINT_URL, forcePathStyle: true })
;(async () => {
  const body = fs.readFileSync("put.bin")
  await s3.send(new PutObjectCommand({ Bucket: "smoke", Key: "dir/put.bin", Body: body }))
  const got = Buffer.from(await (await s3.send(new GetObjectCommand({ Bucket: "smoke", Key: "dir/put.bin" }))).Body.transformToByteArray())
  if (!got.equals(body)) throw new Error(`GetObject returned ${got.length} other bytes`)
  const seeded = await (await s3.send(new GetObjectCommand({ Bucket: "smoke", Key: "seed.json" }))).Body.transformToString()
  if (seeded !== "{\"seeded\":true}\n") throw new Error(`the seeded object is ${JSON.stringify(seeded)}`)
})().catch((err) => { console.error(err); process.exit(1) })
' || fail "the S3 round trip"

say "SIGTERM"
kill -TERM "$SERVER"
rc=0
wait "$SERVER" || rc=$?
SERVER=
[ "$rc" = 0 ] || fail "exit code $rc after SIGTERM"
[ "$(wc -l < coffer.json)" = 1 ] || fail "not exactly one line on stdout"
[ -z "$(ls -A "$TMPDIR")" ] || fail "left behind in TMPDIR: $(ls -A "$TMPDIR")"

say "all passed"
