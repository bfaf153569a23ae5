"""test_e2e_screens.py — the issue's end-to-end check with a real JVM, a real leakd and a real
PostgreSQL: tests/client/jvm/ScreensApp.java opens and destroys N screens under the agent,
leaks exactly K of them through ListenerRegistry.listeners and releases the rest.

* {watch=e2etest.Screen#onDestroy, explicit LeakWatch.watch} x {heap, traces}: the server
  shows one group with the expected signature and trace, leaked_objects = K, nothing of the
  released screens (the report's leaks, the stored trace JSON, meta.retained, the group
  list), exactly one report; a second retention window while the leak stays leaked (and a
  second LeakWatch.dumpNow()) makes no second dump.
* Offline: leakd stopped while the app reports -> the reports wait in the spool -> leakd
  started (same data dir and database) -> each arrives exactly once, both when the same
  process retries and when the next start of the app sends what the last one left.
* kill -9 of the JVM while an upload is in flight (a proxy between the SDK and leakd holds the
  answer back): the next start uploads the report, and the server has it exactly once — both
  when leakd never saw it and when leakd stored it but the answer never reached the SDK.

Environment: AGENT_LIB, LEAKWATCH_JAR, SCREENS_JAR (compiled here with javac when unset and
absent), JAVA, and the leakd_harness variables (LEAKD_BIN, LEAKSCAN_BIN, ...).
"""
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
import leakd_harness as H  # noqa: E402

BUILD = H.BUILD
AGENT_LIB = os.environ.get("AGENT_LIB", os.path.join(BUILD, "client", "libleakwatch_jvm.so"))
LEAKWATCH_JAR = os.environ.get("LEAKWATCH_JAR", os.path.join(BUILD, "client", "leakwatch.jar"))
SCREENS_JAR = os.environ.get("SCREENS_JAR", os.path.join(BUILD, "tests", "screens.jar"))
SCREENS_SRC = os.path.join(HERE, "jvm", "ScreensApp.java")
JAVA = os.environ.get("JAVA", shutil.which("java") or "java")
JAVAC = os.environ.get("JAVAC", shutil.which("javac") or "javac")

N, K = 10, 3                      # screens per round, of which leaked
RETAINED_DELAY_MS = 300
SETTLE_MS = 2000                  # > retained_delay_ms + 3 GC rounds 100 ms apart, with margin
HOOK = "e2etest.Screen#onDestroy"

# The path, in the signature's terms (ARCHITECTURE.md "Signature": origin class + reference's
# generic name, per suspect reference, no separator). Every reference is a suspect here: the
# registry class is the only element known not leaking and the screen the first leaking one.
PATH = [("e2etest.ListenerRegistry", "class", "static_field", "listeners"),
        ("java.util.ArrayList", "instance", "instance_field", "elementData"),
        ("java.lang.Object[]", "array", "array_element", "[x]"),
        ("e2etest.Screen$Listener", "instance", "instance_field", "this$0")]
LEAKING_CLASS = "e2etest.Screen"
SIGNATURE = hashlib.sha1("".join(c + name for c, _, _, name in PATH).encode()).hexdigest()
assert SIGNATURE == "8b04647ac2e1d52b4ce3dc95360c074f679efaee"  # pinned: the formula did not drift

_tmp_jar_dir = None


def screens_jar():
    """SCREENS_JAR, or ScreensApp.java compiled here (running the file without the CMake target)."""
    global _tmp_jar_dir, SCREENS_JAR
    if os.path.exists(SCREENS_JAR) or "SCREENS_JAR" in os.environ:
        return SCREENS_JAR
    if not shutil.which(JAVAC) or not os.path.exists(LEAKWATCH_JAR):
        return SCREENS_JAR
    _tmp_jar_dir = tempfile.mkdtemp(prefix="lw-screens-jar.")
    classes = os.path.join(_tmp_jar_dir, "classes")
    subprocess.run([JAVAC, "--release", "17", "-encoding", "UTF-8", "-cp", LEAKWATCH_JAR, "-d", classes, SCREENS_SRC],
                   check=True, capture_output=True, timeout=120)
    SCREENS_JAR = os.path.join(_tmp_jar_dir, "screens.jar")
    subprocess.run(["jar", "cf", SCREENS_JAR, "-C", classes, "."], check=True, capture_output=True, timeout=60)
    return SCREENS_JAR


