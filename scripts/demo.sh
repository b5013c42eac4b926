#!/usr/bin/env bash
# devlet's standalone demo: a simulated node, no cluster, everything through the real sockets.
#
#   scripts/demo.sh            install deps, build what it needs in build-demo/, then run
#   scripts/demo.sh --no-build --build-dir DIR [--check] [--keep]
#
# 1. a simulated node: the 2-socket, 8-GPU, 2-NIC hwloc XML from devices/tests/data plus a fake
#    sysfs tree built by devlet-simnode (gpu 0000:b9:00.0 already on vfio-pci, for the VM; a third
#    NIC with SR-IOV, ens3f0np0), which keeps running as the node's kernel for sriov_numvfs;
# 2. devlet-node --manifests DIR --profiles examples/node/profiles.yaml publishes the node's
#    ResourceSlices into DIR;
# 3. devlet-alloc allocates, one pod after the other (each seeing the earlier allocations), the
#    claims in examples/node/claims/: training (2 GPUs + a NIC on one pcieRoot), nic-shared (20G
#    of a shared NIC's bandwidth + 2 CPUs and 4Gi on its NUMA node, consumable capacity) and
#    vm-gpu (a GPU passed through with vfio-pci for a KubeVirt-style VM) and sriov-vf (an SR-IOV
#    VF, created when it is prepared, for a container); devlet-node-demo bind
#    reserves each claim for its pod (the scheduler's part). Without devlet-alloc, only the
#    training pod runs, with the hand-written allocation in examples/node/allocated/;
# 4. devlet-node-demo run plays the kubelet (registration, NodePrepareResources over the DRA
#    socket) and the container runtime (NRI: RunPodSandbox, CreateContainer) and prints what each
#    container got: CDI devices and what they resolve to, mounts, env, the device-metadata file,
#    cpuset aligned with the devices' NUMA node, CPU quota and memory limit from DRA-allocated
#    CPUs; then stops the pods and unprepares the claims;
# 5. /metrics and /healthz of devlet-node are read; devlet-node stops on SIGTERM and removes its
#    sockets.
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
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
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
SIM_PID=""
cleanup() {
  if [[ -n "$NODE_PID" ]] && kill -0 "$NODE_PID" 2>/dev/null; then kill -TERM "$NODE_PID" || true; wait "$NODE_PID" || true; fi
  if [[ -n "$SIM_PID" ]] && kill -0 "$SIM_PID" 2>/dev/null; then kill -TERM "$SIM_PID" || true; wait "$SIM_PID" || true; fi
  if [[ $KEEP == 1 ]]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

NODE=sim-node-1
if [[ $CHECK == 1 ]] && ! command -v python3 >/dev/null; then
  fail "--check needs python3 (apt-get install python3)"
fi
DRIVER=devlet.io
MANIFESTS="$WORK/manifests"
mkdir -p "$MANIFESTS" "$WORK/cdi"
cp "$ROOT"/examples/node/manifests/*.yaml "$MANIFESTS/"

say "1. Simulated node: $ROOT/devices/tests/data/dgx-2s-8gpu-2nic.xml + fake sysfs"
"$SIM_BIN" "$WORK/sys" --vfio 0000:b9:00.0 --sriov-nic --serve >"$WORK/simnode.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 1 100); do grep -q '^serving' "$WORK/simnode.log" && break; sleep 0.1; done
grep -q '^serving' "$WORK/simnode.log" || { cat "$WORK/simnode.log"; fail "devlet-simnode did not start"; }
echo "sysfs tree in $WORK/sys (0000:b9:00.0 bound to vfio-pci; SR-IOV NIC 0000:3b:00.0 ens3f0np0);"
echo "devlet-simnode plays the kernel for sriov_numvfs writes"

say "2. devlet-node --manifests $MANIFESTS"
"$NODE_BIN" --node-name "$NODE" --driver-name "$DRIVER" --manifests "$MANIFESTS" \
  --topology-xml "$ROOT/devices/tests/data/dgx-2s-8gpu-2nic.xml" --sysfs-root "$WORK/sys" \
  --profiles "$ROOT/examples/node/profiles.yaml" \
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
# --healthcheck-port 0 took a free port; devlet-node logs which.
HEALTH_PORT=""
for _ in $(seq 1 50); do
  HEALTH_PORT="$(grep -o '"Health endpoint serving".*port=[0-9]*' "$WORK/devlet-node.log" | grep -o '[0-9]*$' | head -1 || true)"
  [[ -n "$HEALTH_PORT" ]] && break
  sleep 0.1
done

PODS=()
if [[ -n "$ALLOC_BIN" ]]; then
  # One pod at a time, as the scheduler does: each allocation sees the claims allocated before.
  allocated=()
  for item in "training ml/training" "nic-shared net/nic-shared" "vm ml-vm" "vf net/sriov-app"; do
    read -r claim pod <<<"$item"
    [[ $pod == ml-vm ]] && pod=vms/virt-launcher-vm-1
    say "3. Allocation of examples/node/claims/$claim.yaml on $NODE for pod $pod"
    args=()
    for f in "$MANIFESTS"/device-classes.yaml "$MANIFESTS"/resourceslice-*.json "${allocated[@]}"; do args+=(-f "$f"); done
    "$ALLOC_BIN" "${args[@]}" -f "$ROOT/examples/node/claims/$claim.yaml" --node "$NODE" \
      >"$WORK/allocated-$claim.json" || fail "devlet-alloc could not allocate claim $claim"
    echo "devlet-alloc allocated:"
    grep -oE '"(request|device)": *"[^"]*"' "$WORK/allocated-$claim.json" | paste - - | sed 's/^/    /'
    grep -A3 '"consumedCapacity"' "$WORK/allocated-$claim.json" | grep -oE '"[a-z]+": *"[^"]*"' \
      | sed 's/^/    consumed /' || true
    "$DEMO_BIN" bind --manifests "$MANIFESTS" --allocated "$WORK/allocated-$claim.json" --pod "$pod"
    allocated+=("$WORK/allocated-$claim.json")
    PODS+=(--pod "$pod")
  done
else
  say "3. Allocation of examples/node/claims/training.yaml on $NODE"
  echo "devlet-alloc is not built: using the hand-written allocation examples/node/allocated/training.json"
  echo "(the nic-shared and VM pods need devlet-alloc and are skipped)"
  cp "$ROOT/examples/node/allocated/training.json" "$WORK/allocated-training.json"
  grep -oE '"(request|device)": *"[^"]*"' "$WORK/allocated-training.json" | paste - - | sed 's/^/    /'
  "$DEMO_BIN" bind --manifests "$MANIFESTS" --allocated "$WORK/allocated-training.json" --pod ml/training
  PODS+=(--pod ml/training)
fi

say "4. The kubelet and the runtime for ${PODS[*]//--pod /}"
"$DEMO_BIN" run --manifests "$MANIFESTS" "${PODS[@]}" --driver "$DRIVER" \
  --registrar-dir "$WORK/plugins_registry" --nri-socket "$WORK/nri.sock" --cdi-root "$WORK/cdi" \
  --report "$WORK/report.json" || { echo "--- devlet-node log"; cat "$WORK/devlet-node.log"; fail "kubelet/runtime flow"; }
echo "devlet-simnode, the node's kernel, saw devlet-node create and remove the VFs:"
grep '^kernel:' "$WORK/simnode.log" | sed 's/^/    /' || true

say "5. devlet-node's health endpoint and metrics (127.0.0.1:$HEALTH_PORT)"
if [[ -z "$HEALTH_PORT" ]]; then
  fail "devlet-node did not log its health endpoint's port"
elif command -v curl >/dev/null; then
  # 503 is expected here: the demo's runtime closed its NRI connection, and a node agent whose
  # NRI plugin is disconnected reports itself unhealthy.
  code=$(curl -sS -o "$WORK/healthz.txt" -w '%{http_code}' "http://127.0.0.1:$HEALTH_PORT/healthz") || fail "/healthz"
  echo "    /healthz: HTTP $code $(cat "$WORK/healthz.txt") (the runtime has disconnected NRI)"
  curl -fsS "http://127.0.0.1:$HEALTH_PORT/metrics" >"$WORK/metrics.txt" || fail "/metrics"
  grep -E '^devlet_node_(device_(un)?prepare_total|devices|nri_events_total\{event="CreateContainer"|kubelet_registered|nri_connected|resourceslice_generation)' \
    "$WORK/metrics.txt" | sed 's/^/    /'
else
  echo "curl not found: skipped"
fi

say "6. SIGTERM: graceful shutdown"
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
  python3 - "$WORK/report.json" "$WORK" "$MANIFESTS" "${ALLOC_BIN:+alloc}" <<'PY' || fail "checks"
import glob, json, os, sys
report, work, manifests, alloc = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
def check(ok, what):
    if not ok:
        print("CHECK FAILED:", what); sys.exit(1)
check(report["failures"] == 0, "report has failures")
check(report["cdiSpecsAfterUnprepare"] == [], "CDI specs left after unprepare")
slices = [json.load(open(f)) for f in glob.glob(manifests + "/resourceslice-*.json")]
check(len(slices) == 1, "expected one ResourceSlice")
devices = {d["name"]: d for s in slices for d in s["spec"]["devices"]}
check("cpu-numa1" in devices and "vm-gpu-0" in devices and "shared-nic-0" in devices,
      "CPU, VM GPU and shared NIC devices published: %s" % sorted(devices))
train = report["pods"]["ml/training"]
got = sorted(d["device"] for d in train["prepared"]["ml/training"])
check(got == ["gpu-0", "gpu-1", "nic-0"], "training got gpu-0, gpu-1, nic-0 (one pcieRoot): %s" % got)
roots = {devices[d]["attributes"]["resource.kubernetes.io/pcieRoot"]["string"] for d in got}
check(len(roots) == 1, "training devices on one pcieRoot: %s" % roots)
c = train["containers"]["trainer"]
check("CDI_devices" in c["adjustment"], "no CDI devices in the trainer's adjustment")
# gpu-0, gpu-1 and nic-0 sit on NUMA node 0 of the simulated machine: CPUs 0-7 and 16-23.
check(c["cpus"] == "0-7,16-23" and c["mems"] == "0", "trainer cpuset not NUMA node 0: %s" % c["cpus"])
check("/dev/dri/card1" in json.dumps(c["cdiEdits"]), "gpu-0's device node is not in the CDI edits")
# Only the trainer names the claim: the init container and the sidecar get nothing from devlet.
for name in ("fetch-dataset", "log-shipper"):
    other = train["containers"][name]
    check(other["adjustment"] == {} and other["cpus"] == "" and "metadata" not in other,
          "%s names no claim but was adjusted: %s" % (name, other))
check(any(k.endswith("dra-device-attributes/resourceclaims/training/gpus/devlet.io-metadata.json")
          for k in c.get("metadata", {})), "no device-metadata mount for the trainer")
if alloc:
    nic = report["pods"]["net/nic-shared"]
    got = sorted(d["device"] for d in nic["prepared"]["net/nic-shared"])
    check(got == ["cpu-numa1", "shared-nic-0"], "nic-shared got %s" % got)
    c = nic["containers"]["packet-proc"]
    check(c["cpus"] == "8-15,24-31" and c["mems"] == "1", "packet-proc cpuset not NUMA node 1: %s" % c["cpus"])
    check(c.get("cpuQuota") == 200000 and c.get("cpuPeriod") == 100000,
          "2 DRA-allocated CPUs are not a 200000/100000 CFS quota: %s" % c)
    check(c.get("memoryLimit") == 4 << 30, "4Gi DRA-allocated memory is not the limit: %s" % c)
    vm = report["pods"]["vms/virt-launcher-vm-1"]
    got = [d["device"] for d in vm["prepared"]["vms/vm-gpu"]]
    check(got == ["vm-gpu-0"], "the VM got %s" % got)
    c = vm["containers"]["compute"]
    nodes = c["cdiEdits"].get("deviceNodes", [])
    check(any(n.startswith("/dev/vfio/") and n != "/dev/vfio/vfio" for n in nodes) and
          "/dev/vfio/vfio" in nodes, "the VM's CDI edits lack the vfio nodes: %s" % nodes)
    check(not any(n.startswith("/dev/dri/") for n in nodes), "a vfio GPU must not get DRM nodes")
    meta = json.dumps(c.get("metadata", {}))
    check('"0000:b9:00.0"' in meta and "resource.kubernetes.io/pciBusID" in meta,
          "the VM's device metadata lacks pciBusID 0000:b9:00.0: %s" % meta)
    vf = report["pods"]["net/sriov-app"]
    got = [d["device"] for d in vf["prepared"]["net/sriov-vf"]]
    check(got == ["vf-0-vf-0"], "the SR-IOV pod got %s" % got)
    meta = list(vf["containers"]["app"].get("metadata", {}).values())
    check(len(meta) == 1, "the SR-IOV pod has no device metadata: %s" % meta)
    dev = meta[0]["requests"][0]["devices"][0]
    check(dev["attributes"]["resource.kubernetes.io/pciBusID"]["string"] == "0000:3b:00.2",
          "the VF's pciBusID is not 0000:3b:00.2 (the first VF devlet created): %s" % dev)
    check(dev.get("networkData") == {"interfaceName": "ens3f0np0v0",
          "ips": [ip + ("/32" if "." in ip else "/128") for ip in vf["podIPs"]],
          "hardwareAddress": "02:00:00:00:00:00"}, "the VF's networkData: %s" % dev)
    check(meta[0]["metadata"]["generation"] == 2, "networkData did not bump the generation")
    sim = open(work + "/simnode.log").read()
    check("0000:3b:00.0/sriov_numvfs 0 -> 4" in sim and "0000:3b:00.0/sriov_numvfs 4 -> 0" in sim,
          "the VFs were not created at prepare and removed at unprepare: %s" % sim)
metrics = open(work + "/metrics.txt").read() if os.path.exists(work + "/metrics.txt") else ""
if metrics:
    check('devlet_node_device_prepare_total{result="success"}' in metrics, "no prepare metric")
    check("devlet_node_kubelet_registered 1" in metrics, "registration gauge not 1")
print("all checks passed")
PY
fi

say "Summary"
echo "slices published: $(ls "$MANIFESTS"/resourceslice-*.json | wc -l) file(s) in the manifest directory"
echo "pods ${PODS[*]//--pod /}: claims allocated, prepared through the DRA socket, containers adjusted"
echo "through NRI, unprepared again; devlet-node stopped cleanly. Report: report.json (use --keep to"
echo "look at $WORK)"
echo "DEMO OK"
