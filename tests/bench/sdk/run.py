#!/usr/bin/env python3
"""run.py — the SDK benchmark (README.md here): the real libleakwatch, trimmer and JVM agent.

    tests/bench/sdk/run.py BUILD_DIR [--mb 1024] [--seed 1] [--random-fraction 0.6]
                           [--workdir DIR] [--jvm-heap-mb 1000] [--watch-calls 200000] [--no-jvm]

1. gen_sdk_heap writes WORKDIR/sdk-<mb>.hprof (reused while generator version, size, seed and
   fraction match its .params file).
2. bench_sdk: lw_watch cost (fake adapter), lw_trim_file -> .zst level 3 vs lw_zstd_compress_file
   level 3 of the raw dump (same run, one core), retained -> spooled through the SDK (heap and
   traces mode) with a fake adapter that "dumps" by linking the file.
3. `zstd -3 -T1` of the raw dump (the CLI, as a cross-check of the plain size).
4. leakscan analyze --json of the raw dump and of the trimmed .zst: the leaks must be identical.
5. JVM (unless --no-jvm): SdkBench cost (LeakWatch.watch vs a hooked watch= method, µs per
   call) and SdkBench pipeline (~--jvm-heap-mb of live heap: GC pauses of the retained check
   from -Xlog:gc, the dump pause from the agent's log, retained -> spooled from the agent's
   log lines as they arrive).
Prints a table with the targets, OK/OVER. Never fails on speed; exit 1 when the trimmed dump's
analysis differs from the raw one's or a step fails.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def kv(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z0-9_]+): (.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def leaks_of(leakscan, path):
    r = subprocess.run([leakscan, "analyze", path, "--json", "--quiet"], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise RuntimeError("leakscan analyze %s: %d %s" % (path, r.returncode, r.stderr))
    doc = json.loads(r.stdout)
    return doc["leaks"], doc.get("heap"), doc.get("duration_ms")


def timed_lines(cmd, env=None, timeout=900):
    """Runs cmd; returns [(seconds since start, line)] of its stdout+stderr, as they arrived."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)
    lines = []
    for line in p.stdout:
        lines.append((time.monotonic() - t0, line.rstrip("\n")))
        if time.monotonic() - t0 > timeout:
            p.kill()
            break
    p.wait()
    if p.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s" % (cmd[0], p.returncode, "\n".join(l for _, l in lines[-40:])))
    return lines


