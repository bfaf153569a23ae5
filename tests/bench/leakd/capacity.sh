#!/usr/bin/env bash
# capacity.sh [BUILD_DIR] — how steady this machine's capacity is from one minute to the next,
# with nothing of Leakwatch's running: the question under run.sh's fixed-rate p99.
#
# run.sh sets its fixed rate at 80 % of a closed loop measured just before it, so the p99 holds
# only while the machine can still do what it did in that closed loop. This script measures how
# often it cannot: pgbench -S (select-only; 2 clients, 2 threads) holds a throwaway PostgreSQL
# cluster and the two CPUs 100 % busy for SECONDS_RUN seconds, its transactions counted each second, with
# `leakd_load speed` beside it (the host probes run.sh uses) and the CPU time of PostgreSQL,
# pgbench and everything else sampled each second (so a drop that is another process of this
# machine shows as such). pgbench -S is CPU work of the kind leakd and PostgreSQL do (system
# calls, loopback round trips, a database's user code), and nothing about it changes over the
# run: a second that gets fewer transactions for the same CPU time is the host giving less.
#
# Then, as run.sh's timing lays them out (a REF-s closed loop, GAP s, a RUN-s fixed-rate run),
# for every start second: the lowest W-s mean in the run window against the reference window's
# mean. The share of starts where it falls under 0.95 ... 0.70 is the share of run.sh's runs
# that would meet a host that much slower than its closed loop assumed, for W s or more.
# Also: the correlation of each probe's 5-s means with pgbench's (a probe that follows the
# host is negative: slower when the host gives less).
#
# Environment: SECONDS_RUN (600), REF (20), GAP (5), RUN (60), W (3); PG_BINDIR; LEAKD_LOAD
#   (default BUILD_DIR/tests/bench/leakd_load);
#   KEEP=DIR  keeps the raw series (pgbench.sec, speed.sec, procs) in DIR
# Exit status 0, 2 on a set-up error, 77 without PostgreSQL (as run.sh's smoke run).
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
BUILD=${1:-$root/build}
LOAD=${LEAKD_LOAD:-$BUILD/tests/bench/leakd_load}
S=${SECONDS_RUN:-600} REF=${REF:-20} GAP=${GAP:-5} RUN=${RUN:-60} W=${W:-3}
for v in S REF GAP RUN W; do
    [[ ${!v} =~ ^[0-9]+$ ]] && (( ${!v} >= 1 )) || { echo "capacity.sh: $v must be a whole number >= 1 (got '${!v}')" >&2; exit 2; }
