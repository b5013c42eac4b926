#!/usr/bin/env bash
# devlet in a real single-node Kubernetes cluster, with one command (as root):
#
#   scripts/cluster.sh                 build what it needs in build/, then run scenario 1
#   scripts/cluster.sh --hold          ... and keep the cluster up until ^C (kubeconfig printed)
#   scripts/cluster.sh --scenarios 1,9 --keep /tmp/devlet-cluster   (other scenarios, logs kept)
#
# integration/cluster's devlet-cluster starts etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and a kubelet (Kubernetes v1.37.2 from the Go module proxy, one binary) with
# containerd 2.4.2 (NRI and CDI on) on this machine, builds devlet's image
# (packaging/image/build-image.sh) and imports it into containerd, `helm install`s
# packaging/helm/devlet on the demo's simulated node (2 NUMA nodes, 8 GPUs, NICs with SR-IOV),
# then runs a pod with a ResourceClaimTemplate for one GPU and shows what its container got.
# Everything lives in a temporary directory and is removed, with what the kubelet changed on the
# host, when it ends. The first run compiles Kubernetes and containerd (long on a small machine);
# later runs take about a minute.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD=${DEVLET_BUILD_DIR:-$ROOT/build}
args=(--scenarios 1)
while (($#)); do
  case $1 in
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) args+=("$1") ;;
  esac
  shift
done
[[ $(id -u) == 0 ]] || { echo "cluster.sh: the kubelet and containerd need root" >&2; exit 1; }
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDEVLET_BUILD_TESTS=ON -DDEVLET_BUILD_INTEGRATION=ON >/dev/null
fi
cmake --build "$BUILD" --target devlet-cluster_go containerd_bins devlet-simnode helm_go \
  devlet-node devlet-extender devlet-alloc devlet-cel
exec "$BUILD/integration/cluster/devlet-cluster" test \
  --containerd-bin "$BUILD/integration/containerd/bin" \
  --simnode "$BUILD/node/devlet-simnode" \
  --topology "$ROOT/devices/tests/data/dgx-2s-8gpu-2nic.xml" \
  --profiles "$ROOT/examples/node/profiles.yaml" \
  --build-image "$ROOT/packaging/image/build-image.sh" --image-build-dir "$BUILD" \
  --chart "$ROOT/packaging/helm/devlet" --helm "$BUILD/integration/helm/helm" "${args[@]}"
