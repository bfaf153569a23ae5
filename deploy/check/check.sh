#!/bin/bash
# check.sh — the one-shot check of deploy/docker-compose.yml: is the stack really working?
#
#  1. waits for leakd's /readyz (the database is reachable) and checks /healthz;
#  2. reads the keys leakd-start.sh made for the bootstrap app from leakd's data volume
#     (mounted read-only here);
#  3. uploads /check/check.hprof.zst (a trimmed, zstd'd synthetic dump with one known leak, made
#     at image build time by gen_heap + `leakscan strip`) with the ingest key: 202, queued;
#  4. checks leakd does not run as root (the owner of blobs/<app>), and that the blob it stored is
#     byte for byte the upload (when the workers have not already analyzed and deleted it);
#  5. polls GET /v1/reports/{id} with the read key until the workers are done with it, then
#     checks the dump was deleted (or kept, with LEAKD_KEEP_BLOBS=1);
#  6. checks the report found exactly the leak leakscan found in the same file at build time
#     (/check/expected.json: signature, kind, short description, count);
#  7. reads the leak group back (GET /v1/apps/{app}/leaks/{signature}): signature, kind, leaking
#     class, trace, our report among its recent occurrences; and finds it in the app's list;
#  8. checks that a read without a key is refused (401), and one with the ingest key (403);
#  9. reads /metrics on the metrics port: workers alive, database up.
# Exits 0 when all hold, 1 on the first that does not (saying which), 2 on a setup problem.
#
# Environment: LEAKWATCH_URL (http://leakd:8080), LEAKWATCH_METRICS_URL
# (http://leakd:9090/metrics), LEAKWATCH_APP (demo), LEAKWATCH_KEYS_FILE
# (/var/lib/leakd/bootstrap-keys.env), LEAKWATCH_DATA_DIR (/var/lib/leakd; blob check skipped
# when absent), LEAKWATCH_INGEST_KEY / LEAKWATCH_READ_KEY (instead of the keys file),
# LEAKD_KEEP_BLOBS (as given to leakd, 0), CHECK_TIMEOUT (seconds for each wait, 120),
# CHECK_DIR (where the dump and expected.json are, /check).
set -uo pipefail

