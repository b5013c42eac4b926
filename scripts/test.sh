#!/usr/bin/env bash
# Runs every devlet test: builds (Ninja + ccache), runs all ctest tests, then rebuilds the unit
# tests with ASan+UBSan and runs them again, runs the concurrency tests under TSan, then gives
# each fuzzer a short pass.
#
#   scripts/test.sh              everything
#   scripts/test.sh --fast       skip the sanitizer and fuzzer passes
#   scripts/test.sh -R cel       pass extra arguments to both ctest runs
set -euo pipefail
cd "$(dirname "$0")/.."

fast=0
ctest_args=()
for arg in "$@"; do
  case "$arg" in
    --fast) fast=1 ;;
    *) ctest_args+=("$arg") ;;
  esac
done

# The modules the 'concurrency' tests live in and depend on (the TSan phase builds nothing else).
DEVLET_TSAN_MODULES="common;kube;kube/client;allocator/cel;allocator;allocator/extender;cdi;state;nri-plugin;dra-kubelet"

start=$SECONDS
phase_start=$SECONDS
# phase NAME: prints the time the previous phase took, then starts NAME (CI's budget is per phase).
phase() {
  if [[ -n ${phase_name:-} ]]; then
    echo "== ${phase_name}: $((SECONDS - phase_start)) s (total $((SECONDS - start)) s) =="
  fi
  phase_name=$1
  phase_start=$SECONDS
  [[ -n $1 ]] && echo "== $1 =="
  return 0
}
trap 'phase ""' EXIT

phase "install dependencies"
bash scripts/install-deps.sh
jobs=${DEVLET_JOBS:-$(nproc)}
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true

phase "build (RelWithDebInfo)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEVLET_ONLY_MODULES= \
  -DDEVLET_BUILD_TESTS=ON -DDEVLET_BUILD_BENCHMARKS=ON -DDEVLET_BUILD_INTEGRATION=ON >/dev/null
cmake --build build -j "$jobs"
phase "tests"
ctest --test-dir build --output-on-failure -j "$jobs" "${ctest_args[@]}"

if ((fast == 0)); then
  phase "build under ASan+UBSan"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDEVLET_ONLY_MODULES= -DDEVLET_BUILD_BENCHMARKS=OFF \
    -DDEVLET_BUILD_INTEGRATION=OFF \
    "-DDEVLET_SANITIZE=address;undefined" >/dev/null
  cmake --build build-asan -j "$jobs"
  phase "unit tests under ASan+UBSan"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -L unit "${ctest_args[@]}"

  # ThreadSanitizer (GCC) over the tests labelled 'concurrency' (devlet_cc_test's CONCURRENCY):
  # only the modules they need, only their test binaries. TSan must report nothing: it exits
  # non-zero on the first report (halt_on_error) and ctest fails the test.
  phase "build the concurrency tests under TSan"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEVLET_BUILD_BENCHMARKS=OFF \
    -DDEVLET_BUILD_INTEGRATION=OFF -DDEVLET_SANITIZE=thread \
    "-DDEVLET_ONLY_MODULES=${DEVLET_TSAN_MODULES}" >/dev/null
  # GCC 12's TSan refuses to start ("unexpected memory mapping") where vm.mmap_rnd_bits is above
  # 28; without address randomization (setarch -R, inherited by children) it starts anywhere. The
  # build runs the test binaries too (gtest discovery).
  no_aslr=(setarch "$(uname -m)" -R)
  "${no_aslr[@]}" cmake --build build-tsan -j "$jobs" --target concurrency_tests
  phase "concurrency tests under TSan"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp" \
    "${no_aslr[@]}" ctest --test-dir build-tsan --output-on-failure -j "$jobs" -L concurrency "${ctest_args[@]}"

  # The fuzzers' short pass (fuzz/README.md): each target fuzzes briefly, then replays its seeds
  # and the kept corpus; scripts/fuzz.sh runs them for as long as asked.
  phase "build the fuzzers (clang, ASan+UBSan)"
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++-16 -DDEVLET_FUZZ=ON -DDEVLET_WERROR=OFF -DDEVLET_BUILD_TESTS=OFF \
    -DDEVLET_BUILD_BENCHMARKS=OFF -DDEVLET_BUILD_INTEGRATION=OFF \
    "-DDEVLET_ONLY_MODULES=common;kube;kube/client;allocator/cel;allocator;allocator/extender;cdi;state;devices;nri-plugin" \
    -DDEVLET_FUZZ_SECONDS="${DEVLET_FUZZ_SECONDS:-15}" >/dev/null
  cmake --build build-fuzz -j "$jobs"
  phase "fuzzers, short pass"
  ctest --test-dir build-fuzz --output-on-failure -j "$jobs" -L fuzz "${ctest_args[@]}"
fi
