#!/usr/bin/env bash
# quickstart.sh — the README's run command. From a fresh checkout (Debian 12):
#
#   1. installs the Debian packages (deploy/install-deps.sh; root or sudo),
#   2. builds what the demo needs into build/ (leakd, leakscan, the JVM agent, the demo jar),
#   3. starts a private PostgreSQL cluster (its own data directory, 127.0.0.1 only; as the
#      `postgres` user when run as root),
#   4. starts leakd on 127.0.0.1 through deploy/leakd-start.sh, which applies the migrations
#      and creates the app `demo` with its keys (.leakwatch/keys.env),
#   5. runs the bundled Java demo under the JVM agent: it leaks a NewsScreen through a static
#      listener registry, the agent dumps the heap, trims it and uploads it to leakd,
#   6. waits until leakd has analyzed the report, then prints the leak group's rendered trace,
#      the API call that returns it and how to stop everything (./deploy/stop.sh).
#
# Running it again reuses the running PostgreSQL and leakd (restarting whichever is down, and
# leakd when its binary was rebuilt), keeps the keys, and adds one more occurrence to the group.
#
# Everything lives under .leakwatch/ in the repository (see .leakwatch/README once it ran).
# Nothing global is touched besides the Debian packages; as root, the PostgreSQL cluster is
# put where the postgres user can reach it (see pg_location below).
#
# Environment (all optional):
#   LEAKWATCH_PORT       leakd's API port on 127.0.0.1 the first time (default 18080, or any
#                        free port if that one is taken; 0 = any free port). Kept afterwards.
#   LEAKWATCH_BUILD_DIR  use this existing build directory (configured with LW_TESTS=ON, not
#                        sanitized) instead of building into build/; nothing is rebuilt
#   PG_BINDIR            PostgreSQL server binaries (default /usr/lib/postgresql/15/bin)
#   LEAKWATCH_JOBS       build parallelism (default: nproc)
#
# Exit status: 0 when the leak was uploaded, analyzed and printed; 1 on any failure, with a
# message naming the step and the log to read.
set -Eeuo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
state="$root/.leakwatch"
app=demo
demo_signature_hint="EventBus.subscribers"
pg_bindir=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
jobs=${LEAKWATCH_JOBS:-$(nproc)}
current_log=""

step() { printf '\n== %s\n' "$*"; }
say() { printf '   %s\n' "$*"; }
die() {
    echo >&2
    echo "quickstart: error: $*" >&2
    if [[ -n "$current_log" && -s "$current_log" ]]; then
        echo "quickstart: last lines of $current_log:" >&2
        tail -n 25 "$current_log" | sed 's/^/    /' >&2
    fi
    logs_hint >&2
    exit 1
}
logs_hint() {
    echo "quickstart: logs: $state/build.log (build), $state/pg/server.log (PostgreSQL),"
    echo "            $state/leakd.log (leakd), $state/demo.log (the demo under the agent)"
}
on_err() { die "unexpected failure (exit $1) at line $2: $3"; }
trap 'on_err $? $LINENO "$BASH_COMMAND"' ERR

# as_pg CMD...: PostgreSQL refuses to run as root, so as root its commands run as `postgres`.
as_pg() {
    if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}
port_in_use() {
    ss -Htln "sport = :$1" 2>/dev/null | grep -q .
}
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# json FILE EXPR: evaluates a Python expression on the JSON document `d` read from FILE.
json() {
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); v = eval(sys.argv[2]); print(v if v is not None else "")' "$1" "$2"
}
# api PATH OUT: GET with the read key; the HTTP status on stdout, the body in OUT.
api() {
    curl -sS -o "$2" -w '%{http_code}' -H "Authorization: Bearer $LEAKWATCH_READ_KEY" \
        "http://127.0.0.1:$api_port$1" 2>>"$state/curl.log" || true  # prints 000 when unreachable
}