def missing():
    why = H.missing_prerequisites()
    for p in (AGENT_LIB, LEAKWATCH_JAR, screens_jar()):
        if not os.path.exists(p):
            why = (why + "; " if why else "") + p + " is not built"
    return why


class JvmApp:
    """ScreensApp under the agent, its stdout+stderr read line by line as they come."""

    def __init__(self, spool, app, server_url, mode, watch, script, extra_opts=""):
        opts = "app=%s,version=2.0.0,build=20,spool=%s,retained_delay_ms=%d,mode=%s" % (
            app.slug, spool, RETAINED_DELAY_MS, mode)
        if server_url:
            opts += ",server=%s,key=%s" % (server_url, app.ingest)
        if mode == "traces":
            opts += ",analyzer=" + H.LEAKSCAN_BIN
        if watch == "hook":
            opts += ",watch=" + HOOK
        opts += extra_opts
        self.cmd = [JAVA, "-Xmx256m", "-agentpath:%s=%s" % (AGENT_LIB, opts), "-cp", LEAKWATCH_JAR + ":" + SCREENS_JAR,
                    "e2etest.ScreensApp", "--watch", watch, "--script", script]
        self.lines = []
        self.cv = threading.Condition()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()
        self.proc.stdout.close()
        with self.cv:
            self.lines.append(None)  # EOF
            self.cv.notify_all()

    @property
    def out(self):
        with self.cv:
            return "\n".join(l for l in self.lines if l is not None)

    def wait_for(self, pattern, timeout=30, count=1):
        """Waits until `count` lines match `pattern`; returns the match objects."""
        rx = re.compile(pattern)
        deadline = time.time() + timeout
        with self.cv:
            while True:
                found = [m for m in (rx.search(l) for l in self.lines if l is not None) if m]
                if len(found) >= count:
                    return found
                left = deadline - time.time()
                if left <= 0 or (self.lines and self.lines[-1] is None):
                    raise AssertionError("no %d line(s) matching %r in %d s; output:\n%s" %
                                         (count, pattern, timeout, self.out))
                self.cv.wait(left)

    def count(self, pattern):
        rx = re.compile(pattern)
        with self.cv:
            return sum(1 for l in self.lines if l is not None and rx.search(l))

    def pass_gate(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout=60):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        rc = self.proc.wait(timeout=timeout)
        self.reader.join(10)
        return rc

    def kill9(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.reader.join(10)

    def keys(self, what):
        """The watch keys the app printed for its `what` ("leaked" / "released") screens."""
        return [m.group(1) for m in re.finditer(r"^screens: %s screen-\d+ key=(\S+)$" % what, self.out, re.M)]

    def spooled_ids(self):
        return [m.group(1) for m in re.finditer(r"report ([0-9a-f-]{36}) \(\d+ retained object\(s\)\) is in the spool",
                                                self.out)]


class StallProxy:
    """Sits between the SDK and leakd and never answers the SDK, so its upload stays in flight.
    'blackhole': reads the whole request and sends nothing anywhere (leakd never sees it);
    'no_reply': forwards the request to leakd and reads leakd's answer, but keeps it.
    `arrived` is set once that is done (a whole request held)."""

    def __init__(self, upstream_port, mode):
        self.upstream_port, self.mode = upstream_port, mode
        self.arrived = threading.Event()
        self.upstream_status = None
        self.conns = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_message(conn, buf=b""):
        """Head and body (Content-Length) of one HTTP message."""
        while b"\r\n\r\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                return None, None
            buf += chunk
        head, body = buf.split(b"\r\n\r\n", 1)
        m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        need = int(m.group(1)) if m else 0
        if re.search(rb"(?im)^expect:\s*100-continue", head) and len(body) < need:
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        while len(body) < need:
            chunk = conn.recv(1 << 20)
            if not chunk:
                return None, None
            body += chunk
        head = re.sub(rb"(?im)^expect:[^\r\n]*\r\n", b"", head + b"\r\n")[:-2]
        return head, body

    def _serve(self, conn):
        try:
            head, body = self._read_message(conn)
            if head is None:
                return
            if self.mode == "no_reply":
                up = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=60)
                up.sendall(head + b"\r\n\r\n" + body)
                rhead, _ = self._read_message(up)
                up.close()
                self.upstream_status = int(rhead.split(b" ", 2)[1]) if rhead else None
            self.arrived.set()
            while conn.recv(65536):  # hold it open until the client goes away
                pass
        except OSError:
            pass

    def close(self):
        self.sock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass


class ScreensEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = missing()
        if why:
            raise unittest.SkipTest(why)
        cls.db = H.migrated_database()
        # keep_blobs: the test reads the uploaded (trimmed, compressed) dump after its analysis
        cls.server = H.Leakd(cls.db, workers=1, keep_blobs=1)
        cls.server.start()
        cls.http = H.Client(cls.server.port, H.OpenAPI())
        cls.slugs = 0

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "server", None):
            cls.server.cleanup()

    # ---- helpers -------------------------------------------------------------------------

    def new_app(self, name):
        """A fresh app per case: a group's counts are per app."""
        type(self).slugs += 1
        return H.create_app(self.db, "scr-%s-%d" % (name, self.slugs))

    def new_spool(self):
        spool = tempfile.mkdtemp(prefix="lw-screens-spool.")
        self.addCleanup(shutil.rmtree, spool, True)
        return spool

    def start_app(self, *args, **kw):
        a = JvmApp(*args, **kw)
        self.addCleanup(lambda: a.proc.poll() is None and a.kill9())
        return a

    def spooled(self, spool):
        d = os.path.join(spool, "reports")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def reports_of(self, app):
        return H.psql(self.db, "SELECT r.id, r.mode, r.status FROM reports r JOIN apps a ON a.id = r.app_id "
                               "WHERE a.slug = '%s' ORDER BY received_at" % app.slug)

    def wait_analyzed(self, app, rid, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self.http.get("/v1/reports/" + rid, key=app.read).json
            if r["status"] in ("done", "failed"):
                return r
            time.sleep(0.3)
        self.fail("report %s not analyzed in %d s" % (rid, timeout))

    def db_json(self, rid, column):
        return json.loads(H.psql(self.db, "SELECT %s::text FROM reports WHERE id = '%s'" % (column, rid))[0][0])

    def check_trace(self, trace, leaked_keys):
        """The expected path, ending at one of the leaked screens."""
        els = trace["elements"]
        self.assertEqual(trace["gc_root"], "STICKY_CLASS")
        self.assertEqual(len(els), len(PATH) + 1, trace)
        for el, (cls, kind, ref_kind, name) in zip(els, PATH):
            self.assertEqual((el["class"], el["object_kind"], el["reference"]["kind"]), (cls, kind, ref_kind))
            if ref_kind != "array_element":
                self.assertEqual(el["reference"]["name"], name)
            self.assertTrue(el["reference"]["suspect"])
        self.assertEqual(els[0]["leaking"], "NO")
        last = els[-1]
        self.assertEqual((last["class"], last["leaking"]), (LEAKING_CLASS, "YES"))
        self.assertNotIn("reference", last)
        key = last.get("key") or next((l.split(" = ", 1)[1] for l in last.get("labels", []) if l.startswith("key = ")),
                                      None)
        self.assertIn(key, leaked_keys)
        return key

    def check_one_leak(self, app, rid, mode, leaked, released, description):
        """Everything the server shows about report `rid` and the app's groups."""
        report = self.wait_analyzed(app, rid)
        self.assertEqual(report["status"], "done", report)
        self.assertEqual(report["mode"], mode)
        self.assertEqual([(l["signature"], l["count"], l["kind"]) for l in report["leaks"]],
                         [(SIGNATURE, len(leaked), "application")], "one group, K leaked objects")
        self.assertEqual(report["leaks"][0]["short_description"], "ListenerRegistry.listeners")
        # meta.retained: exactly the leaked screens' watches, none of the released ones
        meta = self.db_json(rid, "meta")
        self.assertEqual(sorted(r["key"] for r in meta["retained"]), sorted(leaked))
        self.assertEqual({r["description"] for r in meta["retained"]}, {description})
        # the stored trace JSON (the device's in traces mode, the worker's in heap mode)
        result = self.db_json(rid, "result")
        self.assertEqual(len(result["leaks"]), 1, result)
        self.assertEqual(result["leaks"][0]["count"], len(leaked))
        seen = [self.check_trace(t, leaked) for t in result["leaks"][0]["traces"]]
        self.assertEqual(sorted(seen), sorted(leaked), "one trace per leaked screen")
        self.assertNotIn(released[0], json.dumps(result)) if released else None
        # the group list: one group, leaked_objects = K, from this one report
        groups = self.http.get("/v1/apps/%s/leaks" % app.slug, key=app.read).json["leaks"]
        self.assertEqual([(g["signature"], g["leaked_objects"], g["occurrences"]) for g in groups],
                         [(SIGNATURE, len(leaked), 1)])
        g = self.http.get("/v1/apps/%s/leaks/%s" % (app.slug, SIGNATURE), key=app.read).json
        self.assertEqual((g["leaking_class"], g["kind"], g["short_description"]),
                         (LEAKING_CLASS, "application", "ListenerRegistry.listeners"))
        self.assertEqual([o["report_id"] for o in g["recent_occurrences"]], [rid])
        self.check_trace(g["representative_trace"]["json"], leaked)
        text = g["representative_trace"]["text"]
        for needle in ("ListenerRegistry.listeners", "ArrayList.elementData", "Screen$Listener.this$0",
                       "e2etest.Screen"):
            self.assertIn(needle, text)
        return report

    # ---- one group, K leaked, nothing released, no second dump ------------------------------

    def leak_case(self, watch, mode):
        app = self.new_app(watch + "-" + mode)
        spool = self.new_spool()
        # round 1 leaks K of N; gate 1 until its report is uploaded; round 2 (all released)
        # while the K stay leaked, then dumpNow() again: nothing retained, no second dump.
        script = ("round:{n}:{k},sleep:{s},dump,gate,round:{n}:0,sleep:{s},gc,dump,sleep:1000,gate"
                  .format(n=N, k=K, s=SETTLE_MS))
        a = self.start_app(spool, app, "http://127.0.0.1:%d" % self.server.port, mode, watch, script)
        a.wait_for(r"^screens: gate 1$")
        rid = a.wait_for(r"report ([0-9a-f-]{36}) uploaded \(HTTP 202\)")[0].group(1)
        leaked, released = a.keys("leaked"), a.keys("released")
        self.assertEqual((len(leaked), len(released)), (K, N - K), a.out)
        self.assertNotIn("-", leaked + released, "every screen was watched")
        a.pass_gate()
        a.wait_for(r"^screens: gate 2$")
        # nothing retained: dumpNow() answers false and no dump happens
        self.assertEqual(a.wait_for(r"^screens: dumpNow=(\w+)", count=2)[1].group(1), "false")
        a.wait_for(r"manual dump: nothing is retained")
        a.pass_gate()
        self.assertEqual(a.finish(), 0, a.out)
        out = a.out
        self.assertEqual(a.count(r"dumping the heap"), 1, out)
        self.assertEqual(a.count(r"is in the spool"), 1, out)
        self.assertEqual(len(a.keys("released")), 2 * N - K)
        self.assertEqual(self.spooled(spool), [], "the uploaded report left the spool")
        rows = self.reports_of(app)
        self.assertEqual([r[0] for r in rows], [rid], "exactly one report")
        self.assertEqual(rows[0][1], mode)
        description = HOOK + " was called" if watch == "hook" else "e2etest.Screen destroyed"
        self.check_one_leak(app, rid, mode, leaked, a.keys("released"), description)
        if mode == "heap":
            # what left the device: the trimmed dump, zstd; leakscan finds the K leaked screens in it
            blob = H.psql(self.db, "SELECT blob_path FROM reports WHERE id = '%s'" % rid)[0][0]
            self.assertIsNotNone(blob)
            path = os.path.join(self.server.data_dir, blob)
            with open(path, "rb") as f:
                self.assertEqual(f.read(4), b"\x28\xb5\x2f\xfd")
            r = subprocess.run([H.LEAKSCAN_BIN, "analyze", path, "--json", "--quiet"], capture_output=True, text=True,
                               timeout=120)
            self.assertEqual(r.returncode, 1, r.stderr)
            doc = json.loads(r.stdout)
            self.assertEqual([(l["signature"], l["count"]) for l in doc["leaks"]], [(SIGNATURE, K)])
            self.assertEqual(sorted(self.check_trace(t, leaked) for t in doc["leaks"][0]["traces"]), sorted(leaked))
        else:
            self.assertIsNone(H.psql(self.db, "SELECT blob_path FROM reports WHERE id = '%s'" % rid)[0][0])

    def test_1_hook_heap(self):
        self.leak_case("hook", "heap")

    def test_2_hook_traces(self):
        self.leak_case("hook", "traces")

    def test_3_explicit_heap(self):
        self.leak_case("explicit", "heap")

    def test_4_explicit_traces(self):
        self.leak_case("explicit", "traces")

    # ---- offline: leakd stopped -> spool -> leakd started -> exactly once -----------------------

    def offline_server(self):
        """The class's leakd, stopped; started again (same port, data dir and database) by the
        test. (A second leakd on the same database would race this one's worker for the jobs
        without having their blobs.)"""
        srv = self.server
        self.addCleanup(lambda: srv.proc.poll() is None or srv.start())
        srv.stop()
        return srv

    def test_5_offline_same_process_retries(self):
        srv = self.offline_server()
        app, spool = self.new_app("offline-a"), self.new_spool()
        script = "round:6:2,sleep:{s},dump,gate,round:6:1,sleep:{s},dump,gate,gate".format(s=SETTLE_MS)
        a = self.start_app(spool, app, "http://127.0.0.1:%d" % srv.port, "heap", "explicit", script)
        a.wait_for(r"^screens: gate 1$")
        first = a.wait_for(r"report ([0-9a-f-]{36}) \(\d+ retained object\(s\)\) is in the spool")[0].group(1)
        a.wait_for(r"report %s not uploaded" % first)
        a.pass_gate()
        a.wait_for(r"^screens: gate 2$")
        ids = [m.group(1) for m in a.wait_for(r"report ([0-9a-f-]{36}) \(\d+ retained object\(s\)\) is in the spool",
                                              count=2)]
        self.assertEqual(sorted(self.spooled(spool)), sorted(ids), "both wait in the spool")
        self.assertEqual(self.reports_of(app), [])
        srv.start()  # same port, data dir and database
        for rid in ids:
            a.wait_for(r"report %s uploaded \(HTTP 202\)" % rid, timeout=40)
        a.pass_gate()
        a.pass_gate()
        self.assertEqual(a.finish(), 0, a.out)
        for rid in ids:
            self.assertEqual(a.count(r"report %s uploaded" % rid), 1, a.out)
        self.assertEqual(sorted(r[0] for r in self.reports_of(app)), sorted(ids), "each exactly once")
        self.assertEqual(self.spooled(spool), [])
        for rid in ids:
            self.assertEqual(self.wait_analyzed(app, rid)["status"], "done")
        g = self.http.get("/v1/apps/%s/leaks/%s" % (app.slug, SIGNATURE), key=app.read).json
        # the second dump holds only the screen leaked after the first: 2 + 1, two reports
        self.assertEqual((g["occurrences"], g["leaked_objects"]), (2, 3))

    def test_6_offline_next_start_sends_it(self):
        srv = self.offline_server()
        app, spool = self.new_app("offline-b"), self.new_spool()
        url = "http://127.0.0.1:%d" % srv.port
        a = self.start_app(spool, app, url, "heap", "hook", "round:6:2,sleep:%d,dump,gate" % SETTLE_MS)
        a.wait_for(r"^screens: gate 1$")
        rid = a.wait_for(r"report ([0-9a-f-]{36}) \(\d+ retained object\(s\)\) is in the spool")[0].group(1)
        a.wait_for(r"report %s not uploaded" % rid)
        leaked = a.keys("leaked")
        a.pass_gate()
        self.assertEqual(a.finish(), 0, a.out)
        self.assertEqual(self.spooled(spool), [rid], "a report that could not be sent stays in the spool")
        self.assertEqual(self.reports_of(app), [])
        srv.start()
        # the next start (same spool, nothing leaked this time) sends the old report, once
        b = self.start_app(spool, app, url, "heap", "hook", "round:4:0,sleep:%d,dump,gate" % SETTLE_MS)
        b.wait_for(r"report %s uploaded \(HTTP 202\)" % rid)
        b.wait_for(r"^screens: gate 1$")
        b.pass_gate()
        self.assertEqual(b.finish(), 0, b.out)
        self.assertEqual(b.count(r"dumping the heap"), 0, b.out)
        self.assertEqual(b.count(r"uploaded \(HTTP"), 1, b.out)
        self.assertEqual([r[0] for r in self.reports_of(app)], [rid])
        self.assertEqual(self.spooled(spool), [])
        self.check_one_leak(app, rid, "heap", leaked, a.keys("released"), HOOK + " was called")

    # ---- kill -9 mid-upload ------------------------------------------------------------------

    def kill_mid_upload(self, proxy_mode):
        app, spool = self.new_app("kill-" + proxy_mode.replace("_", "")), self.new_spool()
        proxy = StallProxy(self.server.port, proxy_mode)
        self.addCleanup(proxy.close)
        a = self.start_app(spool, app, proxy.url, "heap", "explicit", "round:6:2,sleep:%d,dump,gate" % SETTLE_MS)
        rid = a.wait_for(r"report ([0-9a-f-]{36}) \(\d+ retained object\(s\)\) is in the spool")[0].group(1)
        leaked, released = a.keys("leaked"), a.keys("released")
        self.assertTrue(proxy.arrived.wait(30), "the upload never reached the proxy:\n" + a.out)
        time.sleep(0.2)
        self.assertEqual(a.count(r"uploaded|not uploaded"), 0, "the upload is still in flight:\n" + a.out)
        a.kill9()
        self.assertEqual(self.spooled(spool), [rid], "a report whose upload was cut stays in the spool")
        have = [r[0] for r in self.reports_of(app)]
        if proxy_mode == "no_reply":
            self.assertEqual(proxy.upstream_status, 202)
            self.assertEqual(have, [rid], "leakd stored it; the SDK never heard")
        else:
            self.assertEqual(have, [])
        b = self.start_app(spool, app, "http://127.0.0.1:%d" % self.server.port, "heap", "explicit",
                           "round:3:0,sleep:%d,dump,gate" % SETTLE_MS)
        # a repeated report_id is answered 200 with the stored report
        b.wait_for(r"report %s uploaded \(HTTP %d\)" % (rid, 200 if proxy_mode == "no_reply" else 202))
        b.wait_for(r"^screens: gate 1$")
        b.pass_gate()
        self.assertEqual(b.finish(), 0, b.out)
        self.assertEqual(b.count(r"dumping the heap"), 0, b.out)
        self.assertEqual([r[0] for r in self.reports_of(app)], [rid], "exactly once")
        self.assertEqual(self.spooled(spool), [])
        self.check_one_leak(app, rid, "heap", leaked, released, "e2etest.Screen destroyed")

    def test_7_kill9_before_leakd_has_it(self):
        self.kill_mid_upload("blackhole")

    def test_8_kill9_after_leakd_stored_it(self):
        self.kill_mid_upload("no_reply")


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        H.shutdown()
        if _tmp_jar_dir:
            shutil.rmtree(_tmp_jar_dir, ignore_errors=True)
