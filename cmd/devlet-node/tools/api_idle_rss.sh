#!/usr/bin/env bash
# api_idle_rss.sh NODE SIMNODE TOPOLOGY_XML LIMIT_KB [SECONDS]
#
# Issue 5's idle RSS target in API server mode: run under integration/apiserver's runner
# (apiserver-runner -- api_idle_rss.sh ...), it creates the Node, starts devlet-node on the
# simulated 8-GPU node with --kubeconfig (the bearer-token kubeconfig, then the client-certificate
# one; NRI and the health port off), checks that its ResourceSlice reached the API server and
# fails if VmRSS SECONDS (default 15) after the registration socket appears is LIMIT_KB or more.
set -euo pipefail
node=$1 simnode=$2 topology=$3 limit_kb=$4 settle=${5:-15}
: "${DEVLET_TEST_KUBECONFIG:?run under apiserver-runner}" "${DEVLET_TEST_APISERVER:?}"

dir=$(mktemp -d "${TMPDIR:-/tmp}/devlet-api-rss.XXXXXX")
pid=
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
"$simnode" "$dir/sys" >/dev/null
grep -o 'certificate-authority-data: .*' "$DEVLET_TEST_KUBECONFIG" | cut -d' ' -f2 |
  base64 -d >"$dir/ca.crt"

# api METHOD PATH [BODY]: one request with the runner's bearer token; prints the body.
api() {
  python3 - "$@" <<'PY'
import os, ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile=os.environ["CA"])
req = urllib.request.Request(os.environ["DEVLET_TEST_APISERVER"] + sys.argv[2],
                             method=sys.argv[1], data=(sys.argv[3].encode() if len(sys.argv) > 3
                                                       else None),
                             headers={"Authorization": "Bearer devlet-test-token",
                                      "Content-Type": "application/json"})
print(urllib.request.urlopen(req, context=ctx).read().decode())
PY
}
export CA=$dir/ca.crt
api POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"sim-node-1"}}' \
  >/dev/null

status=0
for kubeconfig in "$DEVLET_TEST_KUBECONFIG" "${DEVLET_TEST_KUBECONFIG_CERT:-}"; do
  [[ -n $kubeconfig ]] || continue
  rm -rf "$dir/cdi" "$dir/reg" "$dir/plugins"
  mkdir -p "$dir/cdi" "$dir/reg" "$dir/plugins"
  "$node" --node-name sim-node-1 --kubeconfig "$kubeconfig" --topology-xml "$topology" \
    --sysfs-root "$dir/sys" --cdi-root "$dir/cdi" --kubelet-registrar-directory-path "$dir/reg" \
    --kubelet-plugins-directory-path "$dir/plugins" --nri-socket "" --healthcheck-port 0 \
    >"$dir/log" 2>&1 &
  pid=$!
  for ((i = 0; i < 200; i++)); do
    compgen -G "$dir/reg/*.sock" >/dev/null && break
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "devlet-node exited during start-up:"
      cat "$dir/log"
      exit 1
    fi
    sleep 0.1
  done
  sleep "$settle"
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "devlet-node exited while idle:"
    cat "$dir/log"
    exit 1
  fi
  rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
  threads=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status")
  [[ -n ${SMAPS:-} ]] && cp "/proc/$pid/smaps" "$SMAPS.$(basename "$kubeconfig")"
  slices=$(api GET /apis/resource.k8s.io/v1/resourceslices | grep -o '"nodeName":"sim-node-1"' |
           wc -l)
  echo "devlet-node API server mode ($(basename "$kubeconfig")): idle VmRSS ${rss_kb} kB" \
       "(${threads} threads) after ${settle} s, ${slices} ResourceSlice(s); limit ${limit_kb} kB"
  if ((slices == 0)); then
    echo "FAIL: no ResourceSlice of sim-node-1 in the API server"
    cat "$dir/log"
    status=1
  fi
  if ((rss_kb >= limit_kb)); then
    echo "FAIL: idle RSS ${rss_kb} kB is not under ${limit_kb} kB (dra-kubelet/README.md, Idle RSS)"
    grep -E '^(Rss|Anonymous):' "/proc/$pid/smaps_rollup" || true
    status=1
  fi
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
done
exit $status
