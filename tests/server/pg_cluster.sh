#!/usr/bin/env bash
# pg_cluster.sh — a throwaway PostgreSQL cluster for leakd's tests.
#
#   pg_cluster.sh start DIR   DIR: an empty directory (e.g. from mktemp -d). Creates a cluster
#                             in DIR/data listening on DIR/sock and 127.0.0.1:<free port>,
#                             trust auth, database "leakwatch"; prints
#                             LEAKD_DATABASE_URL=postgresql://postgres@127.0.0.1:PORT/leakwatch
#                             on stdout and writes the URL to DIR/url.
#   pg_cluster.sh stop DIR    pg_ctl stop -m fast, then removes DIR.
#
# Safe to run concurrently: every cluster has its own DIR and port (a port lost to a race is
# retried with another). As root, the server runs as `postgres` (PostgreSQL refuses root).
# Environment: PG_BINDIR (default /usr/lib/postgresql/15/bin, else pg_config --bindir).
set -euo pipefail

die() { echo "pg_cluster.sh: $*" >&2; exit 1; }

find_bindir() {
    if [[ -n "${PG_BINDIR:-}" ]]; then echo "$PG_BINDIR"; return; fi
    local d
    for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
        if [[ -x "$d/initdb" ]]; then echo "$d"; return; fi
    done
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir)
        if [[ -x "$d/initdb" ]]; then echo "$d"; return; fi
    fi
    die "no PostgreSQL server binaries (initdb) found; set PG_BINDIR"
}

# as_pg CMD...: runs CMD as the postgres user when we are root, else as ourselves.
as_pg() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

port_in_use() {
    local port=$1
    if command -v ss >/dev/null 2>&1; then
        ss -Htln "sport = :$port" 2>/dev/null | grep -q . && return 0
        return 1
    fi
    # Fallback: a successful connect means someone listens.
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    return 1
}

pick_port() {
    local port i
    for i in $(seq 1 50); do
        port=$(( 20000 + (RANDOM * 32768 + RANDOM + $$ * 7919 + i * 104729) % 40000 ))
        if ! port_in_use "$port"; then echo "$port"; return; fi
    done
    die "no free port found"
}

cmd_start() {
    local dir=$1 bindir port attempt started=0
    [[ -d "$dir" ]] || die "start: $dir is not a directory (create it with mktemp -d)"
    dir=$(cd "$dir" && pwd)
    [[ -e "$dir/data" ]] && die "start: $dir/data already exists"
    (( ${#dir} < 80 )) || die "start: $dir is too long for a unix socket path"
    bindir=$(find_bindir)

    mkdir -p "$dir/data" "$dir/sock"
    touch "$dir/.pg_cluster"
    if [[ $(id -u) -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || die "running as root but there is no postgres user"
        chown -R postgres: "$dir"
        runuser -u postgres -- test -w "$dir/data" \
            || die "start: user postgres cannot reach $dir (a parent directory is private?)"
    fi
    chmod 700 "$dir/data"

    as_pg "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C \
        --no-sync --no-instructions >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; die "initdb failed"; }

    for attempt in 1 2 3 4 5 6 7 8; do
        port=$(pick_port)
        if as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 -s \
            -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir/sock \
                -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
                -c max_connections=100 -c shared_buffers=16MB -c log_min_messages=warning" \
            start >/dev/null 2>&1; then
            started=1
            break
        fi
        # Another cluster may have taken the port between the check and the bind: retry.
        if ! grep -qiE 'could not (bind|create listen)|address already in use' "$dir/server.log" 2>/dev/null; then
            break
        fi
        echo "pg_cluster.sh: port $port taken, retrying (attempt $attempt)" >&2
        : >"$dir/server.log"
    done
    if (( ! started )); then
        tail -n 30 "$dir/server.log" >&2 2>/dev/null || true
        die "the PostgreSQL server did not start"
    fi
    echo "$port" >"$dir/port"

    local i
    for i in $(seq 1 100); do
        "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -d postgres && break
        sleep 0.05
    done
    "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -d postgres \
        || { cmd_stop_server "$dir" "$bindir"; die "the server does not answer on port $port"; }

    as_pg "$bindir/psql" -X -q -h "$dir/sock" -p "$port" -U postgres -d postgres \
        -v ON_ERROR_STOP=1 -c 'CREATE DATABASE leakwatch' >/dev/null \
        || { cmd_stop_server "$dir" "$bindir"; die "CREATE DATABASE leakwatch failed"; }

    local url="postgresql://postgres@127.0.0.1:$port/leakwatch"
    echo "$url" >"$dir/url"
    echo "LEAKD_DATABASE_URL=$url"
}

cmd_stop_server() {
    local dir=$1 bindir=$2
    if [[ -f "$dir/data/postmaster.pid" ]]; then
        as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 30 -s stop >/dev/null 2>&1 \
            || as_pg "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -s stop >/dev/null 2>&1 \
            || true
    fi
}

cmd_stop() {
    local dir=$1 bindir
    [[ -d "$dir" ]] || return 0
    dir=$(cd "$dir" && pwd)
    # Refuse to delete a directory this script did not set up.
    [[ -e "$dir/.pg_cluster" ]] || die "stop: $dir was not created by pg_cluster.sh start; not removing it"
    bindir=$(find_bindir)
    cmd_stop_server "$dir" "$bindir"
    rm -rf -- "$dir"
}

case "${1:-}" in
    start) [[ $# -eq 2 ]] || die "usage: pg_cluster.sh start DIR"; cmd_start "$2" ;;
    stop)  [[ $# -eq 2 ]] || die "usage: pg_cluster.sh stop DIR"; cmd_stop "$2" ;;
    *) echo "usage: pg_cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