url=${LEAKWATCH_URL:-http://leakd:8080}
metrics_url=${LEAKWATCH_METRICS_URL:-http://leakd:9090/metrics}
app=${LEAKWATCH_APP:-demo}
keys_file=${LEAKWATCH_KEYS_FILE:-/var/lib/leakd/bootstrap-keys.env}
data_dir=${LEAKWATCH_DATA_DIR:-/var/lib/leakd}
timeout_s=${CHECK_TIMEOUT:-120}
check_dir=${CHECK_DIR:-/check}
dump=$check_dir/check.hprof.zst
expected=$check_dir/expected.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

step=0
ok()   { echo "check: ok    $*"; }
fail() { echo "check: FAIL  $*" >&2; echo "check: FAILED at step $step" >&2; exit 1; }
next() { step=$((step + 1)); echo "check: --- $step. $*"; }

# http METHOD PATH [curl args...]: body to $tmp/body, status to stdout ("000" when no answer).
http() {
  local method=$1 path=$2; shift 2
  curl -sS -o "$tmp/body" -w '%{http_code}' --max-time 60 -X "$method" "$@" "$url$path" 2>"$tmp/curl.err" || true
}
body() { head -c 1500 "$tmp/body"; echo; }

# ---- 1 ---------------------------------------------------------------------------------------
next "wait for $url/readyz (up to ${timeout_s}s)"
deadline=$((SECONDS + timeout_s))
while :; do
  code=$(http GET /readyz)
  [ "$code" = 200 ] && break
  [ $SECONDS -ge $deadline ] && fail "/readyz still answers '$code' after ${timeout_s}s: $(cat "$tmp/curl.err") $(body)"
  sleep 1
done
ok "/readyz 200 $(body)"
code=$(http GET /healthz)
[ "$code" = 200 ] || fail "/healthz answered $code: $(body)"
ok "/healthz 200"

# ---- 2 ---------------------------------------------------------------------------------------
next "read the bootstrap keys"
ingest=${LEAKWATCH_INGEST_KEY:-}
read_key=${LEAKWATCH_READ_KEY:-}
if [ -z "$ingest" ] || [ -z "$read_key" ]; then
  [ -r "$keys_file" ] || { echo "check: cannot read $keys_file (is leakd's data volume mounted, and LEAKD_BOOTSTRAP_APP set?)" >&2; exit 2; }
  kv() { sed -n "s/^$1=//p" "$keys_file" | tail -n 1; }
  file_app=$(kv LEAKWATCH_APP)
  ingest=$(kv LEAKWATCH_INGEST_KEY)
  read_key=$(kv LEAKWATCH_READ_KEY)
  [ "$file_app" = "$app" ] || fail "$keys_file is for app '$file_app', expected '$app'"
fi
[[ $ingest =~ ^lw_ingest_[0-9]+_[0-9A-Za-z]+$ ]] || fail "no valid ingest key (got '${ingest:0:12}...')"
[[ $read_key =~ ^lw_read_[0-9]+_[0-9A-Za-z]+$ ]] || fail "no valid read key (got '${read_key:0:10}...')"
ok "ingest key ${ingest%_*}_..., read key ${read_key%_*}_... for app $app"

# ---- 3 ---------------------------------------------------------------------------------------
next "upload $(basename "$dump") ($(stat -c %s "$dump") bytes) with the ingest key"
rid=$(cat /proc/sys/kernel/random/uuid)
install_id=$(cat /proc/sys/kernel/random/uuid)
jq -n --arg rid "$rid" --arg app "$app" --arg iid "$install_id" '{
  report_id: $rid, app: $app, app_version: "1.0-check", build: 1, sdk_version: "0.1.0",
  runtime: "jvm", mode: "heap", created_at: (now | todate), trigger: "manual",
  device: {install_id: $iid, manufacturer: "Leakwatch", model: "compose-check", os: "linux",
           os_version: "bookworm", abi: "x86_64"},
  heap: {used_bytes: 1000000, max_bytes: 4000000}, retained: [], dropped: 0}' > "$tmp/meta.json" \
  || { echo "check: jq failed to make meta" >&2; exit 2; }
code=$(http POST /v1/reports -H "Authorization: Bearer $ingest" \
  -F "meta=@$tmp/meta.json;type=application/json" -F "heap=@$dump;type=application/zstd")
[ "$code" = 202 ] || fail "POST /v1/reports answered $code (expected 202): $(cat "$tmp/curl.err") $(body)"
jq -e --arg rid "$rid" --arg app "$app" '.id == $rid and .app == $app and .mode == "heap"
  and (.status == "queued" or .status == "analyzing" or .status == "done")' "$tmp/body" >/dev/null \
  || fail "the 202 does not describe our report: $(body)"
ok "202, report $rid $(jq -r .status "$tmp/body")"

# ---- 4 ---------------------------------------------------------------------------------------
next "the stored blob"
blob=$data_dir/blobs/$app/$rid.hprof.zst
if [ -d "$data_dir/blobs" ]; then
  [ -d "$data_dir/blobs/$app" ] || fail "$data_dir/blobs/$app does not exist: $(ls -la "$data_dir/blobs" 2>&1 | head -5)"
  owner=$(stat -c %u "$data_dir/blobs/$app")
  [ "$owner" != 0 ] || fail "$data_dir/blobs/$app is owned by root: leakd runs as root (the image should run it as user leakd)"
  ok "$data_dir/blobs/$app was made by uid $owner (not root)"
  # The workers may already have analyzed it and deleted it (LEAKD_KEEP_BLOBS=0): compare when
  # it is still there.
  if cp "$blob" "$tmp/blob" 2>/dev/null; then
    cmp -s "$tmp/blob" "$dump" || fail "$blob differs from the upload"
    ok "$blob is the upload, byte for byte"
  else
    echo "check: skip  $blob is already gone (analyzed at once): no byte comparison"
  fi
else
  echo "check: skip  $data_dir/blobs is not mounted here"
fi

# ---- 5 ---------------------------------------------------------------------------------------
next "wait for the analysis (GET /v1/reports/$rid, up to ${timeout_s}s)"
deadline=$((SECONDS + timeout_s))
while :; do
  code=$(http GET "/v1/reports/$rid" -H "Authorization: Bearer $read_key")
  [ "$code" = 200 ] || fail "GET /v1/reports/$rid answered $code: $(body)"
  status=$(jq -r .status "$tmp/body")
  case $status in
    done) break ;;
    failed) fail "the analysis failed: $(jq -r .error "$tmp/body")" ;;
    queued|analyzing) ;;
    *) fail "unexpected status '$status': $(body)" ;;
  esac
  [ $SECONDS -ge $deadline ] && fail "report still '$status' after ${timeout_s}s: $(body)"
  sleep 1