mkdir -p "$state"
chmod 755 "$state"
[[ -f "$state/README" ]] || cat >"$state/README" <<'EOF'
State of ./deploy/quickstart.sh (remove it all with ./deploy/stop.sh --purge):
  pg/          the private PostgreSQL cluster: data/, sock/, server.log, port, url (as root
               this is a symlink to a directory the postgres user can reach)
  leakd/       leakd's data directory (blobs/, tmp/)
  leakd.log    leakd's log; leakd.pid, leakd.port, metrics.port
  keys.env     the demo app's ingest, read and admin keys (mode 0600; written once by
               deploy/leakd-start.sh)
  spool/       the demo's SDK spool (reports waiting for upload, the install id)
  demo.log     the last demo run; build.log the last build
EOF

# ---- 1. packages ---------------------------------------------------------------------------
step "1/6 Debian packages (deploy/install-deps.sh; needs root or sudo)"
"$root/deploy/install-deps.sh" || die "installing the Debian packages failed (see above)"
[[ -x "$pg_bindir/initdb" ]] || die "no PostgreSQL server binaries in $pg_bindir (postgresql-15); set PG_BINDIR"

# ---- 2. build ------------------------------------------------------------------------------
step "2/6 build"
if [[ -n "${LEAKWATCH_BUILD_DIR:-}" ]]; then
    build=$(cd "$LEAKWATCH_BUILD_DIR" && pwd) || die "LEAKWATCH_BUILD_DIR=$LEAKWATCH_BUILD_DIR is not a directory"
    say "using the existing build in $build (LEAKWATCH_BUILD_DIR; nothing is rebuilt)"
else
    build="$root/build"
    current_log="$state/build.log"
    t0=$SECONDS
    say "configuring and building leakd, leakscan, the JVM agent and the demo into build/ (log: .leakwatch/build.log)"
    # The same configuration as deploy/test.sh, so both share build/ without reconfiguring.
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLW_SANITIZE=OFF >"$current_log" 2>&1 \
        || die "cmake configure failed"
    cmake --build "$build" -j "$jobs" --target leakd leakscan leakwatch_jvm leakwatch_jar demo_jar >>"$current_log" 2>&1 \
        || die "the build failed"
    say "built in $((SECONDS - t0)) s"
    current_log=""
fi
leakd_bin="$build/server/leakd"
agent="$build/client/libleakwatch_jvm.so"
facade="$build/client/leakwatch.jar"
demo_jar="$build/tests/demo.jar"
for f in "$leakd_bin" "$build/shared/leakscan" "$agent" "$facade" "$demo_jar"; do
    [[ -e "$f" ]] || die "$f is missing from the build (is a JDK 17 installed? is $build configured with LW_TESTS=ON?)"
done

