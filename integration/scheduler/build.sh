#!/bin/sh
# build.sh OUT: builds scheduler-e2e (kube-apiserver + kube-scheduler v1.37.2 + embedded etcd and
# the scenarios) once per content of this Go module and caches the binary under
# ${DEVLET_CACHE:-$HOME/.cache/devlet}, keyed by a hash of go.mod, go.sum and *.go; OUT becomes a
# copy of the cached binary. With Go's build cache warm from integration/apiserver only the
# scheduler's packages compile.
set -eu
out=$1
here=$(cd "$(dirname "$0")" && pwd)
cache=${DEVLET_CACHE:-${HOME:-/tmp}/.cache/devlet}
key=$(cat "$here/go.mod" "$here/go.sum" "$here"/*.go | sha256sum | cut -c1-16)
cached=$cache/scheduler-e2e-$key
if [ ! -x "$cached" ]; then
  mkdir -p "$cache"
  echo "build.sh: building $cached (kube-apiserver + kube-scheduler from k8s.io/kubernetes)"
  (cd "$here" && GOFLAGS=-mod=mod ${GO:-go} build -trimpath -o "$cached.tmp.$$" .)
  mv -f "$cached.tmp.$$" "$cached"
fi
cp -f "$cached" "$out.tmp.$$" && mv -f "$out.tmp.$$" "$out"
