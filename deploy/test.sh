#!/usr/bin/env bash
# Installs what Leakwatch needs, builds it twice (optimised, and with ASan+UBSan), and runs
# every test with ctest. Exits non-zero on any failure. This is the README's test command,
# and what .ci/run runs.
#
#   ./deploy/test.sh            everything
#   LW_TEST_JOBS=1 ./deploy/test.sh   one build job and one test at a time (default: nproc jobs,
#                                     2 x nproc tests)
#   LW_TEST_ASAN=0 ./deploy/test.sh   the plain pass only (the fresh-machine check of .ci/run, whose
#                                     question is whether the install step misses a package: the
#                                     sanitizers need none beyond the compiler's, and the host's
#                                     run of .ci/run has just run that pass)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${LW_TEST_JOBS:-$(nproc)}
# ctest runs twice as many tests as there are cores: the long ones (the four leakd_api parts,
# e2e_*, quickstart) mostly wait on timeouts, outages, workers and JVMs. On 2 cores the plain
# pass used ~0.6 of them at -j 2.
test_jobs=${LW_TEST_JOBS:-$((2 * $(nproc)))}

step() { printf '\n=== %s ===\n' "$*"; }

step "install Debian packages"
"$root/deploy/install-deps.sh"

step "build (RelWithDebInfo) in build/"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLW_SANITIZE=OFF
cmake --build build -j "$jobs"

step "test (RelWithDebInfo)"
ctest --test-dir build --output-on-failure -j "$test_jobs"

if [[ ${LW_TEST_ASAN:-1} == 0 ]]; then
    step "SKIP: the ASan+UBSan pass (LW_TEST_ASAN=0)"
    step "all tests passed (plain pass only)"
    exit 0
fi

step "build with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLW_SANITIZE=ON
cmake --build build-asan -j "$jobs"

step "test under ASan+UBSan"
# The sanitizers make leaks and undefined behaviour fail the test that caused them.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$test_jobs"

step "all tests passed"
