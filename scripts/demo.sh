#!/usr/bin/env bash
# devlet's standalone demo: a simulated node, no cluster, everything through the real sockets.
#
#   scripts/demo.sh            install deps, build what it needs in build-demo/, then run
#   scripts/demo.sh --no-build --build-dir DIR [--check] [--keep]
#
# 1. a simulated node: the 2-socket, 8-GPU, 2-NIC hwloc XML from devices/tests/data plus a fake
#    sysfs tree built by devlet-simnode;
# 2. devlet-node --manifests DIR publishes the node's ResourceSlices into DIR;
# 3. devlet-alloc allocates examples/node/claims/training.yaml against those slices (when
#    devlet-alloc is not built, the hand-written result in examples/node/allocated/ is used);
#    devlet-node-demo bind reserves the claim for the pod (the scheduler's part);
# 4. devlet-node-demo run plays the kubelet (registration, NodePrepareResources over the DRA
#    socket) and the container runtime (NRI: RunPodSandbox, CreateContainer) and prints what the
#    container got: CDI devices and what they resolve to, cpuset aligned with the devices' NUMA node;
#    then stops the pod and unprepares the claim;
# 5. devlet-node stops on SIGTERM and removes its sockets.
# Exits 0 only if every step worked. --check also asserts the expected results (for ctest).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-demo"
DO_BUILD=1
CHECK=0
KEEP=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) DO_BUILD=0 ;;
    --build-dir) BUILD="$2"; shift ;;
    --check) CHECK=1 ;;
    --keep) KEEP=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

say() { printf '\n\033[1m### %s\033[0m\n' "$*"; }
fail() { echo "DEMO FAILED: $*" >&2; exit 1; }

MODULES='common;kube;kube/client;cdi;state;devices;dra-kubelet;nri-plugin;node;cmd/devlet-node;allocator/cel;allocator;cmd/devlet-alloc'
if [[ $DO_BUILD == 1 ]]; then
  bash "$ROOT/scripts/install-deps.sh"
  say "Building devlet-node, devlet-node-demo, devlet-simnode and devlet-alloc in $BUILD"
  if [[ ! -f "$BUILD/build.ninja" ]] || ! ninja -C "$BUILD" -t targets all 2>/dev/null | grep -q '^devlet-node-demo:'; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DDEVLET_ONLY_MODULES="$MODULES" \
      -DDEVLET_BUILD_TESTS=OFF -DDEVLET_BUILD_BENCHMARKS=OFF -DDEVLET_BUILD_INTEGRATION=OFF
  fi
  targets=(devlet-node devlet-node-demo devlet-simnode)
  if ninja -C "$BUILD" -t targets all 2>/dev/null | grep -q '^devlet-alloc:'; then
    targets+=(devlet-alloc)
  fi
  ninja -C "$BUILD" "${targets[@]}"
fi

