#!/usr/bin/env bash
# test_quickstart.sh — runs ./deploy/quickstart.sh the way a new user does, in a fresh clone
# in a temporary directory, and checks what it prints against the API:
#
#   run 1  (fresh clone: builds, creates the cluster, starts leakd, app "demo", one upload)
#          the printed signature is the demo's, the printed trace is the API's
#          representative_trace.text for it, occurrences 1
#   run 2  reuses the running PostgreSQL and leakd; same signature and trace, occurrences 2
#   run 3  after ./deploy/stop.sh: restarts both; occurrences 3
#   then   ./deploy/stop.sh --purge leaves no process and no cluster behind, and the runs
#          changed nothing git tracks (only .leakwatch/ appeared)
#
#   tests/deploy/test_quickstart.sh [REPO]      REPO: default, this checkout
#
# The clone is `git clone` of REPO plus REPO's uncommitted changes (modified and untracked,
# not ignored, files), so the test checks the working tree as it would be committed; with
# LW_QS_PRISTINE=1 only the committed HEAD is tested.
#
# LEAKWATCH_BUILD_DIR (optional) is passed to the quickstart: it then reuses that build instead
# of building in the clone (ctest does this with its own build directory; a full build in
# the clone costs minutes). Without it the clone builds for itself, exactly as a user's would.
# LW_QS_KEEP=1 keeps the temporary directory. Prints the time of each run.
set -euo pipefail

repo=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)
DEMO_SIGNATURE=dcaf34e3570327664fceeeea8af7e20e669337b2   # as in tests/client/test_e2e_jvm.py
if ! git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "test_quickstart: SKIPPING: $repo is not a git checkout (the test clones it)"
    exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lw-quickstart.XXXXXX")   # mode 0700, like a home directory
clone="$tmp/leakwatch"
fail() { echo "test_quickstart: FAIL: $*" >&2; exit 1; }
cleanup() {
    local rc=$?
    if [[ -x "$clone/deploy/stop.sh" && -d "$clone/.leakwatch" ]]; then
        "$clone/deploy/stop.sh" --purge >/dev/null 2>&1 || true
    fi
    if [[ -n "${LW_QS_KEEP:-}" ]]; then echo "test_quickstart: kept $tmp"; else rm -rf -- "$tmp"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "test_quickstart: cloning $repo into $clone"
git clone -q "$repo" "$clone"
if [[ -z "${LW_QS_PRISTINE:-}" ]]; then
    (cd "$repo" && git ls-files -z -m -o --exclude-standard) | while IFS= read -r -d '' f; do
        if [[ -e "$repo/$f" ]]; then
            mkdir -p "$clone/$(dirname "$f")"
            cp -p "$repo/$f" "$clone/$f"
        else
            rm -f "$clone/$f"
        fi
    done
    (cd "$repo" && git ls-files -z -d) | (cd "$clone" && xargs -0 -r rm -f --)
fi
git_state() { (cd "$clone" && git status --porcelain --untracked-files=normal | grep -v '^?? \.leakwatch/$' || true); }
before=$(git_state)

# run N: runs the quickstart, saves its output to $tmp/runN.out, prints the time taken.
run() {
    local n=$1 t0 t1 rc=0
    t0=$(date +%s.%N)
    (cd "$clone" && LEAKWATCH_PORT=0 ./deploy/quickstart.sh) >"$tmp/run$n.out" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    awk -v n="$n" -v rc="$rc" -v a="$t0" -v b="$t1" 'BEGIN { printf "test_quickstart: run %d: exit %d in %.1f s\n", n, rc, b - a }'
    if (( rc != 0 )); then
        tail -n 60 "$tmp/run$n.out" | sed 's/^/    /' >&2
        fail "quickstart run $n exited $rc"
    fi
}

# check N OCCURRENCES: the printed signature, trace and occurrences against the API.
check() {
    local n=$1 want=$2
    python3 - "$tmp/run$n.out" "$clone/.leakwatch" "$DEMO_SIGNATURE" "$want" <<'EOF'
import json, re, sys, urllib.request
out_path, state, demo_sig, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
out = open(out_path, encoding="utf-8").read()
def fail(msg):
    print("test_quickstart: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)
m = re.search(r"^signature: ([0-9a-f]{40})$", out, re.M) or fail("no 'signature:' line in the output")
sig = m.group(1)
m = re.search(r"^--- representative trace \(GET (\S+) -> representative_trace\.text\) ---\n(.*?)\n--- end of trace ---$",
              out, re.M | re.S) or fail("no trace block in the output")
path, printed = m.group(1), m.group(2)
printed_occ = int(re.search(r"^occurrences: (\d+)$", out, re.M).group(1))
keys = dict(l.strip().split("=", 1) for l in open(state + "/keys.env") if "=" in l and not l.startswith("#"))
port = open(state + "/leakd.port").read().strip()
curl_line = "curl -H \"Authorization: Bearer %s\" http://127.0.0.1:%s/v1/apps/demo/leaks/%s" % (
    keys["LEAKWATCH_READ_KEY"], port, sig)
curl_line in out or fail("the output does not give the API call: " + curl_line)
req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path),
                             headers={"Authorization": "Bearer " + keys["LEAKWATCH_READ_KEY"]})
g = json.load(urllib.request.urlopen(req, timeout=10))
if sig != demo_sig: fail("printed signature %s, the demo's is %s" % (sig, demo_sig))
if path != "/v1/apps/demo/leaks/" + sig: fail("trace fetched from %s" % path)
if g["signature"] != sig: fail("API signature %s != printed %s" % (g["signature"], sig))
# The shell drops the text's final newline when it prints it; nothing else may differ.
if g["representative_trace"]["text"].rstrip("\n") != printed:
    fail("the printed trace differs from the API's:\n--- printed\n%s\n--- API\n%s" % (printed, g["representative_trace"]["text"]))
if "EventBus.subscribers" not in printed or "NewsScreen" not in printed: fail("not the demo's leak:\n" + printed)
if g["leaking_class"] != "io.leakwatch.demo.NewsScreen": fail("leaking_class " + g["leaking_class"])
if g["occurrences"] != want or printed_occ != want:
    fail("occurrences: API %d, printed %d, want %d" % (g["occurrences"], printed_occ, want))
if g["devices"] != 1: fail("devices %d: every run uses the same spool, so one install id" % g["devices"])
print("test_quickstart: run output and API agree: %s, occurrences %d" % (sig, want))
EOF
}

