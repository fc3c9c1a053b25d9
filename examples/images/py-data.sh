#!/usr/bin/env bash
# A data-science tool image: Debian 12 (debootstrap, minbase) with python3 and Debian's numpy,
# pandas and matplotlib, packed as an OCI archive for `toolcage images import`. No registry and
# no Docker engine: debootstrap and apt from the archive this machine's apt uses.
#   examples/images/py-data.sh [OUT.tar]      (default: py-data.tar; about 5 min: a 390 MB
#                                             archive, a 1.2 GB root)
# Then:
#   toolcage images import py-data.tar        # name: toolcage-examples/py-data:1
# and the example policy's tool "python-data" runs in it.
set -euo pipefail
out="$(realpath -m "${1:-py-data.tar}")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
suite=bookworm
mirror="${DEBIAN_MIRROR:-$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)}"
mirror="${mirror:-$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)}"
mirror="${mirror:-http://deb.debian.org/debian}"
command -v debootstrap >/dev/null || { echo "debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "run as root (debootstrap)" >&2; exit 1; }
work="$(mktemp -d /tmp/toolcage-py-data.XXXXXX)"
trap 'umount "$work/root/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
root="$work/root"
echo "debootstrap $suite from $mirror" >&2
debootstrap --variant=minbase --include=python3,python3-numpy,python3-pandas,python3-matplotlib \
  "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
# what an image does not need: package caches and lists, documentation, locales; and the
# device nodes debootstrap made in /dev (an import refuses them; the sandbox has its own /dev)
rm -rf "$root"/dev/*
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/* \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/etc/machine-id
# matplotlib draws without a display
mkdir -p "$root/etc/matplotlib"
echo "backend: Agg" >"$root/etc/matplotlib/matplotlibrc"
"$here/../../scripts/oci-archive" "$root" "$out" toolcage-examples/py-data:1 \
  "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "LANG=C.UTF-8" "MPLBACKEND=Agg"
echo "wrote $out" >&2
