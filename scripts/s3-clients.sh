#!/usr/bin/env bash
# Installs the S3 clients the test suite drives (the AWS CLI, rclone, restic, s3cmd, botocore, boto3)
# from Debian's packages when they are missing. Idempotent: with every client present it changes nothing.
# Needs root and apt-get; without them it says so and exits 3 (tests then skip loudly, or fail in CI).
set -euo pipefail

declare -A PACKAGE=([aws]=awscli [rclone]=rclone [restic]=restic [s3cmd]=s3cmd)
missing=()
for cmd in aws rclone restic s3cmd; do
  # Debian's binaries, not whatever else is on PATH (a pyenv shim, a snap): tests run /usr/bin/<cmd>.
  [ -x "/usr/bin/$cmd" ] || missing+=("${PACKAGE[$cmd]}")
done
# botocore, the library of AWS CLI v1 (Debian's awscli is v2, SigV4 only): its SigV2 signers (#24).
/usr/bin/python3 -c 'import botocore.auth' 2>/dev/null || missing+=(python3-botocore)
# boto3 for Debian's python3 (test/ci-fixture.test.ts), not a pip copy of another interpreter.
/usr/bin/python3 -c 'import boto3' 2>/dev/null || missing+=(python3-boto3)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "s3-clients: cannot install ${missing[*]}: needs root and apt-get" >&2
  exit 3
fi
export DEBIAN_FRONTEND=noninteractive
# Several engineers (and CI steps) share the machine: wait for the dpkg lock instead of failing.
apt_install() { apt-get -o DPkg::Lock::Timeout=900 -y -q install --no-install-recommends "$@"; }
if ! apt_install "${missing[@]}" >&2; then
  apt-get -o DPkg::Lock::Timeout=900 -q update >&2
  apt_install "${missing[@]}" >&2
fi
for cmd in aws rclone restic s3cmd; do
  [ -x "/usr/bin/$cmd" ] || { echo "s3-clients: /usr/bin/$cmd still missing after installing" >&2; exit 1; }
done
/usr/bin/python3 -c 'import botocore.auth' || { echo "s3-clients: python3-botocore still missing after installing" >&2; exit 1; }
/usr/bin/python3 -c 'import boto3' || { echo "s3-clients: boto3 still missing after installing python3-boto3" >&2; exit 1; }