def first(lines, pattern):
    rx = re.compile(pattern)
    for t, l in lines:
        m = rx.search(l)
        if m:
            return t, m
    return None, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--random-fraction", default="0.6")
    ap.add_argument("--workdir")
    ap.add_argument("--jvm-heap-mb", type=int, default=1000)
    ap.add_argument("--watch-calls", type=int, default=200000)
    ap.add_argument("--jvm-calls", type=int, default=4000)
    ap.add_argument("--no-jvm", action="store_true")
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    gen = os.environ.get("GEN_SDK_HEAP", os.path.join(b, "tests", "bench", "sdk", "gen_sdk_heap"))
    bench = os.environ.get("BENCH_SDK", os.path.join(b, "tests", "bench", "sdk", "bench_sdk"))
    leakscan = os.environ.get("LEAKSCAN_BIN", os.path.join(b, "shared", "leakscan"))
    agent = os.environ.get("AGENT_LIB", os.path.join(b, "client", "libleakwatch_jvm.so"))
    lw_jar = os.environ.get("LEAKWATCH_JAR", os.path.join(b, "client", "leakwatch.jar"))
    bench_jar = os.environ.get("SDKBENCH_JAR", os.path.join(b, "tests", "bench", "sdk", "sdkbench.jar"))
    java = os.environ.get("JAVA", shutil.which("java") or "java")
    work = os.path.abspath(a.workdir or os.path.join(b, "bench", "sdk"))
    os.makedirs(work, exist_ok=True)
    rows = []  # (figure, value, target, verdict)
    ok = True

    # 1. the dump
    dump = os.path.join(work, "sdk-%d.hprof" % a.mb)
    params = "%s mb=%d seed=%d fraction=%s" % (sh([gen, "--version"]).stdout.strip(), a.mb, a.seed, a.random_fraction)
    pfile = dump + ".params"
    if not (os.path.exists(dump) and os.path.exists(pfile) and open(pfile).read().split("\n")[0] == params and
            open(pfile).read().split("\n")[1] == str(os.path.getsize(dump))):
        print("generating %s ..." % dump, flush=True)
        out = sh([gen, dump, "--mb", str(a.mb), "--seed", str(a.seed), "--random-fraction", a.random_fraction]).stdout
        print(out, end="")
        with open(pfile, "w") as f:
            f.write("%s\n%d\n" % (params, os.path.getsize(dump)))
    raw_mb = os.path.getsize(dump) / 1e6
    print("dump: %s (%.1f MB, %s)" % (dump, raw_mb, params), flush=True)

    # 2. the C benchmark
    print("bench_sdk ...", flush=True)
    shutil.rmtree(os.path.join(work, "c"), ignore_errors=True)
    r = sh([bench, dump, os.path.join(work, "c"), "--watch-calls", str(a.watch_calls), "--leakscan", leakscan])
    print(r.stdout, end="")
    c = kv(r.stdout)
    rows.append(("lw_watch (C, fake adapter), µs/call", "%s mean, %s p50, %s p99" % (
        c["watch_us_mean"], c["watch_us_p50"], c["watch_us_p99"]), "-", ""))
    mbs = float(c["trim_mb_s"])
    cpu_mbs = raw_mb / float(c["trim_cpu_seconds"])
    rows.append(("trim+zstd-3, MB/s of raw input (1 core, wall incl. fsync)", "%.0f (CPU: %.0f)" % (mbs, cpu_mbs),
                 ">= 200", "OK" if mbs >= 200 else "OVER"))
    rows.append(("plain zstd-3 (same library), MB/s", c["plain_zstd3_mb_s"], "-", ""))
    ratio = float(c["trimmed_vs_plain"])
    rows.append(("trimmed+zstd / plain zstd-3 of the raw dump", "%.1f %% (%.1f MB / %.1f MB)" % (
        100 * ratio, int(c["trimmed_zst_bytes"]) / 1e6, int(c["plain_zstd3_bytes"]) / 1e6), "<= 50 %",
        "OK" if ratio <= 0.5 else "OVER"))

    # 3. the zstd CLI, as a cross-check of the plain size
    if shutil.which("zstd"):
        cli = os.path.join(work, "c", "raw-cli.hprof.zst")
        t0 = time.monotonic()
        sh(["zstd", "-3", "-T1", "-q", "-f", dump, "-o", cli])
        t = time.monotonic() - t0
        rows.append(("`zstd -3 -T1` CLI of the raw dump", "%.1f MB, %.0f MB/s; trimmed = %.1f %% of it" % (
            os.path.getsize(cli) / 1e6, raw_mb / t, 100 * int(c["trimmed_zst_bytes"]) / os.path.getsize(cli)),
            "-", ""))
        os.unlink(cli)

    # 4. the analysis of the trimmed file yields exactly the traces of the raw one
    print("leakscan on the raw and trimmed dumps ...", flush=True)
    raw_leaks, raw_heap, raw_d = leaks_of(leakscan, dump)
    trim_leaks, trim_heap, trim_d = leaks_of(leakscan, c["trimmed_path"])
    same = raw_leaks == trim_leaks and raw_heap == trim_heap and len(raw_leaks) == 1
    ok &= same
    rows.append(("leakscan: trimmed traces == raw traces", "%s (%d leak, signature %s; analysis %s ms raw, %s ms trimmed)"
                 % ("identical" if same else "DIFFERENT", len(raw_leaks), raw_leaks[0]["signature"] if raw_leaks else "-",
                    sum(raw_d.values()), sum(trim_d.values())), "identical", "OK" if same else "FAIL"))
    for m in ("heap", "traces"):
        rows.append(("retained -> spooled, SDK + fake adapter, %s mode (s)" % m,
                     "%s (dump link %s, trim/analyze %s)" % (c["pipeline_%s_retained_to_spooled_s" % m],
                                                            c["pipeline_%s_dump_s" % m], c["pipeline_%s_process_s" % m]),
                     "-", ""))

    # 5. the JVM
    if not a.no_jvm:
        if not os.path.exists(bench_jar):
            d = tempfile.mkdtemp(prefix="sdkbench.", dir=work)
            sh(["javac", "--release", "17", "-cp", lw_jar, "-d", d, os.path.join(HERE, "SdkBench.java")])
            bench_jar = os.path.join(work, "sdkbench.jar")
            sh(["jar", "cf", bench_jar, "-C", d, "."])
            shutil.rmtree(d, ignore_errors=True)
        cp = lw_jar + ":" + bench_jar
        spool = os.path.join(work, "jvm-spool-cost")
        shutil.rmtree(spool, ignore_errors=True)
        print("JVM: watch costs ...", flush=True)
        r = sh([java, "-Xmx512m", "-agentpath:%s=app=bench,spool=%s,retained_delay_ms=3600000,log=warn,"
                "watch=sdkbench.Screen#onDestroy" % (agent, spool), "-cp", cp, "sdkbench.SdkBench", "cost",
                str(a.jvm_calls)])
        m = re.search(r"explicit_us=([\d.]+) hooked_us=([\d.]+) plain_us=([\d.]+)", r.stdout)
        rows.append(("LeakWatch.watch (JVM facade), µs/call", m.group(1), "-", ""))
        rows.append(("hooked method call (watch=, a safepoint each), µs/hit", "%.1f (unhooked: %s)" % (
            float(m.group(2)) - float(m.group(3)), m.group(3)), "-", ""))

        spool = os.path.join(work, "jvm-spool-pipeline")
        shutil.rmtree(spool, ignore_errors=True)
        print("JVM: ~%d MB heap, retention round and dump ..." % a.jvm_heap_mb, flush=True)
        xmx = max(2048, a.jvm_heap_mb * 3)
        lines = timed_lines([java, "-Xmx%dm" % xmx, "-Xms%dm" % xmx, "-Xlog:gc",
                             "-agentpath:%s=app=bench,spool=%s,retained_delay_ms=1000,log=info" % (agent, spool),
                             "-cp", cp, "sdkbench.SdkBench", "pipeline", str(a.jvm_heap_mb), spool])
        log = os.path.join(work, "jvm-pipeline.log")
        with open(log, "w") as f:
            f.write("\n".join("%8.3f %s" % tl for tl in lines) + "\n")
        gcs = [float(mm.group(1)) for _, l in lines
               for mm in [re.search(r"Pause Full \(JvmtiEnv ForceGarbageCollection\).* ([\d.]+)ms", l)] if mm]
        t_ret, _ = first(lines, r"object\(s\) newly retained")
        t_dump, _ = first(lines, r"dumping the heap")
        _, pm = first(lines, r"app paused ([\d.]+) ms")
        t_sp, _ = first(lines, r"is in the spool")
        _, used = first(lines, r"used=(\d+) MB")
        rows.append(("JVM live heap (Runtime used) before the leak", "%s MB" % (used.group(1) if used else "?"), "-", ""))
        rows.append(("app pause per retention round (forced full GCs, -Xlog:gc)",
                     "%.0f ms per GC x %d GCs = %.0f ms" % (sum(gcs) / len(gcs) if gcs else 0, len(gcs), sum(gcs)),
                     "-", ""))
        rows.append(("app pause during the dump (agent: app paused)", "%s ms" % (pm.group(1) if pm else "?"), "-", ""))
        if t_ret is not None and t_sp is not None:
            rows.append(("retained -> report spooled, JVM heap mode (s)", "%.2f (retained -> dump start %.2f)" % (
                t_sp - t_ret, (t_dump or t_ret) - t_ret), "-", ""))
        print("JVM log with timestamps: %s" % log)

    print()
    w = max(len(r[0]) for r in rows)
    print("%-*s  %-60s  %-10s  %s" % (w, "figure", "measured", "target", ""))
    for name, value, target, verdict in rows:
        print("%-*s  %-60s  %-10s  %s" % (w, name, value, target, verdict))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