run 1
check 1 1
grep -q "creating the cluster" "$tmp/run1.out" || fail "run 1 did not create a cluster"

run 2
check 2 2
grep -q "reusing the running PostgreSQL" "$tmp/run2.out" || fail "run 2 did not reuse PostgreSQL"
grep -q "reusing the running leakd" "$tmp/run2.out" || fail "run 2 did not reuse leakd"

pgdir=$(readlink -f "$clone/.leakwatch/pg")
leakd_pid=$(cat "$clone/.leakwatch/leakd.pid")
"$clone/deploy/stop.sh" >"$tmp/stop.out" 2>&1 || { cat "$tmp/stop.out" >&2; fail "stop.sh failed"; }
kill -0 "$leakd_pid" 2>/dev/null && fail "leakd (pid $leakd_pid) still runs after stop.sh"
[[ -f "$pgdir/data/postmaster.pid" ]] && fail "PostgreSQL still runs after stop.sh"

run 3
check 3 3
grep -q "restarted PostgreSQL" "$tmp/run3.out" || fail "run 3 did not restart PostgreSQL"
grep -q "leakd (pid [0-9]*) is ready" "$tmp/run3.out" || fail "run 3 did not restart leakd"
grep -q "app demo exists" "$clone/.leakwatch/leakd.log" || fail "leakd-start.sh should have found app demo on restart"

after=$(git_state)
[[ "$before" == "$after" ]] || fail "the quickstart changed files git tracks or does not ignore:
$(diff <(echo "$before") <(echo "$after") || true)"

leakd_pid=$(cat "$clone/.leakwatch/leakd.pid")
"$clone/deploy/stop.sh" --purge >"$tmp/stop.out" 2>&1 || { cat "$tmp/stop.out" >&2; fail "stop.sh --purge failed"; }
kill -0 "$leakd_pid" 2>/dev/null && fail "leakd still runs after stop.sh --purge"
[[ -e "$pgdir" ]] && fail "$pgdir is left after stop.sh --purge"
[[ -e "$clone/.leakwatch" ]] && fail ".leakwatch is left after stop.sh --purge"
echo "test_quickstart: all checks passed"
