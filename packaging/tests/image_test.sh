#!/usr/bin/env bash
# image_test.sh BUILD_DIR OUT_DIR
#
# packaging/image/build-image.sh from this (optimized) build: the OCI archive is one skopeo reads
# (as containerd's import does: index.json naming docker.io/library/devlet:<version>, one
# manifest, one layer), its config runs devlet-node as the entrypoint, its layer holds the four
# binaries and nothing but what they need, it is at most 60 MiB uncompressed, and (as root) every
# binary runs chrooted into the image's root filesystem alone.
set -euo pipefail
build_dir=$1 out_dir=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
rm -rf "$out_dir"
mkdir -p "$out_dir"
archive=$out_dir/devlet-image.tar
rootfs=$out_dir/rootfs
start=$SECONDS
bash "$src/packaging/image/build-image.sh" --build-dir "$build_dir" --no-build \
  --out "$archive" --rootfs "$rootfs" | tee "$out_dir/build.log"
echo "image built in $((SECONDS - start)) s"
version=$(sed -n 's/^project(devlet VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
pass=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
fail() { echo "FAIL: $*"; exit 1; }

skopeo inspect --config "oci-archive:$archive" >"$out_dir/config.json"
skopeo inspect --raw "oci-archive:$archive" >"$out_dir/manifest.json"
tar -xOf "$archive" index.json >"$out_dir/index.json"
"$py" - "$out_dir" "$version" <<'PY' || exit 1
import json, sys
d, version = sys.argv[1], sys.argv[2]
config = json.load(open(f"{d}/config.json"))
manifest = json.load(open(f"{d}/manifest.json"))
index = json.load(open(f"{d}/index.json"))
errors = []
if config["config"].get("Entrypoint") != ["/usr/bin/devlet-node"]:
    errors.append(f"entrypoint {config['config'].get('Entrypoint')}")
if (config["os"], config["architecture"]) != ("linux", "amd64"):
    errors.append("platform")
if "PATH=/usr/bin:/bin" not in config["config"].get("Env", []):
    errors.append("PATH")
if len(manifest["layers"]) != 1:
    errors.append(f"{len(manifest['layers'])} layers")
refs = [m.get("annotations", {}).get("org.opencontainers.image.ref.name") for m in index["manifests"]]
if refs != [f"docker.io/library/devlet:{version}"]:
    errors.append(f"index names {refs}")
for e in errors:
    print("FAIL:", e)
sys.exit(1 if errors else 0)
PY
ok "archive: index names docker.io/library/devlet:$version, one layer, entrypoint devlet-node"

# The layer's files: the binaries, shared objects, and the few /etc files; nothing else.
layer=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"][0]["digest"].split(":")[1])' "$out_dir/manifest.json")
tar -xOf "$archive" "blobs/sha256/$layer" >"$out_dir/layer.tar.gz"
tar -tzvf "$out_dir/layer.tar.gz" >"$out_dir/layer.txt" 2>/dev/null
for binary in devlet-node devlet-extender devlet-alloc devlet-cel; do
  grep -q " usr/bin/$binary\$" "$out_dir/layer.txt" || fail "no usr/bin/$binary in the layer"
done
unexpected=$(awk '$1 !~ /^d/ {print $NF}' "$out_dir/layer.txt" | grep -vE \
  '^(usr/bin/devlet-(node|extender|alloc|cel)|(usr/)?lib(64|/x86_64-linux-gnu)?/[^/]+\.so[.0-9]*|etc/(passwd|group|nsswitch.conf|hosts|ssl/certs/ca-certificates.crt))$' || true)
[[ -z $unexpected ]] || fail "unexpected files in the image: $unexpected"
ok "layer: the four binaries, $(grep -c '\.so' "$out_dir/layer.txt") shared objects, /etc basics"
if awk '$1 !~ /^d/ && $2 != "0/0" {bad = 1} END {exit !bad}' "$out_dir/layer.txt"; then
  fail "files not owned by root in the layer"
fi
for binary in "$rootfs"/usr/bin/*; do
  if readelf -S "$binary" | grep -E '\.(debug_info|symtab)' >/dev/null; then fail "$binary is not stripped"; fi
done
ok "binaries stripped, files owned by root"

bytes=$(find "$rootfs" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
limit=$((60 * 1024 * 1024))
((bytes <= limit)) || fail "uncompressed size $bytes bytes > 60 MiB"
ok "uncompressed size $bytes bytes <= $limit (archive $(stat -c %s "$archive") bytes)"

if [[ $(id -u) -eq 0 ]]; then
  [[ $(chroot "$rootfs" /usr/bin/devlet-cel '1 + 2') == "3"* ]] || fail "devlet-cel in the image"
  chroot "$rootfs" /usr/bin/devlet-node --help | grep -- --healthcheck-address >/dev/null ||
    fail "devlet-node --help in the image"
  chroot "$rootfs" /usr/bin/devlet-extender --help | grep -- --mode >/dev/null ||
    fail "devlet-extender --help in the image"
  chroot "$rootfs" /usr/bin/devlet-alloc --help >/dev/null || fail "devlet-alloc --help in the image"
  rc=0
  chroot "$rootfs" /usr/bin/devlet-node --node-name n --healthcheck-address nowhere >/dev/null 2>&1 || rc=$?
  ((rc == 2)) || fail "devlet-node in the image: bad flag exit code $rc, want 2"
  ok "the four binaries run chrooted into the image's root filesystem"
else
  echo "skip: chroot runs need root"
fi
echo "image: $pass passed, 0 failed"
