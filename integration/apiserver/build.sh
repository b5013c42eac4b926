#!/bin/sh
# build.sh OUT: builds apiserver-runner (kube-apiserver v1.37.2 + embedded etcd) once per content
# of this Go module and caches the binary under ${DEVLET_CACHE:-$HOME/.cache/devlet}, keyed by a
# hash of go.mod, go.sum and *.go; OUT becomes a copy of the cached binary. The first build
# compiles all of kube-apiserver (long on a small machine); later builds are a copy.
set -eu
out=$1
here=$(cd "$(dirname "$0")" && pwd)
cache=${DEVLET_CACHE:-${HOME:-/tmp}/.cache/devlet}
key=$(cat "$here/go.mod" "$here/go.sum" "$here"/*.go | sha256sum | cut -c1-16)
cached=$cache/apiserver-runner-$key
if [ ! -x "$cached" ]; then
  mkdir -p "$cache"
  echo "build.sh: building $cached (kube-apiserver from k8s.io/kubernetes; slow the first time)"
  (cd "$here" && GOFLAGS=-mod=mod ${GO:-go} build -trimpath -o "$cached.tmp.$$" .)
  mv -f "$cached.tmp.$$" "$cached"
fi
cp -f "$cached" "$out.tmp.$$" && mv -f "$out.tmp.$$" "$out"
