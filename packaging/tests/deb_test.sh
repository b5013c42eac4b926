#!/usr/bin/env bash
# deb_test.sh BUILD_DIR
#
# The .deb (CPack, packaging/CMakeLists.txt) from this (optimized) build, binaries stripped: its control data (name,
# version, Depends from dpkg-shlibdeps, conffiles) and contents (dpkg-deb -I / -c), an install into
# a scratch root with dpkg --root (files, modes, stripped binaries that run), the unit through
# `systemd-analyze verify` where systemd-analyze exists, and removal keeping the conffiles.
set -euo pipefail
build_dir=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
version=$(sed -n 's/^project(devlet VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
pass=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
fail() { echo "FAIL: $*"; exit 1; }

start=$SECONDS
rm -rf "$build_dir/packages"
(cd "$build_dir" && cpack -G DEB --config CPackConfig.cmake) >"$build_dir/cpack.log" 2>&1 ||
  { cat "$build_dir/cpack.log"; exit 1; }
deb=$(ls "$build_dir"/packages/devlet_"$version"_*.deb)
echo "built $deb ($(stat -c %s "$deb") bytes) in $((SECONDS - start)) s"

dpkg-deb -I "$deb" >"$build_dir/deb-info.txt"
cat "$build_dir/deb-info.txt"
field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == devlet && $(field Version) == "$version" ]] || fail "package name/version"
[[ $(field Architecture) == "$(dpkg --print-architecture)" ]] || fail "architecture"
depends=$(field Depends)
for lib in libc6 libstdc++6; do
  [[ $depends == *"$lib"* ]] || fail "Depends lacks $lib: $depends"
done
[[ -n $(field Maintainer) && -n $(field Description) ]] || fail "Maintainer/Description"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles >"$build_dir/conffiles.txt"
diff <(sort "$build_dir/conffiles.txt") <(printf '/etc/default/devlet-node\n/etc/devlet/profiles.yaml\n') ||
  fail "conffiles"
ok "control: devlet $version, Depends: $depends, 2 conffiles"

dpkg-deb -c "$deb" | awk '{print $1, $NF}' >"$build_dir/deb-contents.txt"
want=(
  "-rwxr-xr-x ./usr/bin/devlet-node" "-rwxr-xr-x ./usr/bin/devlet-extender"
  "-rwxr-xr-x ./usr/bin/devlet-alloc" "-rwxr-xr-x ./usr/bin/devlet-cel"
  "-rw-r--r-- ./usr/lib/systemd/system/devlet-node.service"
  "-rw-r--r-- ./etc/default/devlet-node" "-rw-r--r-- ./etc/devlet/profiles.yaml"
  "-rw-r--r-- ./usr/share/doc/devlet/README.md" "drwxr-xr-x ./var/lib/devlet/manifests/"
)
for entry in "${want[@]}"; do
  grep -qxF -- "$entry" "$build_dir/deb-contents.txt" || fail "contents lack: $entry"
done
files=$(grep -c '^-' "$build_dir/deb-contents.txt")
((files == 8)) || { cat "$build_dir/deb-contents.txt"; fail "$files files in the package, want 8"; }
ok "contents: the four binaries, unit, defaults, profiles, README, manifest directory"

# Install into a scratch root with its own dpkg database.
root=$(mktemp -d "${TMPDIR:-/tmp}/devlet-deb-root.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
touch "$root/var/lib/dpkg/status"
dpkg_root() {
  dpkg --root="$root" --log=/dev/null --force-not-root --force-depends --force-script-chrootless "$@"
}
dpkg_root -i "$deb" >"$build_dir/dpkg.log" 2>&1 || { cat "$build_dir/dpkg.log"; fail "dpkg -i"; }
[[ $(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status}' devlet) == "install ok installed" ]] ||
  fail "not installed"
for binary in devlet-node devlet-extender devlet-alloc devlet-cel; do
  [[ -x $root/usr/bin/$binary ]] || fail "$binary not installed"
  if readelf -S "$root/usr/bin/$binary" | grep -E '\.(debug_info|symtab)' >/dev/null; then
    fail "$binary is not stripped"
  fi
done
[[ $("$root/usr/bin/devlet-cel" '1 + 2') == "3"* ]] || fail "installed devlet-cel"
"$root/usr/bin/devlet-node" --help | grep -- --healthcheck-address >/dev/null || fail "installed devlet-node"
"$root/usr/bin/devlet-extender" --help | grep -- --mode >/dev/null || fail "installed devlet-extender"
"$root/usr/bin/devlet-alloc" --help >/dev/null || fail "installed devlet-alloc"
ok "dpkg --root install: binaries stripped and running"

# The defaults file's settings are flags devlet-node knows (each --flag reads FLAG).
known=$("$root/usr/bin/devlet-node" --help)
while IFS= read -r line; do
  [[ $line =~ ^#?([A-Z_]+)= ]] || continue
  var=${BASH_REMATCH[1]}
  flag=--$(echo "$var" | tr 'A-Z_' 'a-z-')
  [[ $var == V ]] && flag=--v
  grep -q -- "$flag\b" <<<"$known" || fail "/etc/default/devlet-node sets $var: devlet-node has no $flag"
done <"$root/etc/default/devlet-node"
ok "defaults name only existing flags"

if command -v systemd-analyze >/dev/null && [[ -d /lib/systemd/system ]]; then
  # The units the service refers to (sysinit.target, ...) come from this host's systemd; the
  # unit and its ExecStart binary are the package's, in the scratch root.
  cp -rn /lib/systemd/system/. "$root/usr/lib/systemd/system/"
  if systemd-analyze --man=no --root="$root" verify /usr/lib/systemd/system/devlet-node.service \
      >"$build_dir/verify.log" 2>&1 && ! grep -q . "$build_dir/verify.log"; then
    ok "systemd-analyze verify devlet-node.service: clean"
  else
    cat "$build_dir/verify.log"
    fail "systemd-analyze verify"
  fi
else
  echo "skip: no systemd-analyze"
fi

dpkg_root -r devlet >>"$build_dir/dpkg.log" 2>&1 || { cat "$build_dir/dpkg.log"; fail "dpkg -r"; }
[[ ! -e $root/usr/bin/devlet-node && -f $root/etc/default/devlet-node ]] ||
  fail "remove: binaries gone, conffiles kept"
dpkg_root -P devlet >>"$build_dir/dpkg.log" 2>&1 || { cat "$build_dir/dpkg.log"; fail "dpkg -P"; }
[[ ! -e $root/etc/default/devlet-node ]] || fail "purge keeps /etc/default/devlet-node"
ok "remove keeps the conffiles, purge removes them"
echo "deb: $pass passed, 0 failed"
