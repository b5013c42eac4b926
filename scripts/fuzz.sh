#!/usr/bin/env bash
# Builds and runs devlet's libFuzzer targets (fuzz/, issue 14 §1) under ASan+UBSan.
#
#   scripts/fuzz.sh list                 # the targets
#   scripts/fuzz.sh TARGET|all SECONDS   # run one target, or each in turn, for SECONDS each
#   scripts/fuzz.sh replay TARGET|all    # run the seeds and the kept corpus once (no fuzzing)
#
# Environment: FUZZ_BUILD_DIR (default build-fuzz), CXX for the compiler (default clang++-16),
# FUZZ_MODULES (default: the modules the targets need), FUZZ_JOBS (build jobs, default 2),
# FUZZ_NICE (default 19). Inputs found go to $FUZZ_BUILD_DIR/corpus/TARGET (reused by later runs),
# crashes to $FUZZ_BUILD_DIR/crashes/TARGET/; a crash makes the script fail. Every crash found
# becomes a regression test in the module's unit tests (and its input may go to
# fuzz/corpus/TARGET/, which the ctest replay reads).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
cxx=${CXX:-clang++-16}
modules=${FUZZ_MODULES:-common;kube;kube/client;allocator/cel;allocator;allocator/extender;cdi;state;devices;nri-plugin}
jobs=${FUZZ_JOBS:-2}
niceness=${FUZZ_NICE:-19}
if [[ -z ${ASAN_SYMBOLIZER_PATH:-} ]]; then
  symbolizer=$(dirname "$(readlink -f "$(command -v "$cxx")")")/llvm-symbolizer
  [[ -x $symbolizer ]] && export ASAN_SYMBOLIZER_PATH=$symbolizer
fi

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 ]] || usage

configure_and_build() {
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER="$cxx" -DDEVLET_FUZZ=ON -DDEVLET_WERROR=OFF \
    -DDEVLET_BUILD_TESTS=OFF -DDEVLET_BUILD_BENCHMARKS=OFF -DDEVLET_BUILD_INTEGRATION=OFF \
    "-DDEVLET_ONLY_MODULES=$modules" >/dev/null
  nice -n "$niceness" cmake --build "$build" -j "$jobs" --target "$@"
}

targets() {
  grep -o 'NAME [a-z_]*_fuzzer' "$root/fuzz/CMakeLists.txt" | awk '{print $2}'
}

run_one() {  # run_one TARGET SECONDS
  local target=$1 seconds=$2
  local corpus=$build/corpus/$target crashes=$build/crashes/$target
  mkdir -p "$corpus" "$crashes"
  echo "== $target: ${seconds}s" >&2
  # shellcheck disable=SC2046
  nice -n "$niceness" "$build/fuzz/$target" $(cat "$build/fuzz/$target.options") \
    -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$corpus" $(cat "$build/fuzz/$target.seeds")
}

replay_one() {
  local target=$1
  # shellcheck disable=SC2046
  "$build/fuzz/$target" -runs=0 -timeout=25 "$build/corpus/$target" \
    $(cat "$build/fuzz/$target.seeds") 2>&1 | tail -3
}

case $1 in
  list) targets ;;
  replay)
    [[ $# -eq 2 ]] || usage
    list=$([[ $2 == all ]] && targets || echo "$2")
    # shellcheck disable=SC2086
    configure_and_build $list
    for t in $list; do mkdir -p "$build/corpus/$t"; replay_one "$t"; done
    ;;
  *)
    [[ $# -eq 2 ]] || usage
    list=$([[ $1 == all ]] && targets || echo "$1")
    # shellcheck disable=SC2086
    configure_and_build $list
    for t in $list; do run_one "$t" "$2"; done
    ;;
esac
