#!/usr/bin/env bash
# with_pg.sh COMMAND [ARGS...] — runs COMMAND against a throwaway PostgreSQL cluster
# (pg_cluster.sh) with LEAKD_TEST_DATABASE_URL exported; stops and removes the cluster
# afterwards, whatever happens, and exits with COMMAND's exit code (1 if the cluster failed
# to start).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[[ $# -ge 1 ]] || { echo "usage: with_pg.sh COMMAND [ARGS...]" >&2; exit 2; }

dir=$(mktemp -d /tmp/leakd-pg.XXXXXX) || exit 1
cleanup() { "$here/pg_cluster.sh" stop "$dir" || true; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

out=$("$here/pg_cluster.sh" start "$dir") || { echo "with_pg.sh: could not start PostgreSQL" >&2; exit 1; }
url=${out#LEAKD_DATABASE_URL=}
export LEAKD_TEST_DATABASE_URL="$url"

"$@"
rc=$?
exit "$rc"
