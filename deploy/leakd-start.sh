#!/bin/sh
# leakd-start.sh — starts leakd the same way in the container image and in the quickstart:
# waits for PostgreSQL, applies pending migrations, creates the first app and its keys when
# asked to (so nobody has to exec into a container), then runs `leakd serve`.
#
# Environment (besides every LEAKD_* setting of leakd itself, docs/configuration.md):
#   LEAKD_BIN                 the leakd binary (default: leakd on PATH)
#   LEAKD_DB_WAIT             seconds to wait for the database at start (default 60)
#   LEAKD_BOOTSTRAP_APP       create this app if it does not exist yet, with one ingest key,
#                             one read key and one admin key
#   LEAKD_BOOTSTRAP_KEYS_FILE where those keys are written, once, mode 0600
#                             (default $LEAKD_DATA_DIR/bootstrap-keys.env); they are never
#                             printed, and the file is never rewritten
set -eu

leakd=${LEAKD_BIN:-leakd}
wait_s=${LEAKD_DB_WAIT:-60}
data_dir=${LEAKD_DATA_DIR:-./leakd-data}

say() { echo "leakd-start: $*" >&2; }

mkdir -p "$data_dir"

# `leakd migrate` takes an advisory lock, so instances starting together do not race.
i=0
until out=$("$leakd" migrate 2>&1); do
  i=$((i + 1))
  if [ "$i" -ge "$wait_s" ]; then
    say "the database is still unreachable after ${wait_s} s: $out"
    exit 1
  fi
  [ "$i" -eq 1 ] && say "waiting for the database ($out)"
  sleep 1
done
say "$out"

if [ -n "${LEAKD_BOOTSTRAP_APP:-}" ]; then
  keys=${LEAKD_BOOTSTRAP_KEYS_FILE:-$data_dir/bootstrap-keys.env}
  if "$leakd" app list 2>/dev/null | awk 'NR > 1 {print $2}' | grep -qx "$LEAKD_BOOTSTRAP_APP"; then
    say "app $LEAKD_BOOTSTRAP_APP exists; its keys are in $keys (if this instance made them)"
  else
    umask 077
    created=$("$leakd" app create "$LEAKD_BOOTSTRAP_APP")
    admin=$("$leakd" key create "$LEAKD_BOOTSTRAP_APP" admin)
    ingest=$(printf '%s\n' "$created" | sed -n 's/.*ingest key: *\(lw_ingest_[^ ]*\).*/\1/p')
    read_key=$(printf '%s\n' "$created" | sed -n 's/.*read key: *\(lw_read_[^ ]*\).*/\1/p')
    admin_key=$(printf '%s\n' "$admin" | grep -o 'lw_admin_[A-Za-z0-9_]*' | head -n 1)
    tmp="$keys.tmp.$$"
    {
      echo "# Keys of app $LEAKD_BOOTSTRAP_APP, made by leakd-start.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)."
      echo "LEAKWATCH_APP=$LEAKD_BOOTSTRAP_APP"
      echo "LEAKWATCH_INGEST_KEY=$ingest"
      echo "LEAKWATCH_READ_KEY=$read_key"
      echo "LEAKWATCH_ADMIN_KEY=$admin_key"
    } > "$tmp"
    mv "$tmp" "$keys"
    say "created app $LEAKD_BOOTSTRAP_APP; its ingest, read and admin keys are in $keys"
  fi
fi

exec "$leakd" serve "$@"
