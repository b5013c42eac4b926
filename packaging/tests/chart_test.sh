#!/usr/bin/env bash
# chart_test.sh HELM CHART_DIR [DEVLET_NODE DEVLET_EXTENDER [KUBEVALID_ORACLE]]
#
# devlet's Helm chart through the real helm v4 (integration/helm): `helm lint` clean, `helm
# template` with the default values, the extender in score and in allocate mode, a simulated node
# on a cluster without a Service network, and the impossible values it must refuse with a message
# that names them. chart_check.py asserts the rendered objects; given the binaries, every flag
# the chart passes must be one devlet-node / devlet-extender accepts (their --help); given the
# kubevalid oracle, the DeviceClasses pass the API server's own validation (v1.37.2).
set -euo pipefail
helm=$1 chart=$2 node=${3:-} extender=${4:-} oracle=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
dir=$(mktemp -d "${TMPDIR:-/tmp}/devlet-chart.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# helm keeps caches and configuration under HOME/XDG dirs: keep them in the scratch directory.
export HELM_CACHE_HOME=$dir/cache HELM_CONFIG_HOME=$dir/config HELM_DATA_HOME=$dir/data

pass=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }

"$helm" version --short
"$helm" lint --strict "$chart" >"$dir/lint.log" 2>&1 || { cat "$dir/lint.log"; exit 1; }
ok "helm lint --strict (defaults)"
for mode in score allocate; do
  "$helm" lint --strict "$chart" --set extender.enabled=true --set extender.mode=$mode \
    >"$dir/lint.log" 2>&1 || { cat "$dir/lint.log"; exit 1; }
  ok "helm lint --strict (extender $mode)"
done

render() {  # render NAME ARGS...: helm template into $dir/NAME.yaml
  local name=$1
  shift
  "$helm" template devlet "$chart" --namespace devlet-system "$@" >"$dir/$name.yaml" 2>"$dir/$name.err" \
    || { cat "$dir/$name.err"; exit 1; }
}
render default
render score --set extender.enabled=true --set extender.mode=score
render allocate --set extender.enabled=true --set extender.mode=allocate --set extender.policy=spread
render tls --set extender.enabled=true --set extender.mode=allocate --set extender.replicas=2 \
  --set extender.tls.enabled=true --set extender.tls.secretName=devlet-extender-tls
render sim --set kubeletPlugin.hostNetwork=true --set extender.enabled=true \
  --set extender.hostNetwork=true --set extender.schedulerConfig.urlHost=127.0.0.1 \
  --set apiServer.host=127.0.0.1 --set apiServer.port=6443 \
  --set host.sysfsRoot=/tmp/sim/sys --set host.devRoot=/tmp/sim \
  --set host.topologyXml=/tmp/sim/topology.xml --set healthcheck.address=0.0.0.0 \
  --set nri.enabled=false --set driverName=gpu.example.com \
  --set deviceClasses.gpu.extendedResourceName=example.com/gpu \
  --set 'profiles[0].name=gpu' --set 'profiles[0].kind=gpu' --set logVerbosity=4 \
  --set featureGates.SomeGate=true
"$py" "$here/chart_check.py" "$dir" ${node:+--node "$node"} ${extender:+--extender "$extender"}
ok "rendered objects (chart_check.py)"

if [[ -n $oracle && ! -x $oracle ]]; then
  echo "skip: $oracle is not built (cmake --build build --target kubevalid-oracle_go)"
elif [[ -n $oracle ]]; then
  for name in default sim; do
    "$py" "$here/chart_check.py" --extract DeviceClass "$dir/$name.yaml" >"$dir/$name-classes.yaml"
    "$oracle" validate "$dir/$name-classes.yaml" >"$dir/$name-valid.txt"
    if grep -v '^== ' "$dir/$name-valid.txt" | grep . >/dev/null; then
      echo "FAIL: kube-apiserver validation of the $name DeviceClasses:"
      cat "$dir/$name-valid.txt"
      exit 1
    fi
    ok "$name DeviceClasses pass kube-apiserver v1.37.2 validation ($(grep -c '^== ' "$dir/$name-valid.txt") objects)"
  done
fi

# Impossible values: `helm template` fails, and the message names the value.
refuse() {  # refuse WANT ARGS...
  local want=$1
  shift
  if "$helm" template devlet "$chart" "$@" >"$dir/bad.yaml" 2>"$dir/bad.err"; then
    echo "FAIL: helm template $* succeeded; want an error containing: $want"
    exit 1
  fi
  if ! grep -qF -- "$want" "$dir/bad.err"; then
    echo "FAIL: helm template $*: want an error containing: $want; got:"
    cat "$dir/bad.err"
    exit 1
  fi
  ok "refused $* ($(grep -oF -- "$want" "$dir/bad.err" | head -1))"
}
refuse "driverName is required" --set driverName=
refuse "driverName is required" --set driverName=null
refuse 'driverName "Devlet_IO" is not a DNS subdomain' --set driverName=Devlet_IO
refuse 'extender.mode "bind" does not exist: use score' --set extender.enabled=true --set extender.mode=bind
refuse 'extender.mode "bind" does not exist' --set extender.mode=bind
refuse 'extender.policy "random" does not exist' --set extender.enabled=true --set extender.policy=random
refuse 'loggingFormat "xml" does not exist' --set loggingFormat=xml
refuse 'extender.tls.enabled needs extender.tls.secretName' --set extender.enabled=true \
  --set extender.tls.enabled=true
refuse 'apiServer.port is set without apiServer.host' --set apiServer.port=6443
refuse 'apiServer.port is required when apiServer.host is set' --set apiServer.host=10.0.0.1
# values.schema.json: helm names the value by its JSON pointer.
refuse "at '/healthcheck/port': maximum" --set healthcheck.port=70000
refuse "at '/profiles/0/kind': value must be one of 'gpu', 'nic', 'vf', 'cpu'" \
  --set 'profiles[0].name=x' --set 'profiles[0].kind=fpga'
refuse "at '/deviceClasses': additional properties 'fpga' not allowed" \
  --set deviceClasses.fpga.enabled=true
echo "chart: $pass passed, 0 failed"
