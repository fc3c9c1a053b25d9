#!/usr/bin/env bash
# Builds an OCI image archive (scripts/oci-archive) from this host's own Debian packages: each package's files and
# every shared library their programs and Python's extension modules load, in one gzip layer,
# with the merged-/usr links. No registry, no daemon: what the tests need of an image a user
# would build (tests/integration/images.test.mjs, the attack corpus's image run).
#   tests/images/host-image.sh OUT.tar NAME PACKAGE...
set -euo pipefail
out="$1" name="$2"
shift 2
work="$(mktemp -d /tmp/toolcage-host-image.XXXXXX)"
trap 'rm -rf "$work"' EXIT
list="$work/files"
: >"$list"
for p in "$@"; do
  dpkg-query -L "$p" >>"$list"
done
# regular files and links only (directories come with them), under /usr (merged: /bin is
# /usr/bin) and /etc
sed -E 's#^/(bin|sbin|lib|lib64)/#/usr/\1/#' "$list" | grep -E '^/(usr|etc)/' | sort -u >"$work/paths"
# the shared libraries their programs and modules need, transitively (ldd gives the closure)
grep -E '/s?bin/|\.so(\.|$)' "$work/paths" | while read -r f; do
  [[ -f "$f" && ! -L "$f" ]] && printf '%s\n' "$f"
done >"$work/elves"
{ xargs -r -n 256 ldd <"$work/elves" 2>/dev/null || true; } |
  awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $1 !~ /:$/ { print $1 }' |
  sort -u >"$work/libs"
root="$work/root"
mkdir -p "$root"
# copied with their links dereferenced where they are libraries (the loader finds them by name)
tar -C / -cf - --no-recursion -T <(sed 's|^/||' "$work/paths") 2>/dev/null | tar -C "$root" -xf - || true
while read -r l; do
  d="$root$(dirname "$l")"
  mkdir -p "$d"
  cp -L "$l" "$d/"
  real="$(readlink -f "$l")"
  mkdir -p "$root$(dirname "$real")"
  [[ -e "$root$real" ]] || cp -L "$l" "$root$real"
done <"$work/libs"
# Python's compiled modules (made at install time, so no package lists them): an image built
# with apt has them, and without them every start compiles what it imports
find "$root/usr/lib" -maxdepth 1 -name 'python3*' -type d | while read -r d; do
  (cd "/${d#"$root"/}" && find . -type d -name __pycache__ -print0 | tar --null -cf - -T - 2>/dev/null) | tar -C "$d" -xf -
done
mkdir -p "$root/usr/lib64" "$root/tmp" "$root/var/tmp"
[[ -e "$root/usr/lib64/ld-linux-x86-64.so.2" ]] || cp -L /lib64/ld-linux-x86-64.so.2 "$root/usr/lib64/"
for l in bin sbin lib lib64; do ln -sfn "usr/$l" "$root/$l"; done
# what Debian's alternatives would link (mawk for awk)
[[ -e "$root/usr/bin/awk" || ! -e "$root/usr/bin/mawk" ]] || ln -s mawk "$root/usr/bin/awk"
chmod 1777 "$root/tmp" "$root/var/tmp"

"$(dirname "${BASH_SOURCE[0]}")/../../scripts/oci-archive" "$root" "$out" "$name" \
  "PATH=/usr/local/bin:/usr/bin:/bin" "LANG=C.UTF-8"
