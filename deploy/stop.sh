#!/usr/bin/env bash
# stop.sh — stops what ./deploy/quickstart.sh started: leakd and its private PostgreSQL.
#
#   ./deploy/stop.sh           stop both; the data stays (.leakwatch/), the next quickstart
#                              starts them again with the same database, keys and groups
#   ./deploy/stop.sh --purge   stop both and delete .leakwatch/ and the PostgreSQL cluster
#                              (also when it lives outside the repository, see quickstart.sh)
#
# Only processes recorded by the quickstart are touched (leakd's pid file, the cluster's
# postmaster.pid). Exit status 0 when nothing of the quickstart is left running.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state="$root/.leakwatch"
pg_bindir=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
purge=0
case "${1:-}" in
    "") ;;
    --purge) purge=1 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "usage: stop.sh [--purge]" >&2; exit 2 ;;
esac

as_pg() {
    if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if [[ ! -d "$state" ]]; then
    echo "stop.sh: nothing to stop ($state does not exist)"
    exit 0
fi
[[ -f "$state/README" ]] || { echo "stop.sh: $state was not made by quickstart.sh; not touching it" >&2; exit 1; }
rc=0

# leakd: SIGTERM (it finishes or requeues the analyses in flight, up to LEAKD_SHUTDOWN_TIMEOUT),
# then SIGKILL to its process group (setsid made it the leader) if it is still there after 20 s.
pidfile="$state/leakd.pid"
if [[ -f "$pidfile" ]]; then
    pid=$(cat "$pidfile")
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null \
        && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'leakd serve'; then
        kill -TERM "$pid"
        for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "stop.sh: leakd (pid $pid) did not stop in 20 s: killing its process group"
            kill -KILL -- "-$pid" 2>/dev/null || true
        fi
        echo "stop.sh: stopped leakd (pid $pid)"
    else
        echo "stop.sh: leakd is not running"
    fi
    # Workers of a leakd that was SIGKILLed outlive it: end the leakd processes left in its
    # process group.
    if [[ "$pid" =~ ^[0-9]+$ ]]; then
        for p in $(pgrep -g "$pid" 2>/dev/null || true); do
            if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q 'leakd \(serve\|worker\)'; then
                echo "stop.sh: ending leftover leakd process $p"
                kill -KILL "$p" 2>/dev/null || true
            fi
        done
    fi
    rm -f "$pidfile"
else
    echo "stop.sh: leakd is not running"
fi

# PostgreSQL: pg_ctl stop -m fast (as postgres when root).
pgdir=""
if [[ -L "$state/pg" || -d "$state/pg" ]]; then
    pgdir=$(readlink -f "$state/pg")
fi
if [[ -n "$pgdir" && -f "$pgdir/data/postmaster.pid" ]]; then
    if as_pg "$pg_bindir/pg_ctl" -D "$pgdir/data" -m fast -w -t 60 -s stop >/dev/null 2>&1; then
        echo "stop.sh: stopped PostgreSQL ($pgdir)"
    elif as_pg "$pg_bindir/pg_ctl" -D "$pgdir/data" status >/dev/null 2>&1; then
        echo "stop.sh: PostgreSQL ($pgdir) did not stop; see $pgdir/server.log" >&2
        rc=1
    else
        echo "stop.sh: PostgreSQL is not running"
    fi
else
    echo "stop.sh: PostgreSQL is not running"
fi

if (( purge )); then
    (( rc == 0 )) || { echo "stop.sh: not purging while something still runs" >&2; exit "$rc"; }
    if [[ -n "$pgdir" && -d "$pgdir" ]]; then
        # pg_cluster.sh refuses to delete a directory it did not make.
        "$root/tests/server/pg_cluster.sh" stop "$pgdir" || rc=1
    fi
    rm -rf -- "$state"
    echo "stop.sh: deleted $state${pgdir:+ and $pgdir}"
fi
exit "$rc"