done
cp "$tmp/body" "$tmp/report.json"
ok "done after $(jq -r .attempts "$tmp/report.json") attempt(s), analyzed_at $(jq -r .analyzed_at "$tmp/report.json")"
if [ -d "$data_dir/blobs" ]; then
  if [ "${LEAKD_KEEP_BLOBS:-0}" = 1 ]; then
    [ -f "$blob" ] || fail "LEAKD_KEEP_BLOBS=1, yet $blob was deleted after the analysis"
    ok "the dump is kept after the analysis (LEAKD_KEEP_BLOBS=1)"
  else
    for _ in $(seq 1 50); do [ -e "$blob" ] || break; sleep 0.2; done
    [ ! -e "$blob" ] || fail "$blob is still there 10 s after the analysis (LEAKD_KEEP_BLOBS=0 deletes it)"
    ok "the dump was deleted once analyzed (LEAKD_KEEP_BLOBS=0)"
  fi
fi

# ---- 6 ---------------------------------------------------------------------------------------
next "the report's leaks match what leakscan found in the same dump"
sig=$(jq -r '.leaks[0].signature' "$expected")
kind=$(jq -r '.leaks[0].kind' "$expected")
short=$(jq -r '.leaks[0].short_description' "$expected")
leaking_class=$(jq -r '.leaks[0].traces[0].elements[-1].class' "$expected")
want=$(jq -c '[.leaks[] | {signature, kind, short_description, count}]' "$expected")
got=$(jq -c '[.leaks[] | {signature, kind, short_description, count}]' "$tmp/report.json")
[ "$(jq -r .leaks_found "$tmp/report.json")" = "$(jq '.leaks | length' "$expected")" ] \
  || fail "leaks_found is $(jq -r .leaks_found "$tmp/report.json"), leakscan found $(jq '.leaks | length' "$expected")"
[ "$got" = "$want" ] || fail "the server found $got; leakscan found $want"
ok "1 leak: $kind $short, signature $sig"

# ---- 7 ---------------------------------------------------------------------------------------
next "the leak group (GET /v1/apps/$app/leaks/$sig)"
code=$(http GET "/v1/apps/$app/leaks/$sig" -H "Authorization: Bearer $read_key")
[ "$code" = 200 ] || fail "GET /v1/apps/$app/leaks/$sig answered $code: $(body)"
cp "$tmp/body" "$tmp/group.json"
jq -e --arg sig "$sig" '.signature == $sig' "$tmp/group.json" >/dev/null || fail "signature: $(jq -r .signature "$tmp/group.json") != $sig"
jq -e --arg k "$kind" '.kind == $k' "$tmp/group.json" >/dev/null || fail "kind: $(jq -r .kind "$tmp/group.json") != $kind"
jq -e --arg c "$leaking_class" '.leaking_class == $c' "$tmp/group.json" >/dev/null \
  || fail "leaking_class: $(jq -r .leaking_class "$tmp/group.json") != $leaking_class"
