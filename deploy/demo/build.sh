#!/bin/sh
# Builds the Leakwatch demo app (deploy/demo/src) together with the SDK's Java classes
# (client/jvm/java) into one runnable jar.
#
#   deploy/demo/build.sh [OUT_JAR]        default: build/demo/demo.jar (relative to the cwd)
#   java -jar build/demo/demo.jar --dump /tmp/demo.hprof
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-build/demo/demo.jar}

command -v javac >/dev/null 2>&1 || { echo "build.sh: javac (JDK >= 17) not found" >&2; exit 1; }
command -v jar >/dev/null 2>&1 || { echo "build.sh: jar (JDK >= 17) not found" >&2; exit 1; }

classes=$(mktemp -d "${TMPDIR:-/tmp}/leakwatch-demo.XXXXXX")
trap 'rm -rf "$classes"' EXIT INT TERM

find "$root/client/jvm/java" "$here/src" -name '*.java' | sort > "$classes/sources.txt"
javac --release 17 -encoding UTF-8 -Xlint:all -d "$classes/out" @"$classes/sources.txt"

mkdir -p "$(dirname "$out")"
rm -f "$out"
jar --create --file "$out" --main-class io.leakwatch.demo.DemoApp -C "$classes/out" .
echo "build.sh: wrote $out"