find_bin() { find "$BUILD" -type f -name "$1" -perm -u+x 2>/dev/null | head -1; }
NODE_BIN="$(find_bin devlet-node)"
DEMO_BIN="$(find_bin devlet-node-demo)"
SIM_BIN="$(find_bin devlet-simnode)"
ALLOC_BIN="${DEVLET_ALLOC:-$(find_bin devlet-alloc)}"  # DEVLET_ALLOC: use another build's binary
[[ -n "$NODE_BIN" && -n "$DEMO_BIN" && -n "$SIM_BIN" ]] || fail "binaries not found in $BUILD"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/devlet-demo.XXXXXX")"
NODE_PID=""
cleanup() {
  if [[ -n "$NODE_PID" ]] && kill -0 "$NODE_PID" 2>/dev/null; then kill -TERM "$NODE_PID" || true; wait "$NODE_PID" || true; fi
  if [[ $KEEP == 1 ]]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

NODE=sim-node-1
DRIVER=devlet.io
MANIFESTS="$WORK/manifests"
mkdir -p "$MANIFESTS" "$WORK/cdi"
cp "$ROOT"/examples/node/manifests/*.yaml "$MANIFESTS/"

say "1. Simulated node: $ROOT/devices/tests/data/dgx-2s-8gpu-2nic.xml + fake sysfs"
"$SIM_BIN" "$WORK/sys" >/dev/null
echo "sysfs tree in $WORK/sys"

say "2. devlet-node --manifests $MANIFESTS"
"$NODE_BIN" --node-name "$NODE" --driver-name "$DRIVER" --manifests "$MANIFESTS" \
  --topology-xml "$ROOT/devices/tests/data/dgx-2s-8gpu-2nic.xml" --sysfs-root "$WORK/sys" \
  --cdi-root "$WORK/cdi" --kubelet-registrar-directory-path "$WORK/plugins_registry" \
  --kubelet-plugins-directory-path "$WORK/plugins" --nri-socket "$WORK/nri.sock" \
  --healthcheck-port 0 -v 1 >"$WORK/devlet-node.log" 2>&1 &
NODE_PID=$!
for _ in $(seq 1 300); do
  [[ -S "$WORK/plugins_registry/$DRIVER-reg.sock" ]] && break
  kill -0 "$NODE_PID" 2>/dev/null || { cat "$WORK/devlet-node.log"; fail "devlet-node exited"; }
  sleep 0.1
done
[[ -S "$WORK/plugins_registry/$DRIVER-reg.sock" ]] || { cat "$WORK/devlet-node.log"; fail "no registration socket"; }
ls "$MANIFESTS"/resourceslice-*.json >/dev/null 2>&1 || fail "no ResourceSlice written"
"$DEMO_BIN" slices --manifests "$MANIFESTS" --driver "$DRIVER"

say "3. Allocation of examples/node/claims/training.yaml on $NODE"
if [[ -n "$ALLOC_BIN" ]]; then
  args=()
  for f in "$MANIFESTS"/device-classes.yaml "$MANIFESTS"/resourceslice-*.json; do args+=(-f "$f"); done
  "$ALLOC_BIN" "${args[@]}" -f "$ROOT/examples/node/claims/training.yaml" --node "$NODE" \
    >"$WORK/allocated.json" || fail "devlet-alloc could not allocate the claim"
  echo "devlet-alloc allocated:"
else
  echo "devlet-alloc is not built: using the hand-written allocation examples/node/allocated/training.json"
  cp "$ROOT/examples/node/allocated/training.json" "$WORK/allocated.json"
fi
grep -oE '"(request|device)": *"[^"]*"' "$WORK/allocated.json" | paste - - | sed 's/^/    /'
"$DEMO_BIN" bind --manifests "$MANIFESTS" --allocated "$WORK/allocated.json" --pod ml/training

say "4. The kubelet and the runtime for pod ml/training"
"$DEMO_BIN" run --manifests "$MANIFESTS" --pod ml/training --driver "$DRIVER" \
  --registrar-dir "$WORK/plugins_registry" --nri-socket "$WORK/nri.sock" --cdi-root "$WORK/cdi" \
  --report "$WORK/report.json" || { echo "--- devlet-node log"; cat "$WORK/devlet-node.log"; fail "kubelet/runtime flow"; }

say "5. SIGTERM: graceful shutdown"
kill -TERM "$NODE_PID"
rc=0; wait "$NODE_PID" || rc=$?
NODE_PID=""
[[ $rc == 0 ]] || { cat "$WORK/devlet-node.log"; fail "devlet-node exited with $rc"; }
[[ ! -e "$WORK/plugins_registry/$DRIVER-reg.sock" ]] || fail "registration socket left behind"
[[ ! -e "$WORK/plugins/$DRIVER/dra.sock" ]] || fail "DRA socket left behind"
grep -E 'Stopping|Stopped' "$WORK/devlet-node.log" | sed 's/^/    /' || true
echo "devlet-node exited 0; sockets removed"

if [[ $CHECK == 1 ]]; then
  say "Checks"
  grep -q '"failures": 0' "$WORK/report.json" || fail "report has failures"
  grep -q '"CDI_devices"' "$WORK/report.json" || fail "no CDI devices in the adjustment"
  # gpu-0, gpu-1 and nic-0 sit on NUMA node 0 of the simulated machine: CPUs 0-7 and 16-23.
  grep -q '"cpus": "0-7,16-23"' "$WORK/report.json" || fail "cpuset not aligned with NUMA node 0"
  grep -q '"mems": "0"' "$WORK/report.json" || fail "cpuset.mems not NUMA node 0"
  grep -q '/dev/dri/card1' "$WORK/report.json" || fail "gpu-0's device node is not in the CDI edits"
  grep -q 'dra-device-attributes/resourceclaims/training/gpus/devlet.io-metadata.json' \
    "$WORK/report.json" || fail "no device-metadata mount"
  [[ $(ls "$MANIFESTS"/resourceslice-*.json | wc -l) == 1 ]] || fail "expected one ResourceSlice"
  grep -q '"name": "cpu-numa1"' "$MANIFESTS"/resourceslice-*.json || fail "CPU devices not published"
  grep -q '"cdiSpecsAfterUnprepare": \[\]' "$WORK/report.json" || fail "CDI specs left after unprepare"
  echo "all checks passed"
fi

say "Summary"
echo "slices published: $(ls "$MANIFESTS"/resourceslice-*.json | wc -l) file(s) in the manifest directory"
echo "claim ml/training allocated, prepared through the DRA socket, container adjusted through NRI,"
echo "unprepared again; devlet-node stopped cleanly. Report: report.json (use --keep to look at $WORK)"
echo "DEMO OK"