# ---- 3. PostgreSQL -------------------------------------------------------------------------
step "3/6 private PostgreSQL cluster"
# Where the cluster lives. Normally $state/pg. As root PostgreSQL runs as `postgres`, which
# must be able to traverse every parent directory: a checkout under /root (mode 0700) is not
# reachable. Rather than loosening the permissions of someone's home directory, the cluster then
# goes into postgres's own home (/var/lib/postgresql/leakwatch-quickstart-<hash of this repo's
# path>), and $state/pg is a symlink to it. (Not /tmp or /var/tmp: tmpfiles cleaners would eat
# a stopped cluster.) The unix socket path must also stay short (< 108 bytes).
pg_location() {
    local hash base
    if (( ${#state} < 70 )) && { [[ $(id -u) -ne 0 ]] || runuser -u postgres -- test -x "$state" 2>/dev/null; }; then
        echo "$state/pg"
        return
    fi
    hash=$(printf '%s' "$root" | sha256sum | cut -c1-12)
    if [[ $(id -u) -eq 0 ]]; then
        base=$(getent passwd postgres | cut -d: -f6)
        [[ -d "$base" ]] || die "the postgres user's home ($base) does not exist"
        echo "$base/leakwatch-quickstart-$hash"
    else
        echo "/var/tmp/leakwatch-quickstart-$(id -u)-$hash"
    fi
}
if [[ -L "$state/pg" || -d "$state/pg" ]]; then
    pgdir=$(readlink -f "$state/pg")
else
    pgdir=$(pg_location)
    if [[ "$pgdir" != "$state/pg" ]]; then
        say "PostgreSQL runs as postgres, which cannot reach $state: its cluster goes to $pgdir"
        say "($state/pg links to it)"
        ln -sfn "$pgdir" "$state/pg"
    fi
fi
# A cluster whose creation failed half-way (no PG_VERSION) is removed and made again.
if [[ -d "$pgdir" && ! -f "$pgdir/data/PG_VERSION" && -e "$pgdir/.pg_cluster" ]]; then
    say "removing the half-made cluster in $pgdir"
    rm -rf -- "$pgdir"
fi
current_log="$pgdir/server.log"
if [[ ! -f "$pgdir/data/PG_VERSION" ]]; then
    [[ -e "$pgdir" && -n "$(ls -A "$pgdir" 2>/dev/null)" ]] \
        && die "$pgdir exists but holds no cluster; remove it (or run ./deploy/stop.sh --purge)"
    mkdir -p "$pgdir"
    say "creating the cluster in $pgdir (tests/server/pg_cluster.sh)"
    "$root/tests/server/pg_cluster.sh" start "$pgdir" >/dev/null 2>"$state/pg-create.log" \
        || { current_log="$state/pg-create.log"; die "creating the PostgreSQL cluster failed"; }
    pg_port=$(cat "$pgdir/port")
    # pg_cluster.sh passes its settings on the command line; write the ones a restart needs
    # into the cluster (postgresql.auto.conf), so a plain `pg_ctl start` brings it back as is.
    "$pg_bindir/psql" -X -q -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        -c "ALTER SYSTEM SET port = $pg_port" \
        -c "ALTER SYSTEM SET listen_addresses = '127.0.0.1'" \
        -c "ALTER SYSTEM SET unix_socket_directories = '$pgdir/sock'" >/dev/null \
        || die "configuring the new cluster failed"
    say "started PostgreSQL (new cluster) on 127.0.0.1:$pg_port"
elif as_pg "$pg_bindir/pg_ctl" -D "$pgdir/data" status >/dev/null 2>&1; then
    pg_port=$(cat "$pgdir/port")
    say "reusing the running PostgreSQL on 127.0.0.1:$pg_port ($pgdir)"
else
    pg_port=$(cat "$pgdir/port")
    opts=""
    if port_in_use "$pg_port"; then
        old=$pg_port
        pg_port=$(free_port)
        opts="-p $pg_port"
        say "port $old is taken now: PostgreSQL moves to $pg_port"
    fi
    as_pg "$pg_bindir/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w -t 60 -s ${opts:+-o "$opts"} start >/dev/null 2>&1 \
        || die "PostgreSQL did not start (cluster $pgdir)"
    if [[ -n "$opts" ]]; then
        "$pg_bindir/psql" -X -q -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -c "ALTER SYSTEM SET port = $pg_port" >/dev/null
        as_pg sh -c "echo $pg_port > '$pgdir/port'"
    fi
    say "restarted PostgreSQL on 127.0.0.1:$pg_port ($pgdir)"
fi
for _ in $(seq 1 100); do
    "$pg_bindir/pg_isready" -q -h 127.0.0.1 -p "$pg_port" -d postgres && break
    sleep 0.1
done
"$pg_bindir/pg_isready" -q -h 127.0.0.1 -p "$pg_port" -d postgres || die "PostgreSQL does not answer on 127.0.0.1:$pg_port"
db_url="postgresql://postgres@127.0.0.1:$pg_port/leakwatch"
current_log=""

# ---- 4. leakd ------------------------------------------------------------------------------
step "4/6 leakd (deploy/leakd-start.sh: migrations, app \"$app\" and its keys, serve)"
pidfile="$state/leakd.pid"
leakd_pid=""
# Is the leakd of the last run alive, ours, running the current binary and ready?
if [[ -f "$pidfile" ]]; then
    pid=$(cat "$pidfile")
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null \
        && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'leakd serve'; then
        exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
        port=$(cat "$state/leakd.port" 2>/dev/null || true)
        if [[ "$exe" == "$(readlink -f "$leakd_bin")" ]] \
            && curl -fsS -m 5 "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
            leakd_pid=$pid
            api_port=$port
            say "reusing the running leakd (pid $pid) on http://127.0.0.1:$api_port"
        else
            say "restarting leakd (pid $pid): its binary was rebuilt, or it does not answer /readyz"
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL -- "-$pid" 2>/dev/null || true
        fi
    fi
    # A leakd that was SIGKILLed leaves its workers running (they do not die with it): end
    # the leakd processes still in its process group (setsid made its pid the group id).
    if [[ -z "$leakd_pid" && "$pid" =~ ^[0-9]+$ ]]; then
        for p in $(pgrep -g "$pid" 2>/dev/null || true); do
            if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q 'leakd \(serve\|worker\)'; then
                say "ending leakd process $p left over from the last run"
                kill -KILL "$p" 2>/dev/null || true
            fi
        done
    fi
fi
if [[ -z "$leakd_pid" ]]; then
    api_port=$(cat "$state/leakd.port" 2>/dev/null || echo "${LEAKWATCH_PORT:-18080}")
    [[ "$api_port" == 0 ]] || ! port_in_use "$api_port" || api_port=0
    [[ "$api_port" != 0 ]] || api_port=$(free_port)
    metrics_port=$(cat "$state/metrics.port" 2>/dev/null || echo 0)
    if [[ "$metrics_port" == 0 || "$metrics_port" == "$api_port" ]] || port_in_use "$metrics_port"; then
        metrics_port=$(free_port)
        [[ "$metrics_port" != "$api_port" ]] || metrics_port=$(free_port)
    fi
    echo "$api_port" >"$state/leakd.port"
    echo "$metrics_port" >"$state/metrics.port"
    current_log="$state/leakd.log"
    printf '\n---- %s quickstart starts leakd\n' "$(date -u +%FT%TZ)" >>"$current_log"
    # setsid: leakd gets its own session, so it outlives this script (and a Ctrl-C in it).
    # leakd-start.sh execs leakd, so $! is leakd's pid.
    env LEAKD_BIN="$leakd_bin" \
        LEAKD_DATABASE_URL="$db_url" \
        LEAKD_LISTEN="127.0.0.1:$api_port" \
        LEAKD_METRICS_LISTEN="127.0.0.1:$metrics_port" \
        LEAKD_DATA_DIR="$state/leakd" \
        LEAKD_MIGRATIONS_DIR="$root/migrations" \
        LEAKD_WORKERS=2 \
        LEAKD_BOOTSTRAP_APP="$app" \
        LEAKD_BOOTSTRAP_KEYS_FILE="$state/keys.env" \
        setsid "$root/deploy/leakd-start.sh" >>"$current_log" 2>&1 </dev/null &
    leakd_pid=$!
    echo "$leakd_pid" >"$pidfile"
    ready=0
    for _ in $(seq 1 600); do
        kill -0 "$leakd_pid" 2>/dev/null || die "leakd exited during start-up"
        if curl -fsS -m 2 "http://127.0.0.1:$api_port/readyz" >/dev/null 2>&1; then ready=1; break; fi
        sleep 0.1
    done
    (( ready )) || die "leakd is not ready on http://127.0.0.1:$api_port after 60 s"
    say "leakd (pid $leakd_pid) is ready on http://127.0.0.1:$api_port (metrics: http://127.0.0.1:$metrics_port/metrics)"
    current_log=""
fi
[[ -s "$state/keys.env" ]] || die "$state/keys.env is missing: the app \"$app\" exists but its keys are gone.
  Start over with ./deploy/stop.sh --purge (deletes the demo's database), or make keys with
  LEAKD_DATABASE_URL=$db_url $leakd_bin key create $app read"
# shellcheck disable=SC1091
. "$state/keys.env"
[[ -n "${LEAKWATCH_INGEST_KEY:-}" && -n "${LEAKWATCH_READ_KEY:-}" ]] || die "$state/keys.env lacks the ingest or read key"
say "app \"$app\": keys in .leakwatch/keys.env"

# ---- 5. the demo under the agent ----------------------------------------------------------
step "5/6 the demo app under the JVM agent (leaks a NewsScreen through EventBus.subscribers)"
current_log="$state/demo.log"
# retained_delay_ms=300: the agent checks the watched screen 0.3 s after onDestroy (the SDK's
# default is 5 s); the demo asks for the dump after --wait-ms, then lingers while the agent
# dumps, trims and uploads.
opts="server=http://127.0.0.1:$api_port,key=$LEAKWATCH_INGEST_KEY,app=$app,version=1.0,build=1"
opts+=",spool=$state/spool,retained_delay_ms=300"
java -Xmx256m "-agentpath:$agent=$opts" -cp "$facade:$demo_jar" io.leakwatch.demo.DemoApp \
    --wait-ms 1500 --linger 5 >"$current_log" 2>&1 \
    || die "the demo failed (exit $?)"
sed 's/^/   | /' "$current_log"
mapfile -t reports < <(sed -n 's/.*report \([0-9a-f-]\{36\}\) uploaded.*/\1/p' "$current_log")
(( ${#reports[@]} > 0 )) || die "the agent uploaded no report (it stays in .leakwatch/spool and is sent by the next run)"

# ---- 6. wait for the analysis, print the group ---------------------------------------------
step "6/6 leakd analyzes the dump and groups the leak"
current_log="$state/leakd.log"
body="$state/.api.json"
report=${reports[-1]}
status=""
for _ in $(seq 1 240); do
    code=$(api "/v1/reports/$report" "$body")
    if [[ "$code" == 200 ]]; then
        status=$(json "$body" 'd["status"]')
        [[ "$status" == "done" || "$status" == "failed" ]] && break
    elif [[ "$code" != 503 && "$code" != 000 ]]; then
        die "GET /v1/reports/$report answered $code: $(cat "$body")"
    fi
    sleep 0.5
done
case "$status" in
    done) ;;
    failed) die "leakd could not analyze report $report: $(json "$body" 'd["error"]')" ;;
    *) die "report $report is still ${status:-unknown} after 120 s" ;;
esac
signature=$(json "$body" 'd["leaks"][0]["signature"] if d["leaks"] else None')
[[ -n "$signature" ]] || die "report $report was analyzed but no leak was found in it"
say "report $report: $(json "$body" 'd["status"]'), $(json "$body" 'd["leaks_found"]') leak(s)"

code=$(api "/v1/apps/$app/leaks/$signature" "$body")
[[ "$code" == 200 ]] || die "GET /v1/apps/$app/leaks/$signature answered $code: $(cat "$body")"
trace=$(json "$body" 'd["representative_trace"]["text"]')
grep -q "$demo_signature_hint" <<<"$trace" || die "the demo's leak should go through $demo_signature_hint; leakd found:
$trace"
current_log=""

echo
echo "Leak group $signature of app \"$app\":"
json "$body" '"  %s — %s, leaking %s\n  occurrences %d, devices %d, first seen %s, last seen %s, status %s" % (d["short_description"], d["kind"], d["leaking_class"], d["occurrences"], d["devices"], d["first_seen"], d["last_seen"], d["status"])'
echo
echo "--- representative trace (GET /v1/apps/$app/leaks/$signature -> representative_trace.text) ---"
printf '%s\n' "$trace"
echo "--- end of trace ---"
cat <<EOF

signature: $signature
occurrences: $(json "$body" 'd["occurrences"]')

The same group from the API (the read key is LEAKWATCH_READ_KEY in .leakwatch/keys.env):
  curl -H "Authorization: Bearer $LEAKWATCH_READ_KEY" http://127.0.0.1:$api_port/v1/apps/$app/leaks/$signature
All groups, most frequent first:
  curl -H "Authorization: Bearer $LEAKWATCH_READ_KEY" 'http://127.0.0.1:$api_port/v1/apps/$app/leaks?sort=occurrences'

leakd:      http://127.0.0.1:$api_port (pid $leakd_pid, log .leakwatch/leakd.log), metrics http://127.0.0.1:$(cat "$state/metrics.port")/metrics
PostgreSQL: $db_url (cluster $pgdir, log .leakwatch/pg/server.log)
Run ./deploy/quickstart.sh again to send the demo's leak once more (occurrences goes up).
Stop everything:           ./deploy/stop.sh
Stop and delete the state: ./deploy/stop.sh --purge
EOF
