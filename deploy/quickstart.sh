#!/usr/bin/env bash
# The README's run command: installs what Leakwatch needs, builds it, runs the bundled Java
# demo app (a screen leaked through a static listener registry), dumps its heap and shows
# what leakscan finds in it. Safe to run again.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

echo "== 1/4 installing Debian packages (needs root or sudo)"
"$root/deploy/install-deps.sh"

echo "== 2/4 building Leakwatch into build/"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
echo "built build/shared/leakscan"

echo "== 3/4 running the demo app, which leaks a NewsScreen and dumps its heap"
"$root/deploy/demo/build.sh" build/demo/demo.jar
dump="$root/build/demo/demo.hprof"
java -Xmx256m -jar build/demo/demo.jar --dump "$dump"

echo "== 4/4 analyzing $dump"
set +e
build/shared/leakscan analyze "$dump"
rc=$?
set -e
case $rc in
  1) echo
     echo "leakscan found the leak above (exit code 1 = leaks found)."
     echo "Try also:  build/shared/leakscan analyze $dump --json --pretty"
     echo "           build/shared/leakscan info $dump"
     echo "           build/shared/leakscan strip $dump /tmp/demo-trimmed.hprof.zst" ;;
  0) echo "leakscan found no leak: that is unexpected for the demo" >&2; exit 1 ;;
  *) echo "leakscan failed with exit code $rc" >&2; exit "$rc" ;;
esac
