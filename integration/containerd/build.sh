#!/bin/sh
# build.sh OUTDIR: builds containerd, ctr and containerd-shim-runc-v2 (github.com/containerd/
# containerd/v2 at CONTAINERD_VERSION) and crictl (sigs.k8s.io/cri-tools at CRICTL_VERSION) with
# `go install module@version`, so each uses exactly the dependencies its release pins. The binaries
# are cached under ${DEVLET_CACHE:-$HOME/.cache/devlet}/containerd-<key>/, the key being a hash of
# this script (versions and build tags live here); OUTDIR gets copies. The first build compiles
# all of containerd (long on a small machine); later builds are copies.
set -eu
CONTAINERD_VERSION=v2.4.2
CRICTL_VERSION=v1.37.0
# btrfs/devmapper/zfs snapshotters need headers or tools we do not use; overlayfs and native suffice.
TAGS="no_btrfs no_devmapper no_zfs"
out=$1
here=$(cd "$(dirname "$0")" && pwd)
cache=${DEVLET_CACHE:-${HOME:-/tmp}/.cache/devlet}
key=$(cat "$here/build.sh" | sha256sum | cut -c1-16)
cached=$cache/containerd-$key
bins="containerd ctr containerd-shim-runc-v2 crictl"
if [ ! -x "$cached/crictl" ]; then
  mkdir -p "$cache"
  tmp=$cached.tmp.$$
  rm -rf "$tmp" && mkdir -p "$tmp"
  echo "build.sh: building containerd $CONTAINERD_VERSION and crictl $CRICTL_VERSION into $cached"
  # go install module@version ignores any go.mod around it; run from an empty directory anyway.
  (cd "$tmp" && GOBIN="$tmp" GOFLAGS=-buildvcs=false ${GO:-go} install -trimpath -tags "$TAGS" \
      github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION \
      github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION \
      github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION)
  (cd "$tmp" && GOBIN="$tmp" GOFLAGS=-buildvcs=false ${GO:-go} install -trimpath \
      sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION)
  rm -rf "$cached" && mv "$tmp" "$cached"
fi
mkdir -p "$out"
for b in $bins; do
  cp -f "$cached/$b" "$out/$b.tmp.$$" && mv -f "$out/$b.tmp.$$" "$out/$b"
done
