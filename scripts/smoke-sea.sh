#!/usr/bin/env bash
# Smoke test of the single executable, as a user would run it: copied alone into an empty
# directory (no node_modules beside it), then: serve, health, a tenant created from the CLI, an upload
# and a download with that tenant, /metrics, /openapi.json and /docs, SIGTERM, and the ephemeral mode's
# JSON line and round trip. Needs bash, curl and cmp. Usage: scripts/smoke-sea.sh [path/to/coffer]
set -euo pipefail

BIN=$(realpath "${1:-$(dirname "$0")/../dist/coffer}")
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
say() { echo "smoke: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
# The value of string field $1 in the one-line JSON on stdin (the last one of that name).
field() { sed -nE "s/.*\"$1\":\"([^\"]+)\".*/\1/p"; }

cp "$BIN" "$WORK/coffer"
cd "$WORK"
# The executable may write only into its data dir: an empty TMPDIR shows it stays out of it.
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"
[ "$(ls -A)" = "$(printf 'coffer\ntmp')" ] || fail "the directory is not empty"
say "$(./coffer version) from $BIN ($(du -m coffer | cut -f1) MB)"

# Uploads a PDF to $1 with key $2 in two steps, downloads it and compares the bytes.
roundtrip() {
  local url=$1 key=$2
  { printf '%%PDF-1.7\n'; head -c 200000 /dev/urandom; } > in.pdf
  curl -sSf -X POST "$url/api/v1/upload/request" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d "{\"fileType\":\"application/pdf\",\"fileName\":\"smoke.pdf\",\"fileSizeBytes\":$(wc -c < in.pdf)}" > handshake.json
  curl -sSf -X PUT "$url$(field presignedUrl < handshake.json)" -H 'Content-Type: application/pdf' --data-binary @in.pdf > put.json
  grep -q '"processingStatus":"completed"' put.json || fail "upload: $(cat put.json)"
  curl -sSf -o out.pdf "$url/api/v1/files/$(field fileId < handshake.json)/download" -H "Authorization: Bearer $key"
  cmp -s in.pdf out.pdf || fail "the download differs from the upload"
}

# Sends SIGTERM to $1 and fails unless it exits 0.
stop() {
  local rc=0
  kill -TERM "$1"
  wait "$1" || rc=$?
  [ "$rc" = 0 ] || fail "exit code $rc after SIGTERM"
}

say "serve, health"
./coffer serve --port 0 --s3-port 0 --data-dir data > serve.log 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q 'coffer listening on' serve.log && break; sleep 0.1; done
URL=$(sed -nE 's/.*coffer listening on (http:[^"]+)".*/\1/p' serve.log)
[ -n "$URL" ] || fail "no listening line: $(cat serve.log)"
health=$(curl -sSf "$URL/health") || fail "/health"
grep -q '"status":"ok"' <<<"$health" || fail "/health"
ls data/.cache/better_sqlite3-*.node > /dev/null || fail "the SQLite addon is not unpacked under the data dir"

# Only serve creates a data dir; the CLI works on it, also while the server runs.
say "tenant created from the CLI"
./coffer tenant create --name smoke --json --data-dir data > tenant.json
KEY=$(field apiKey < tenant.json)
[[ $KEY == sk_live_* ]] || fail "no API key in: $(cat tenant.json)"

say "upload and download"
roundtrip "$URL" "$KEY"

say "metrics and OpenAPI"
# Read whole bodies first: `curl | grep -q` fails under pipefail when grep exits before curl is done.
metrics=$(curl -sSf "$URL/metrics") || fail "/metrics"
grep -q '^coffer_uploads_total{outcome="completed"} 1$' <<<"$metrics" || fail "/metrics"
openapi=$(curl -sSf "$URL/openapi.json") || fail "/openapi.json"
grep -q '"openapi":"3.1.0"' <<<"$openapi" || fail "/openapi.json"
say "API docs page"
docs=$(curl -sSf "$URL/docs") || fail "/docs"
grep -q 'docs/swagger-ui-bundle.js' <<<"$docs" || fail "/docs: $docs"
curl -sSf -o swagger-ui-bundle.js "$URL/docs/swagger-ui-bundle.js" || fail "/docs/swagger-ui-bundle.js"
grep -q 'SwaggerUIBundle' swagger-ui-bundle.js || fail "/docs/swagger-ui-bundle.js is not Swagger UI"
say "web console"
console_page=$(curl -sSfi "$URL/console") || fail "/console"
grep -qiE "^content-security-policy: default-src 'self';.*frame-ancestors 'none'" <<<"$console_page" || fail "/console has no strict CSP"
console_js=$(sed -nE 's/.*src="(\/console\/assets\/app-[^"]+\.js)".*/\1/p' <<<"$console_page")
[ -n "$console_js" ] && curl -sSf -o console.js "$URL$console_js" && [ -s console.js ] || fail "the console script ($console_js)"
[ "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$URL/")" = "302 $URL/console" ] || fail "/ does not redirect to /console"
stop "${PIDS[-1]}"

say "serve --ephemeral"
./coffer serve --ephemeral --port 0 > ephemeral.json 2> ephemeral.log &
PIDS+=($!)
for _ in $(seq 100); do [ -s ephemeral.json ] && break; sleep 0.1; done
grep -qE '^\{"url":"http://127\.0\.0\.1:[0-9]+","adminApiKey":"[^"]{16,}","tenant":\{"id":"[0-9a-f-]{36}","apiKey":"sk_test_[^"]+"\},"s3":\{"endpoint":"http://127\.0\.0\.1:[0-9]+","region":"[a-z0-9-]+","accessKeyId":"CK[A-Z0-9]{18}","secretAccessKey":"[^"]{40}"\}\}$' ephemeral.json ||
  fail "the JSON line: $(cat ephemeral.json) $(cat ephemeral.log)"
# The S3 listener answers, in S3's XML error shape, that an anonymous read of a private object is refused.
S3=$(sed -E 's/.*"endpoint":"([^"]+)".*/\1/' ephemeral.json)
curl -s "$S3/private/key" | grep -q '<Code>AccessDenied</Code>' || fail "the S3 endpoint $S3 did not answer AccessDenied"
roundtrip "$(field url < ephemeral.json)" "$(field apiKey < ephemeral.json)"
stop "${PIDS[-1]}"
[ "$(wc -l < ephemeral.json)" = 1 ] || fail "more than one line on stdout"
[ -z "$(ls -A "$TMPDIR")" ] || fail "left behind in TMPDIR: $(ls -A "$TMPDIR")"

say "all passed"
