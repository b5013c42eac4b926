#!/bin/sh
# go_cached_build.sh DIR NAME OUT: builds the Go module in DIR once per content (go.mod, go.sum,
# *.go) and caches the binary as NAME-<hash> under ${DEVLET_CACHE:-$HOME/.cache/devlet}; OUT
# becomes a copy of it. For the harnesses that compile kube-apiserver and kube-scheduler: long
# the first time on a small machine, a copy afterwards (also across build directories).
# $GO_LDFLAGS, when set, goes to go build -ldflags and into the cache key.
set -eu
dir=$1
name=$2
out=$3
cache=${DEVLET_CACHE:-${HOME:-/tmp}/.cache/devlet}
key=$( (cat "$dir/go.mod" "$dir/go.sum" "$dir"/*.go; printf '%s' "${GO_LDFLAGS:-}") | sha256sum |
  cut -c1-16)
cached=$cache/$name-$key
if [ ! -x "$cached" ]; then
  mkdir -p "$cache"
  echo "go_cached_build.sh: building $cached (slow the first time)"
  (cd "$dir" && GOFLAGS=-mod=mod ${GO:-go} build -trimpath -ldflags "${GO_LDFLAGS:-}" \
    -o "$cached.tmp.$$" .)
  mv -f "$cached.tmp.$$" "$cached"
fi
cp -f "$cached" "$out.tmp.$$" && mv -f "$out.tmp.$$" "$out"
