#!/usr/bin/env bash
# healthcheck_address_test.sh NODE SIMNODE TOPOLOGY_XML
#
# --healthcheck-address through the binary: devlet-node standalone on the simulated node serves
# /healthz and /metrics on the address it is given (127.0.0.2: a loopback address that is not the
# default, so that a server still bound to 127.0.0.1 fails the test) and not on 127.0.0.1; "::"
# serves IPv4 clients too (where the kernel has IPv6); the default stays 127.0.0.1; a host name or
# garbage is refused with exit code 2 before anything starts.
set -euo pipefail
node=$1 simnode=$2 topology=$3

dir=$(mktemp -d "${TMPDIR:-/tmp}/devlet-health-addr.XXXXXX")
pid=
stop() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  fi
  pid=
}
trap 'stop; rm -rf "$dir"' EXIT
"$simnode" "$dir/sys" >/dev/null

# start ARGS...: devlet-node standalone in a fresh state directory; sets pid and port (the port
# it logged: --healthcheck-port 0 picks a free one).
start() {
  rm -rf "$dir/run" && mkdir -p "$dir/run/manifests" "$dir/run/cdi" "$dir/run/reg" "$dir/run/plugins"
  # The log exists before the poll below reads it: the background child may not have opened its
  # redirection yet, and a failing sed inside $(...) ends the script under set -e.
  : >"$dir/log"
  "$node" --node-name sim-node-1 --manifests "$dir/run/manifests" --topology-xml "$topology" \
    --sysfs-root "$dir/sys" --cdi-root "$dir/run/cdi" \
    --kubelet-registrar-directory-path "$dir/run/reg" \
    --kubelet-plugins-directory-path "$dir/run/plugins" --nri-socket "" --healthcheck-port 0 \
    "$@" >"$dir/log" 2>&1 &
  pid=$!
  port=
  for ((i = 0; i < 100; i++)); do
    port=$(sed -n 's/.*"Health endpoint serving".* port=\([0-9]*\).*/\1/p' "$dir/log")
    [[ -n $port ]] && return 0
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "FAIL: no health endpoint logged ($*):"
  cat "$dir/log"
  exit 1
}

# get URL: the HTTP status code, 000 when the connection is refused.
get() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$1" || true; }

expect() {  # expect WHAT WANT GOT
  if [[ $2 != "$3" ]]; then
    echo "FAIL: $1: want $2, got $3"
    cat "$dir/log"
    exit 1
  fi
  echo "ok: $1 -> $3"
}

start --healthcheck-address 127.0.0.2
grep -q 'address="127.0.0.2"' "$dir/log" || { echo "FAIL: address not logged"; cat "$dir/log"; exit 1; }
expect "127.0.0.2 /healthz" 200 "$(get "http://127.0.0.2:$port/healthz")"
expect "127.0.0.2 /metrics" 200 "$(get "http://127.0.0.2:$port/metrics")"
expect "127.0.0.1 refused" 000 "$(get "http://127.0.0.1:$port/healthz")"
stop

# Also read from the environment, as every flag is (the chart sets flags; a systemd unit may not).
HEALTHCHECK_ADDRESS=127.0.0.3 start
expect "HEALTHCHECK_ADDRESS=127.0.0.3" 200 "$(get "http://127.0.0.3:$port/healthz")"
stop

start
expect "default 127.0.0.1" 200 "$(get "http://127.0.0.1:$port/healthz")"
expect "default not 127.0.0.2" 000 "$(get "http://127.0.0.2:$port/healthz")"
stop

if [[ -e /proc/net/if_inet6 ]]; then
  start --healthcheck-address '::'
  expect ":: serves IPv4" 200 "$(get "http://127.0.0.4:$port/healthz")"
  expect ":: serves IPv6" 200 "$(get "http://[::1]:$port/healthz")"
  stop
else
  echo "skip: no IPv6 in this kernel"
fi

for bad in localhost 300.1.1.1 ""; do
  rc=0
  "$node" --node-name sim-node-1 --manifests "$dir/none" --healthcheck-port 0 \
    --healthcheck-address "$bad" >"$dir/log" 2>&1 || rc=$?
  expect "--healthcheck-address '$bad' exit code" 2 "$rc"
  grep -q "Bad --healthcheck-address" "$dir/log" || { echo "FAIL: no message"; cat "$dir/log"; exit 1; }
done
echo "healthcheck address: all checks passed"