jq -e --arg s "$short" '.short_description == $s and .occurrences >= 1 and .leaked_objects >= 1 and .devices >= 1
  and .grouping_version == 1' "$tmp/group.json" >/dev/null || fail "group counters or description: $(body)"
jq -e --arg rid "$rid" '[.recent_occurrences[].report_id] | index($rid) != null' "$tmp/group.json" >/dev/null \
  || fail "report $rid is not among the group's recent occurrences: $(jq -c .recent_occurrences "$tmp/group.json")"
# The representative trace: the path leakscan printed, element by element.
want_path=$(jq -c '[.leaks[0].traces[0].elements[] | {class, object_kind, leaking}]' "$expected")
got_path=$(jq -c '[.representative_trace.json.elements[] | {class, object_kind, leaking}]' "$tmp/group.json")
[ "$got_path" = "$want_path" ] || fail "representative trace $got_path != leakscan's $want_path"
jq -e --arg c "$leaking_class" '.representative_trace.text | contains("╰→ " + $c + " instance")' "$tmp/group.json" >/dev/null \
  || fail "the trace text does not end at $leaking_class: $(jq -r .representative_trace.text "$tmp/group.json" | head -20)"
ok "group $sig: kind $(jq -r .kind "$tmp/group.json"), $(jq -r .leaking_class "$tmp/group.json"), $(jq -r .occurrences "$tmp/group.json") occurrence(s), status $(jq -r .status "$tmp/group.json")"
jq -r .representative_trace.text "$tmp/group.json" | sed 's/^/check:       /'
code=$(http GET "/v1/apps/$app/leaks?sort=occurrences&kind=$kind" -H "Authorization: Bearer $read_key")
[ "$code" = 200 ] || fail "GET /v1/apps/$app/leaks answered $code: $(body)"
jq -e --arg sig "$sig" '[.leaks[].signature] | index($sig) != null' "$tmp/body" >/dev/null \
  || fail "the app's leak list does not hold $sig: $(body)"
ok "the app's leak list holds it"

# ---- 8 ---------------------------------------------------------------------------------------
next "no key, no data"
code=$(http GET "/v1/apps/$app/leaks/$sig")
[ "$code" = 401 ] || fail "GET without a key answered $code (expected 401): $(body)"
code=$(http GET "/v1/apps/$app/leaks/$sig" -H "Authorization: Bearer $ingest")
[ "$code" = 403 ] || fail "GET with an ingest key answered $code (expected 403): $(body)"
ok "401 without a key, 403 with the ingest key"

# ---- 9 ---------------------------------------------------------------------------------------
next "metrics ($metrics_url)"
code=$(curl -sS -o "$tmp/body" -w '%{http_code}' --max-time 30 "$metrics_url" 2>"$tmp/curl.err" || true)
[ "$code" = 200 ] || fail "GET $metrics_url answered '$code': $(cat "$tmp/curl.err") $(body)"
workers=$(sed -n 's/^leakd_workers_alive \([0-9]*\)$/\1/p' "$tmp/body")
[ -n "$workers" ] && [ "$workers" -ge 1 ] || fail "leakd_workers_alive is '${workers}': $(grep -m3 workers "$tmp/body")"
grep -q '^leakd_database_up 1$' "$tmp/body" || fail "leakd_database_up is not 1: $(grep -m3 database_up "$tmp/body")"
ok "/metrics: $workers worker(s) alive, database up"

echo "check: PASSED: leakd at $url took a heap dump, analyzed it and grouped its leak ($sig)"
exit 0
