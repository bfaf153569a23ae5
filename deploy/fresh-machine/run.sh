#!/usr/bin/env bash
# run.sh — inside the fresh-machine container (deploy/fresh-machine/Dockerfile): runs the
# README's commands as a new user would, as root on a bare Debian 12, and checks what they print.
#
#   1. ./deploy/quickstart.sh  (installs the packages, builds, starts PostgreSQL and leakd, runs
#      the demo under the JVM agent, prints the analyzed leak group): exit 0, a signature, and
#      occurrences 1
#   2. ./deploy/quickstart.sh  again (reuses everything): exit 0, the same signature, occurrences 2
#   3. ./deploy/stop.sh        stops leakd and PostgreSQL
#   4. ./deploy/test.sh, the README's test command: exit 0. Its plain pass only (LW_TEST_ASAN=0):
#      what this check can find is a package the install step misses, and the sanitizer pass
#      needs none beyond the compiler's; .ci/run has run that pass on the host just before
#      (about 2 minutes on 2 cores). FRESH_MACHINE_TEST=full runs both passes;
#      FRESH_MACHINE_TEST=0 leaves step 4 out
# Exits 0 when all hold, 1 otherwise. Prints how long each step took.
set -uo pipefail
cd "$(dirname "$0")/../.."

fail() { echo "fresh-machine: FAIL: $*" >&2; exit 1; }
# container-check prints only the last 200 lines of the logs: apt's and dpkg's progress lines
# are kept in the LOG file but not shown.
noise='^(\[ *[0-9]+%\] (Building|Linking|Built target)|Get:[0-9]|Selecting previously|Preparing to unpack|Unpacking |Setting up |Processing triggers|Adding debian:|update-alternatives: |\(Reading database|Created symlink|Fetched |debconf: )'
timed() {  # timed LOG CMD...: runs CMD, its output kept in LOG and shown less apt's noise; sets rc and secs
    local log=$1; shift
    local t0=$SECONDS
    "$@" 2>&1 | tee "$log" | grep --line-buffered -Ev "$noise"
    rc=${PIPESTATUS[0]}
    secs=$((SECONDS - t0))
}
field() { sed -n "s/^$1: *//p" "$2" | tail -n 1; }

echo "fresh-machine: $(. /etc/os-release && echo "$PRETTY_NAME"), $(nproc) cores, as $(id -un);" \
     "before: $(dpkg-query -W -f='${binary:Package}\n' | wc -l) packages, cc: $(command -v cc || echo none)," \
     "java: $(command -v java || echo none), curl: $(command -v curl || echo none)"

echo "fresh-machine: === 1. ./deploy/quickstart.sh (first run on a bare system)"
timed /tmp/qs1.log ./deploy/quickstart.sh
echo "fresh-machine: quickstart run 1 exited $rc after ${secs}s"
[ "$rc" = 0 ] || fail "./deploy/quickstart.sh exited $rc on a fresh Debian 12"
sig1=$(field signature /tmp/qs1.log)
occ1=$(field occurrences /tmp/qs1.log)
[[ $sig1 =~ ^[0-9a-f]{40}$ ]] || fail "run 1 printed no leak signature"
[ "$occ1" = 1 ] || fail "run 1: occurrences '$occ1', expected 1"

echo "fresh-machine: === 2. ./deploy/quickstart.sh again"
timed /tmp/qs2.log ./deploy/quickstart.sh
echo "fresh-machine: quickstart run 2 exited $rc after ${secs}s"
[ "$rc" = 0 ] || fail "./deploy/quickstart.sh exited $rc when run again"
sig2=$(field signature /tmp/qs2.log)
occ2=$(field occurrences /tmp/qs2.log)
[ "$sig2" = "$sig1" ] || fail "run 2 printed signature '$sig2', run 1 '$sig1'"
[ "$occ2" = 2 ] || fail "run 2: occurrences '$occ2', expected 2"

echo "fresh-machine: === 3. ./deploy/stop.sh"
if [ -x deploy/stop.sh ]; then
  timed /tmp/stop.log ./deploy/stop.sh
  [ "$rc" = 0 ] || fail "./deploy/stop.sh exited $rc"
else
  echo "fresh-machine: (no deploy/stop.sh here)"
fi

if [ "${FRESH_MACHINE_TEST:-1}" != 0 ]; then
  echo "fresh-machine: === 4. ./deploy/test.sh"
  asan=0
  [ "${FRESH_MACHINE_TEST:-1}" = full ] && asan=1
  timed /tmp/test.log env LW_TEST_ASAN=$asan ./deploy/test.sh
  echo "fresh-machine: test.sh exited $rc after ${secs}s"
  [ "$rc" = 0 ] || fail "./deploy/test.sh exited $rc on a fresh Debian 12"
fi

if [ "${FRESH_MACHINE_TEST:-1}" != 0 ]; then
  echo "fresh-machine: PASSED: the README's run and test commands work on a fresh Debian 12 (leak $sig1;" \
       "test.sh's $([ "$asan" = 1 ] && echo 'plain and ASan+UBSan passes' || echo 'plain pass'))"
else
  echo "fresh-machine: PASSED: the README's run command works on a fresh Debian 12 (leak $sig1; test.sh left out)"
fi
