#!/usr/bin/env bash
# Installs Debian's chromium (the browser the console's end-to-end tests drive through
# playwright-core) when it is missing. Needs root and apt; engineers sharing a machine may run
# apt at once, so it waits for the dpkg lock instead of failing. Prints the browser's path.
set -euo pipefail
BIN=/usr/bin/chromium
if [ ! -x "$BIN" ]; then
  [ "$(id -u)" = 0 ] || { echo "chromium.sh: $BIN is missing and installing it needs root" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt=(apt-get -o DPkg::Lock::Timeout=900 -y -q)
  # A fresh machine's package lists may be empty or stale: update once, only when needed.
  "${apt[@]}" install chromium >&2 || { "${apt[@]}" update >&2 && "${apt[@]}" install chromium >&2; }
fi
echo "$BIN"