done
(( REF + GAP + RUN <= S )) || { echo "capacity.sh: REF + GAP + RUN ($((REF + GAP + RUN)) s) must fit in SECONDS_RUN ($S s)" >&2; exit 2; }
(( W <= RUN )) || { echo "capacity.sh: W must be at most RUN" >&2; exit 2; }
[[ -x $LOAD ]] || { echo "capacity.sh: no leakd_load at $LOAD (build first: cmake --build BUILD_DIR)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "capacity.sh: needs python3" >&2; exit 2; }

PG_BINDIR=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
[[ -x $PG_BINDIR/pgbench && -x $PG_BINDIR/initdb ]] || { echo "capacity.sh: no PostgreSQL in $PG_BINDIR: skipped" >&2; exit 77; }
export PG_BINDIR

WORK=$(mktemp -d /tmp/lw-capacity.XXXXXX)
PGDIR=$(mktemp -d /tmp/lw-capacity-pg.XXXXXX) # its own: the postgres user must reach it
cleanup() {
    local rc=$?
    jobs -p | xargs -r kill 2>/dev/null || true
    "$root/tests/server/pg_cluster.sh" stop "$PGDIR" >/dev/null 2>&1 || rm -rf "$PGDIR"
    if [[ -n ${KEEP:-} ]]; then mkdir -p "$KEEP" && cp "$WORK"/*.sec "$WORK"/procs "$KEEP"/ 2>/dev/null || true; fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

out=$("$root/tests/server/pg_cluster.sh" start "$PGDIR") || { echo "capacity.sh: PostgreSQL did not start" >&2; exit 2; }
URL=${out#LEAKD_DATABASE_URL=}
"$PG_BINDIR/pgbench" -i -s 10 -q "$URL" >"$WORK/init.log" 2>&1 || { cat "$WORK/init.log" >&2; exit 2; }

echo "== $(date -u +%T) pgbench -S, 2 clients, for $S s, with leakd_load speed and a CPU sampler beside it" >&2
"$LOAD" speed --seconds "$S" >/dev/null 2>"$WORK/speed.sec" &
# CPU ms each second of PostgreSQL's processes, pgbench's and all others (/proc/PID/stat)
python3 - "$S" >"$WORK/procs" <<'PY' &
import os, sys, time
T, hz = float(sys.argv[1]), os.sysconf('SC_CLK_TCK')
def snap():  # {pid: (group, CPU ticks)}
    g = {}
    for p in os.listdir('/proc'):
        if not p.isdigit(): continue
        try: s = open('/proc/%s/stat' % p).read()
        except OSError: continue
        comm = s[s.index('(') + 1:s.rindex(')')]
        f = s[s.rindex(')') + 2:].split()
        g[p] = ('postgres' if comm.startswith('postgres') else 'pgbench' if comm == 'pgbench' else 'other',
                int(f[11]) + int(f[12]))
    return g
t0, prev, sec = time.time(), snap(), 0
while time.time() - t0 < T:
    time.sleep(1 - ((time.time() - t0) % 1))
    g, d = snap(), {}
    for p, (k, t) in g.items():  # a process gone since the last look loses its last second
        d[k] = d.get(k, 0) + t - (prev[p][1] if p in prev else 0)
    print(sec, *(d.get(k, 0) * 1000 // hz for k in ('postgres', 'pgbench', 'other')), flush=True)
    prev, sec = g, sec + 1
PY
"$PG_BINDIR/pgbench" -S -c 2 -j 2 -T "$S" -P 1 "$URL" >"$WORK/pgbench.log" 2>"$WORK/pgbench.sec" ||
    { cat "$WORK/pgbench.sec" >&2; exit 2; }
wait

python3 - "$WORK" "$REF" "$GAP" "$RUN" "$W" <<'PY'
import re, sys, statistics as st
work, REF, GAP, RUN, W = sys.argv[1], *map(int, sys.argv[2:])
tps = [float(m.group(1)) for l in open(work + '/pgbench.sec')
       for m in [re.match(r'progress: [\d.]+ s, ([\d.]+) tps', l)] if m]
probe = {}
for l in open(work + '/speed.sec'):
    f = l.split()
    if f and f[0] == 'speed_probe:' and len(f) >= 5: probe[int(f[1])] = [float(x) for x in f[2:5]]
procs = {int(f[0]): [int(x) for x in f[1:4]] for f in (l.split() for l in open(work + '/procs')) if len(f) == 4}
n = len(tps)
if n < REF + GAP + RUN:
    sys.exit('capacity.sh: pgbench reported %d seconds, fewer than REF + GAP + RUN' % n)
srt = sorted(tps)
print('pgbench -S transactions/s over %d s: median %.0f, p10 %.0f, p90 %.0f, min %.0f, max %.0f'
      % (n, st.median(tps), srt[n // 10], srt[9 * n // 10], srt[0], srt[-1]))
print('\n10-s means: second, transactions/s, CPU ms/s of PostgreSQL / pgbench / the rest, probes (loop us, memory ns, system call ns)')
for i in range(0, n - 9, 10):
    c = [sum(procs.get(j, [0, 0, 0])[k] for j in range(i, i + 10)) / 10 for k in range(3)]
    p = [st.mean(probe[j][k] for j in range(i, i + 10) if j in probe) if any(j in probe for j in range(i, i + 10)) else 0
         for k in range(3)]
    print('%4d %7.0f   %5.0f %5.0f %4.0f   %5.1f %4.0f %5.0f' % (i, st.mean(tps[i:i + 10]), *c, *p))
starts = range(0, n - REF - GAP - RUN + 1)
low, whole = [], []
for s in starts:
    ref = st.mean(tps[s:s + REF])
    run = tps[s + REF + GAP:s + REF + GAP + RUN]
    low.append(min(st.mean(run[i:i + W]) for i in range(RUN - W + 1)) / ref)
    whole.append(st.mean(run) / ref)
print('\n%d start seconds: a %d-s reference, %d s, a %d-s run; the run against the reference' % (len(low), REF, GAP, RUN))
for x in (0.95, 0.9, 0.85, 0.8, 0.75, 0.7):
    print('  under %.2f: its slowest %d s %5.1f %% of starts, the whole run %5.1f %%'
          % (x, W, 100 * sum(v < x for v in low) / len(low), 100 * sum(v < x for v in whole) / len(whole)))
def corr(a, b):
    ma, mb = st.mean(a), st.mean(b)
    d = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    return sum((x - ma) * (y - mb) for x, y in zip(a, b)) / d if d else 0.0
blocks = [i for i in range(0, n - 4, 5) if all(j in probe for j in range(i, i + 5))]
if len(blocks) >= 3:
    t5 = [sum(tps[i:i + 5]) for i in blocks]
    print('\nprobes against transactions/s, correlation of 5-s means: ' + ', '.join(
        '%s %.2f' % (name, corr(t5, [sum(probe[j][k] for j in range(i, i + 5)) for i in blocks]))
        for k, name in enumerate(('loop', 'memory', 'system call'))))
PY
