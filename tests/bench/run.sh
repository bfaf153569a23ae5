#!/bin/sh
# run.sh [BUILD_DIR] — the analyzer benchmark: generates the pinned 10 M-object dump once
# (reused while the generator's version and parameters match), then runs bench_analyze on it
# warm, and a 1 M-object run for scale. Builds nothing: build gen_heap and bench_analyze first.
# Environment: RUNS (default 3), SEED (default 1), OBJECTS (default 10000000).
set -eu

BUILD_DIR=${1:-build}
GEN=$BUILD_DIR/tests/bench/gen_heap
BENCH=$BUILD_DIR/tests/bench/bench_analyze
RUNS=${RUNS:-3}
SEED=${SEED:-1}
OBJECTS=${OBJECTS:-10000000}

if [ ! -x "$GEN" ] || [ ! -x "$BENCH" ]; then
    echo "run.sh: $GEN or $BENCH missing; build them first:" >&2
    echo "        cmake --build $BUILD_DIR --target gen_heap bench_analyze" >&2
    exit 2
fi
OUT=$BUILD_DIR/bench
mkdir -p "$OUT"

# dump N FILE: (re)generates FILE unless FILE.params says it was made by this generator
# version with these parameters and the size still matches.
dump() {
    n=$1 file=$2
    want="$("$GEN" --version) objects=$n seed=$SEED"
    if [ -f "$file" ] && [ -f "$file.params" ] &&
       [ "$(sed -n 1p "$file.params")" = "$want" ] &&
       [ "$(sed -n 2p "$file.params")" = "$(wc -c <"$file" | tr -d ' ')" ]; then
        echo "== reusing $file ($want)"
    else
        echo "== generating $file ($want)"
        rm -f "$file" "$file.params"
        "$GEN" "$file" --objects "$n" --seed "$SEED"
        printf '%s\n%s\n' "$want" "$(wc -c <"$file" | tr -d ' ')" >"$file.params"
    fi
}

status=0
dump "$OBJECTS" "$OUT/bench-10m.hprof"
echo
echo "== benchmark: $OUT/bench-10m.hprof (warm page cache, $RUNS runs)"
"$BENCH" "$OUT/bench-10m.hprof" --runs "$RUNS" || status=$?

echo
dump 1000000 "$OUT/bench-1m.hprof"
echo
echo "== for scale: $OUT/bench-1m.hprof ($RUNS runs)"
"$BENCH" "$OUT/bench-1m.hprof" --runs "$RUNS" || { s=$?; [ "$status" -ne 0 ] || status=$s; }
exit "$status"
