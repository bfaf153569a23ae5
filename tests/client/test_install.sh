#!/usr/bin/env bash
# libleakwatch as a user gets it: `cmake --install` into a prefix, then a program built with
# pkg-config and one built with find_package(Leakwatch), both run.
#   test_install.sh BUILD_DIR
# CONSUMER_CFLAGS: extra flags for the consumers (the sanitizer build passes its own: an
# ASan-built library needs an ASan-built program).
set -euo pipefail
extra=${CONSUMER_CFLAGS:-}
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
libdir=$(dirname "$(find "$prefix" -name libleakwatch.so -print -quit)")
for f in include/leakwatch.h "${libdir#$prefix/}/libleakwatch.so" "${libdir#$prefix/}/libleakwatch.a" \
         "${libdir#$prefix/}/pkgconfig/leakwatch.pc" "${libdir#$prefix/}/cmake/Leakwatch/LeakwatchConfig.cmake"; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f is not installed"; exit 1; }
done
echo "ok   installed: headers, .so, .a, leakwatch.pc, CMake package"

export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -std=c11 -Wall -Wextra -Werror $extra $(pkg-config --cflags leakwatch) "$here/consumer/consumer.c" \
   -o "$tmp/consumer-pc" $(pkg-config --libs leakwatch)
LD_LIBRARY_PATH=$libdir "$tmp/consumer-pc" "$tmp/spool-pc" | tee "$tmp/out-pc"
grep -q "client works" "$tmp/out-pc"
echo "ok   built with pkg-config and ran"

cmake -S "$here/consumer" -B "$tmp/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="$extra" \
  -DCMAKE_EXE_LINKER_FLAGS="$extra" > "$tmp/cmake.log"
cmake --build "$tmp/consumer-build" > "$tmp/cmake-build.log"
LD_LIBRARY_PATH=$libdir "$tmp/consumer-build/consumer" "$tmp/spool-cmake" | tee "$tmp/out-cmake"
grep -q "client works" "$tmp/out-cmake"
echo "ok   built with find_package(Leakwatch) and ran"
echo "3 passed, 0 failed"
