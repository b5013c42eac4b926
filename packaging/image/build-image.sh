#!/usr/bin/env bash
# build-image.sh: devlet's OCI image, from this checkout and no base image.
#
#   packaging/image/build-image.sh [--build-dir DIR] [--out FILE] [--name REF] [--rootfs DIR]
#                                  [--no-build]
#
# The image holds devlet-node (the entrypoint), devlet-extender, devlet-alloc and devlet-cel from
# an optimized build (DIR, default build/: RelWithDebInfo as scripts/test.sh builds it, or
# Release; the four targets are built there first), stripped, plus exactly the shared objects
# they load (their ldd closure and the ELF interpreter), the system CA bundle (kubeconfigs whose
# API server has a public certificate), /etc/passwd and /etc/group with root and nonroot (65532,
# the extender's user), /etc/nsswitch.conf, /etc/hosts and /tmp. umoci writes the image and skopeo
# the OCI archive (both from Debian: scripts/install-deps.sh), named REF (default
# docker.io/library/devlet:<version>, what the kubelet asks the runtime for when a pod says
# image: devlet:<version>). Load it into containerd with
#
#   ctr -n k8s.io images import build/devlet-image.tar
#
# Prints the image's contents and sizes. --rootfs keeps the assembled root filesystem there;
# --no-build takes the binaries as they are (the packaging test, after the build).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=$src/build
out=$src/build/devlet-image.tar
version=$(sed -n 's/^project(devlet VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
name=docker.io/library/devlet:$version
keep_rootfs=
build=1
while (($#)); do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --rootfs) keep_rootfs=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "build-image.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in umoci skopeo ldd strip; do
  command -v $tool >/dev/null || { echo "build-image.sh: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
[[ -f $build_dir/CMakeCache.txt ]] ||
  { echo "build-image.sh: no build in $build_dir (cmake -S . -B build -G Ninja)" >&2; exit 1; }
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build_dir/CMakeCache.txt")
[[ $build_type =~ ^(Release|RelWithDebInfo|MinSizeRel)$ ]] ||
  { echo "build-image.sh: $build_dir is a '$build_type' build; ship an optimized one" >&2; exit 1; }
if grep -q '^DEVLET_SANITIZE:STRING=.\+' "$build_dir/CMakeCache.txt"; then
  echo "build-image.sh: $build_dir is a sanitizer build" >&2
  exit 1
fi
if ((build)); then
  cmake --build "$build_dir" --target devlet-node devlet-extender devlet-alloc devlet-cel
fi
binaries=(
  "$build_dir/cmd/devlet-node/devlet-node"
  "$build_dir/cmd/devlet-extender/devlet-extender"
  "$build_dir/cmd/devlet-alloc/devlet-alloc"
  "$build_dir/allocator/cel/devlet-cel"
)

work=$(mktemp -d "${TMPDIR:-/tmp}/devlet-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs=${keep_rootfs:-$work/rootfs}
rm -rf "$rootfs"
mkdir -p "$rootfs/usr/bin" "$rootfs/etc/ssl/certs" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"

# The binaries, stripped of symbols and debug sections.
for binary in "${binaries[@]}"; do
  [[ -x $binary ]] || { echo "build-image.sh: $binary is missing" >&2; exit 1; }
  strip --strip-unneeded -o "$rootfs/usr/bin/$(basename "$binary")" "$binary"
done

# Their shared objects, at the paths the dynamic loader resolves them to on this (the build)
# machine, and the loader itself at its PT_INTERP path. Copies of the files, not symlinks.
declare -A libs=()
for binary in "${binaries[@]}"; do
  while read -r path; do libs[$path]=1; done < <(
    ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
done
for lib in "${!libs[@]}"; do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done

# What the programs read at run time besides their flags.
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
fi
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
  >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$rootfs/etc/hosts"

# Every program must find every shared object inside the root filesystem alone.
for binary in "$rootfs"/usr/bin/*; do
  interp=$(readelf -l "$binary" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  [[ -x $rootfs$interp ]] || { echo "build-image.sh: loader $interp missing" >&2; exit 1; }
  missing=$("$rootfs$interp" --library-path "$(find "$rootfs" -name '*.so*' -printf '%h\n' | sort -u | paste -sd:)" \
    --list "$binary" 2>&1 | grep -c 'not found' || true)
  ((missing == 0)) || { echo "build-image.sh: $binary misses shared objects" >&2; exit 1; }
done

# The image: one layer, devlet-node as the entrypoint.
layout=$work/layout
umoci init --layout "$layout"
umoci new --image "$layout:devlet"
# (unpack + repack: Debian's umoci 0.4.7 `insert` of a whole tree at / writes a truncated layer.)
rootless=()
[[ $(id -u) -eq 0 ]] || rootless=(--rootless)
umoci unpack "${rootless[@]}" --image "$layout:devlet" "$work/bundle" >/dev/null
cp -a "$rootfs/." "$work/bundle/rootfs/"
umoci repack "${rootless[@]}" --image "$layout:devlet" "$work/bundle"
umoci config --image "$layout:devlet" --os linux --architecture amd64 \
  --author "devlet" --created "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --config.entrypoint /usr/bin/devlet-node --config.workingdir / \
  --config.env PATH=/usr/bin:/bin \
  --config.label org.opencontainers.image.title=devlet \
  --config.label org.opencontainers.image.version="$version" \
  --config.label org.opencontainers.image.description="devlet-node, devlet-extender, devlet-alloc, devlet-cel"
umoci gc --layout "$layout"
mkdir -p "$(dirname "$out")"
rm -f "$out"
skopeo copy --quiet "oci:$layout:devlet" "oci-archive:$out:$name"

bytes=$(find "$rootfs" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
echo "== $out: $name"
echo "uncompressed: $bytes bytes ($(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}') MiB)," \
     "archive: $(stat -c %s "$out") bytes"
(cd "$rootfs" && find . -type f -printf '%s\t%p\n' | sort -k2 | awk -F'\t' '{printf "%10d  %s\n", $1, substr($2, 2)}')
