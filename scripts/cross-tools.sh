#!/usr/bin/env bash
# Installs what building and running the linux-arm64 executable on an x86-64 machine needs (#28),
# from Debian's packages, when it is missing: qemu-user-static (runs arm64 programs), arm64's strip,
# and arm64's C and C++ runtime under /usr/aarch64-linux-gnu (Node is linked against glibc and
# libstdc++; qemu finds them with -L). Idempotent: with everything present it changes nothing.
# Needs root and apt-get; without them it says what is missing and exits 3.
set -euo pipefail

SYSROOT=/usr/aarch64-linux-gnu
missing=()
command -v qemu-aarch64-static > /dev/null || missing+=(qemu-user-static)
command -v aarch64-linux-gnu-strip > /dev/null || missing+=(binutils-aarch64-linux-gnu)
[ -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ] || missing+=(libc6-arm64-cross)
[ -e "$SYSROOT/lib/libstdc++.so.6" ] || missing+=(libstdc++6-arm64-cross)
[ -e "$SYSROOT/lib/libgcc_s.so.1" ] || missing+=(libgcc-s1-arm64-cross)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
  echo "cross-tools: cannot install ${missing[*]}: needs root and apt-get" >&2
  exit 3
fi
export DEBIAN_FRONTEND=noninteractive
# Several engineers (and CI steps) share the machine: wait for the dpkg lock instead of failing.
apt_install() { apt-get -o DPkg::Lock::Timeout=900 -y -q install --no-install-recommends "$@"; }
if ! apt_install "${missing[@]}" >&2; then
  apt-get -o DPkg::Lock::Timeout=900 -q update >&2
  apt_install "${missing[@]}" >&2
fi
command -v qemu-aarch64-static > /dev/null || { echo "cross-tools: qemu-aarch64-static still missing after installing" >&2; exit 1; }
command -v aarch64-linux-gnu-strip > /dev/null || { echo "cross-tools: aarch64-linux-gnu-strip still missing after installing" >&2; exit 1; }
[ -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ] || { echo "cross-tools: $SYSROOT still has no arm64 C library" >&2; exit 1; }
