#!/usr/bin/env bash
# idle_rss_test.sh NODE SIMNODE TOPOLOGY_XML LIMIT_KB [SECONDS]
#
# Issue 5's target, as a regression test: devlet-node in standalone mode on the simulated 8-GPU
# node (manifests, ResourceSlices, the DRA plugin and its registration; NRI and the health port
# off) must stay under LIMIT_KB of VmRSS once idle. The command is dra-kubelet/README.md's
# "Idle RSS" one: VmRSS SECONDS (default 15) after the registration socket appears.
set -euo pipefail
node=$1 simnode=$2 topology=$3 limit_kb=$4 settle=${5:-15}

dir=$(mktemp -d "${TMPDIR:-/tmp}/devlet-idle-rss.XXXXXX")
pid=
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/manifests" "$dir/cdi" "$dir/reg" "$dir/plugins"
"$simnode" "$dir/sys" >/dev/null

"$node" --node-name sim-node-1 --manifests "$dir/manifests" --topology-xml "$topology" \
  --sysfs-root "$dir/sys" --cdi-root "$dir/cdi" --kubelet-registrar-directory-path "$dir/reg" \
  --kubelet-plugins-directory-path "$dir/plugins" --nri-socket "" --healthcheck-port 0 \
  >"$dir/log" 2>&1 &
pid=$!

# Ready when the kubelet registration socket exists (the last thing start-up makes).
for ((i = 0; i < 100; i++)); do
  compgen -G "$dir/reg/*.sock" >/dev/null && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "devlet-node exited during start-up:"
    cat "$dir/log"
    exit 1
  fi
  sleep 0.1
done
if ! compgen -G "$dir/reg/*.sock" >/dev/null; then
  echo "no registration socket after 10 s"
  cat "$dir/log"
  exit 1
fi
sleep "$settle"
if ! kill -0 "$pid" 2>/dev/null; then
  echo "devlet-node exited while idle:"
  cat "$dir/log"
  exit 1
fi
rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
threads=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status")
echo "devlet-node idle VmRSS ${rss_kb} kB (${threads} threads) after ${settle} s;" \
     "limit ${limit_kb} kB"
if ((rss_kb >= limit_kb)); then
  echo "FAIL: idle RSS ${rss_kb} kB is not under ${limit_kb} kB (dra-kubelet/README.md, Idle RSS)"
  grep -E '^(Rss|Anonymous):' "/proc/$pid/smaps_rollup" || true
  exit 1
fi
