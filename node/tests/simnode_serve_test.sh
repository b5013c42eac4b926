#!/usr/bin/env bash
# devlet-simnode --serve plays the kernel for sriov_numvfs: VFs appear on N, a change between
# non-zero counts is refused (value put back), 0 removes them, SIGTERM exits 0.
# usage: simnode_serve_test.sh PATH/TO/devlet-simnode
set -euo pipefail
SIM="$1"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/simnode-test.XXXXXX")"
PID=""
trap '[[ -n "$PID" ]] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; cat "$WORK/log" 2>/dev/null; exit 1; }
wait_for() {  # wait_for CMD...: up to 5 s
  for _ in $(seq 1 100); do "$@" && return 0; sleep 0.05; done
  return 1
}
"$SIM" "$WORK/sys" --sriov-nic --serve >"$WORK/log" 2>&1 &
PID=$!
wait_for grep -q '^serving 3 SR-IOV' "$WORK/log" || fail "not serving"
PF="$WORK/sys/bus/pci/devices/0000:3b:00.0"
[[ "$(cat "$PF/net/ens3f0np0/address")" == b8:3f:d2:0a:02:10 ]] || fail "--sriov-nic netdev"
echo 2 >"$PF/sriov_numvfs"
wait_for test -e "$PF/virtfn1" || fail "VFs did not appear"
[[ -e "$WORK/sys/bus/pci/devices/0000:3b:00.3/net/ens3f0np0v1" ]] || fail "VF 1 has no netdev"
[[ "$(readlink -f "$WORK/sys/bus/pci/devices/0000:3b:00.2/physfn")" == "$(readlink -f "$PF")" ]] \
  || fail "VF 0 has no physfn link"
echo 3 >"$PF/sriov_numvfs"
wait_for grep -q 'refused 3' "$WORK/log" || fail "2 -> 3 not refused"
[[ "$(cat "$PF/sriov_numvfs")" == 2 ]] || fail "refused value not put back"
echo 9 >"$PF/sriov_numvfs"
wait_for grep -q 'refused 9' "$WORK/log" || fail "9 > sriov_totalvfs not refused"
echo 0 >"$PF/sriov_numvfs"
wait_for test ! -e "$PF/virtfn0" || fail "VFs not removed"
[[ ! -e "$WORK/sys/bus/pci/devices/0000:3b:00.2" ]] || fail "VF 0 still listed"
kill -TERM "$PID"
rc=0; wait "$PID" || rc=$?
PID=""
[[ $rc == 0 ]] || fail "exit code $rc on SIGTERM"
echo "PASS"
