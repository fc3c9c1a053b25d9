#!/usr/bin/env bash
# Builds an OCI image archive (an OCI image layout in a tar, as `podman save --format
# oci-archive` writes one) from this host's own Debian packages: each package's files and
# every shared library their programs and Python's extension modules load, in one gzip layer,
# with the merged-/usr links. No registry, no daemon: what the tests need of an image a user
# would build (tests/integration/images.test.mjs, the attack corpus's image run).
#   tests/images/host-image.sh OUT.tar NAME PACKAGE...
# The image's config: Env PATH and LANG, WorkingDir /, no User; NAME as its ref.name annotation.
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
mkdir -p "$root/usr/lib64" "$root/tmp" "$root/var/tmp"
[[ -e "$root/usr/lib64/ld-linux-x86-64.so.2" ]] || cp -L /lib64/ld-linux-x86-64.so.2 "$root/usr/lib64/"
for l in bin sbin lib lib64; do ln -sfn "usr/$l" "$root/$l"; done
# what Debian's alternatives would link (mawk for awk)
[[ -e "$root/usr/bin/awk" || ! -e "$root/usr/bin/mawk" ]] || ln -s mawk "$root/usr/bin/awk"
chmod 1777 "$root/tmp" "$root/var/tmp"

lay="$work/layout"
mkdir -p "$lay/blobs/sha256"
blob() { local h; h="$(sha256sum "$1" | cut -d' ' -f1)"; mv "$1" "$lay/blobs/sha256/$h"; echo "$h"; }
tar -C "$root" --numeric-owner --owner=0 --group=0 --sort=name -cf "$work/layer.tar" .
diff_id="$(sha256sum "$work/layer.tar" | cut -d' ' -f1)"
gzip -1 -n "$work/layer.tar"
lsize="$(stat -c %s "$work/layer.tar.gz")"
layer="$(blob "$work/layer.tar.gz")"
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/bin:/usr/bin:/bin","LANG=C.UTF-8"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
  "$diff_id" >"$work/config.json"
csize="$(stat -c %s "$work/config.json")"
config="$(blob "$work/config.json")"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
  "$config" "$csize" "$layer" "$lsize" >"$work/manifest.json"
msize="$(stat -c %s "$work/manifest.json")"
manifest="$(blob "$work/manifest.json")"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest" "$msize" "$name" >"$lay/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$lay/oci-layout"
tar -C "$lay" -cf "$out" oci-layout index.json blobs
echo "sha256:$manifest"
