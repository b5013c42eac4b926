#!/usr/bin/env bash
# release_build.sh SOURCE_DIR BUILD_DIR GENERATOR [BUILD_TYPE]
#
# The build type a packager picks must build: configures a BUILD_TYPE tree (default Release, -O3;
# MinSizeRel is -Os) of the four packaged binaries (devlet-node, devlet-extender, devlet-alloc,
# devlet-cel) and builds them. GCC 12 at -O3 warns where -O2 does not (-Wrestrict on libstdc++'s
# inlined std::string code), and warnings are errors. ccache shares the objects between runs and
# checkouts (CCACHE_BASEDIR).
set -euo pipefail
src=$1 build=$2 generator=$3 type=${4:-Release}
modules='common;kube;kube/client;allocator/cel;allocator;allocator/extender;cdi;state;devices;dra-kubelet;nri-plugin;node;cmd/devlet-node;cmd/devlet-extender;cmd/devlet-alloc'
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$src} CCACHE_NOHASHDIR=true
start=$SECONDS
cmake -S "$src" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE="$type" \
  "-DDEVLET_ONLY_MODULES=$modules" -DDEVLET_BUILD_TESTS=OFF -DDEVLET_BUILD_BENCHMARKS=OFF \
  -DDEVLET_BUILD_INTEGRATION=OFF >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "${DEVLET_JOBS:-$(nproc)}" \
  --target devlet-node devlet-extender devlet-alloc devlet-cel
for binary in cmd/devlet-node/devlet-node cmd/devlet-extender/devlet-extender \
              cmd/devlet-alloc/devlet-alloc allocator/cel/devlet-cel; do
  [[ -x $build/$binary ]] || { echo "FAIL: $build/$binary was not built"; exit 1; }
done
grep -q "^CMAKE_BUILD_TYPE:STRING=$type\$" "$build/CMakeCache.txt"
[[ $("$build/allocator/cel/devlet-cel" '1 + 2') == "3"* ]] || { echo "FAIL: $type devlet-cel"; exit 1; }
echo "$type build of the four binaries: $((SECONDS - start)) s"
