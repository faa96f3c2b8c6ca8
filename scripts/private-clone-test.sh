#!/usr/bin/env bash
# The tests must pass wherever a person clones the repository (#32): this clones the checkout's
# HEAD into a fresh `mktemp -d` (a directory only its owner may enter, as root's home is on
# Debian), runs `npm ci` there and the given test files (default: test/startup-errors.test.ts,
# whose permission cases run the command as `nobody`, and test/bundle.test.ts, which runs the
# bundle from elsewhere and logs: tap's after hook fails a run that logged nothing, taking it for
# a broken log mirror). Run as root, it then does the same as a
# normal user: a throwaway system user whose home is another 0700 directory holding a copy of
# that clone; the user and every directory are removed on exit, whatever happens.
#
# Usage: bash scripts/private-clone-test.sh [TEST_FILE...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(test/startup-errors.test.ts test/bundle.test.ts)
# These runs need no Ceph gateway: tap's before hook must neither start nor stop the shared one.
export COFFER_TEST_S3=off

work=$(mktemp -d)
user=''
home=''
cleanup() {
  if [ -n "$user" ]; then userdel "$user" 2>/dev/null || true; fi
  rm -rf "$work" ${home:+"$home"}
}
trap cleanup EXIT

echo "# clone into $work (mode $(stat -c %a "$work")) as $(id -un)"
git clone -q "$repo" "$work/coffer"
(cd "$work/coffer" && npm ci --prefer-offline --no-audit --no-fund >/dev/null && npx tap "${tests[@]}")

if [ "$(id -u)" = 0 ] && command -v useradd >/dev/null && command -v runuser >/dev/null; then
  user="coffer-check-$$"
  home=$(mktemp -d)
  useradd --system --no-create-home --home-dir "$home" --shell /bin/sh "$user"
  cp -a "$work/coffer" "$home/coffer"
  chown -R "$user:" "$home"
  chmod 0700 "$home"
  echo "# the same as $user (uid $(id -u "$user")), from $home (mode $(stat -c %a "$home"))"
  runuser -u "$user" -- env -i HOME="$home" PATH="$PATH" COFFER_TEST_S3=off sh -c 'cd "$HOME/coffer" && npx tap "$@"' sh "${tests[@]}"
fi
