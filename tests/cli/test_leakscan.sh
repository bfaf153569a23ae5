#!/usr/bin/env bash
# leakscan's command line: help, exit codes, and clear errors that name the offset.
#   test_leakscan.sh LEAKSCAN DUMP_WITH_LEAK DUMP_WITHOUT_LEAK
set -u
leakscan=$1 leak=$2 noleak=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

expect() { # expect NAME WANT_RC GREP_PATTERN -- COMMAND...
  local name=$1 want=$2 pat=$3
  shift 4
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: exit $rc, want $want"; sed 's/^/  | /' "$tmp/err" | head -5; fail=$((fail + 1)); return
  fi
  if [ -n "$pat" ] && ! grep -qE -- "$pat" "$tmp/out" "$tmp/err"; then
    echo "FAIL $name: output lacks /$pat/"; head -5 "$tmp/out" "$tmp/err" | sed 's/^/  | /'; fail=$((fail + 1)); return
  fi
  echo "ok   $name"; pass=$((pass + 1))
}

expect help              0 "usage: leakscan <command>" -- "$leakscan" --help
expect no-args           2 "usage: leakscan"           -- "$leakscan"
expect version           0 "^leakscan [0-9]+\.[0-9]+"   -- "$leakscan" --version
expect unknown-command   2 "unknown command frob"      -- "$leakscan" frob
expect analyze-help      0 "--retained"                -- "$leakscan" analyze --help
expect info-help         0 "--top"                     -- "$leakscan" help info
expect strip-help        0 "valid HPROF"               -- "$leakscan" strip --help
expect unknown-option    2 "unknown option --frob"     -- "$leakscan" analyze "$leak" --frob
expect analyze-leak      1 "1 APPLICATION LEAKS"       -- "$leakscan" analyze --quiet "$leak"
expect analyze-json      1 '"signature"'               -- "$leakscan" analyze --json "$leak"
expect analyze-no-leak   0 "0 APPLICATION LEAKS"       -- "$leakscan" analyze "$noleak"
expect unknown-key       2 "no KeyedWeakReference has the key nope" -- "$leakscan" analyze "$leak" --key nope
expect missing-file      4 "cannot open"               -- "$leakscan" analyze "$tmp/absent.hprof"
expect info              0 "index memory:"             -- "$leakscan" info "$leak" --top 5

# Truncated input: a clean error naming the offset, exit code 3.
head -c 200000 "$leak" > "$tmp/truncated.hprof"
expect truncated         3 "offset [0-9]+.*(truncated|past)" -- "$leakscan" analyze "$tmp/truncated.hprof"
printf 'not a heap dump at all' > "$tmp/garbage.hprof"
expect garbage           3 "not an HPROF heap dump"    -- "$leakscan" analyze "$tmp/garbage.hprof"
: > "$tmp/empty.hprof"
expect empty             3 "empty file"                -- "$leakscan" info "$tmp/empty.hprof"

# strip: plain and .zst; both analyze to the same leak.
expect strip             0 "% of the input"            -- "$leakscan" strip "$leak" "$tmp/s.hprof"
expect strip-zst         0 "% of the input"            -- "$leakscan" strip "$leak" "$tmp/s.hprof.zst"
expect analyze-stripped  1 "1 APPLICATION LEAKS"       -- "$leakscan" analyze "$tmp/s.hprof.zst"
"$leakscan" analyze --json "$leak" | sed 's/"duration_ms":{[^}]*}//' > "$tmp/a.json"
"$leakscan" analyze --json "$tmp/s.hprof.zst" | sed 's/"duration_ms":{[^}]*}//' > "$tmp/b.json"
if cmp -s "$tmp/a.json" "$tmp/b.json"; then echo "ok   stripped-same-json"; pass=$((pass + 1)); else echo "FAIL stripped-same-json"; fail=$((fail + 1)); fi
# A truncated .zst is bad input too.
head -c 1000 "$tmp/s.hprof.zst" > "$tmp/cut.hprof.zst"
expect truncated-zst     3 "truncated zstd"            -- "$leakscan" analyze "$tmp/cut.hprof.zst"

# --memory-budget: too small for the index, enough for the index but not the analysis (info's
# peak, +1 % for malloc's rounding), and enough (the same JSON as without); exit 4 naming it.
expect budget-help       0 "--memory-budget BYTES"     -- "$leakscan" analyze --help
expect budget-bad-value  2 "--memory-budget takes a number of bytes, not 1G" -- "$leakscan" analyze "$leak" --memory-budget 1G
expect budget-no-value   2 "--memory-budget needs a value" -- "$leakscan" info "$leak" --memory-budget
expect budget-index      4 "needs more than its memory budget of 65536 bytes \(index: " -- "$leakscan" analyze --quiet --memory-budget 65536 "$leak"
expect budget-info       4 "needs more than its memory budget of 65536 bytes \(index: " -- "$leakscan" info --memory-budget=65536 "$leak"
expect info-peak         0 "^memory peak: +[0-9]+ bytes" -- "$leakscan" info "$leak" --top 1
peak=$(sed -n 's/^memory peak: *\([0-9]*\) bytes.*/\1/p' "$tmp/out")
budget=$((peak + peak / 100))
expect budget-analysis   4 "needs more than its memory budget of $budget bytes \(analysis: " -- "$leakscan" analyze --memory-budget "$budget" "$leak"
expect budget-enough     1 "1 APPLICATION LEAKS"       -- "$leakscan" analyze --quiet --memory-budget $((peak * 2)) "$leak"
"$leakscan" analyze --json --memory-budget $((peak * 2)) "$leak" | sed 's/"duration_ms":{[^}]*}//' > "$tmp/c.json"
if cmp -s "$tmp/a.json" "$tmp/c.json"; then echo "ok   budget-same-json"; pass=$((pass + 1)); else echo "FAIL budget-same-json"; fail=$((fail + 1)); fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
