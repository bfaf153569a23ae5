"""test_e2e_jvm.py — the whole pipeline for real: the demo app runs in a JVM under
libleakwatch_jvm.so, leaks a screen, the SDK notices it retained, dumps the heap, trims and
compresses it (or analyzes it with leakscan in traces mode), spools and uploads it with
libcurl to a real leakd on a real PostgreSQL, whose worker analyzes it and groups the leak.

Environment: AGENT_LIB, LEAKWATCH_JAR, DEMO_JAR, JAVA (and the leakd_harness variables).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import leakd_harness as H  # noqa: E402

BUILD = H.BUILD
AGENT_LIB = os.environ.get("AGENT_LIB", os.path.join(BUILD, "client", "libleakwatch_jvm.so"))
LEAKWATCH_JAR = os.environ.get("LEAKWATCH_JAR", os.path.join(BUILD, "client", "leakwatch.jar"))
DEMO_JAR = os.environ.get("DEMO_JAR", os.path.join(BUILD, "tests", "demo.jar"))
JAVA = os.environ.get("JAVA", shutil.which("java") or "java")
# What tests/java/expected and the demo agree on: EventBus.subscribers -> ArrayList.elementData
# -> Object[][x] -> NewsScreen$1.this$0 (the demo's classes live in io.leakwatch.demo).
DEMO_SIGNATURE = "dcaf34e3570327664fceeeea8af7e20e669337b2"


def missing():
    why = H.missing_prerequisites()
    for p in (AGENT_LIB, LEAKWATCH_JAR, DEMO_JAR):
        if not os.path.exists(p):
            why = (why + "; " if why else "") + p + " is not built"
    return why


class EndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = missing()
        if why:
            raise unittest.SkipTest(why)
        cls.db = H.migrated_database()
        cls.app = H.create_app(cls.db, "demo")
        cls.server = H.Leakd(cls.db, workers=1)
        cls.server.start()
        cls.http = H.Client(cls.server.port, H.OpenAPI())

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "server", None):
            cls.server.cleanup()

    def run_demo(self, spool, server=None, mode="heap", extra="", linger=6):
        opts = "app=demo,version=1.4.0,build=14,spool=%s,retained_delay_ms=300,mode=%s" % (spool, mode)
        if server:
            opts += ",server=%s,key=%s" % (server, self.app.ingest)
        if mode == "traces":
            opts += ",analyzer=" + H.LEAKSCAN_BIN
        opts += extra
        cmd = [JAVA, "-Xmx256m", "-agentpath:%s=%s" % (AGENT_LIB, opts), "-cp", LEAKWATCH_JAR + ":" + DEMO_JAR,
               "io.leakwatch.demo.DemoApp", "--wait-ms", "1500", "--linger", str(linger)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, "demo failed:\n" + r.stdout + r.stderr)
        return r.stdout + r.stderr

    def spooled(self, spool):
        d = os.path.join(spool, "reports")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def wait_for_group(self, report_ids, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            done = [self.http.get("/v1/reports/" + rid, key=self.app.read).json for rid in report_ids]
            if all(d.get("status") in ("done", "failed") for d in done):
                return done
            time.sleep(0.3)
        self.fail("reports not analyzed in %d s: %s" % (timeout, report_ids))

    def report_ids_in_db(self):
        return H.psql(self.db, "SELECT id, mode, app_version, build, meta->>'runtime', meta->'device'->>'install_id' "
                               "FROM reports ORDER BY received_at")

    def test_1_heap_mode_uploads_and_groups(self):
        spool = tempfile.mkdtemp(prefix="lw-e2e-spool.")
        self.addCleanup(shutil.rmtree, spool, True)
        before = {r[0] for r in self.report_ids_in_db()}
        out = self.run_demo(spool, server="http://127.0.0.1:%d" % self.server.port)
        self.assertIn("demo: LeakWatch is watching key=", out)
        rows = [r for r in self.report_ids_in_db() if r[0] not in before]
        self.assertEqual(len(rows), 1, out)
        rid, mode, version, build, runtime, install = rows[0]
        self.assertEqual((mode, version, build, runtime), ("heap", "1.4.0", "14", "jvm"))
        self.assertEqual(len(install), 36)
        self.assertEqual(self.spooled(spool), [], "the uploaded report left the spool")
        report = self.wait_for_group([rid])[0]
        self.assertEqual(report["status"], "done", report)
        self.assertEqual([l["signature"] for l in report["leaks"]], [DEMO_SIGNATURE])
        g = self.http.get("/v1/apps/demo/leaks/" + DEMO_SIGNATURE, key=self.app.read).json
        self.assertEqual(g["leaking_class"], "io.leakwatch.demo.NewsScreen")
        self.assertIn("EventBus.subscribers", g["representative_trace"]["text"])
        self.assertEqual(g["first_build"], 14)
        # The upload was the trimmed, compressed dump (far smaller than the ~3.5 MB heap), and
        # once analyzed the server deleted it (LEAKD_KEEP_BLOBS is off).
        # (the worker deletes the dump just after marking the report done: wait for it)
        H.wait_for(lambda: H.psql(self.db, "SELECT blob_path FROM reports WHERE id = '%s'" % rid)[0][0] is None, 10,
                   what="the analyzed dump deleted")
        path, size = H.psql(self.db, "SELECT blob_path, blob_bytes FROM reports WHERE id = '%s'" % rid)[0]
        self.assertIsNone(path)
        self.assertLess(int(size), 2_000_000)
        self.assertEqual(os.listdir(os.path.join(self.server.data_dir, "blobs", "demo")), [])

    def test_2_traces_mode_ships_only_traces(self):
        spool = tempfile.mkdtemp(prefix="lw-e2e-spool.")
        self.addCleanup(shutil.rmtree, spool, True)
        before = {r[0] for r in self.report_ids_in_db()}
        out = self.run_demo(spool, server="http://127.0.0.1:%d" % self.server.port, mode="traces")
        rows = [r for r in self.report_ids_in_db() if r[0] not in before]
        self.assertEqual(len(rows), 1, out)
        self.assertEqual(rows[0][1], "traces")
        report = self.http.get("/v1/reports/" + rows[0][0], key=self.app.read).json
        self.assertEqual(report["status"], "done")  # grouped at ingest, no worker
        self.assertEqual([l["signature"] for l in report["leaks"]], [DEMO_SIGNATURE])
        blob = H.psql(self.db, "SELECT coalesce(blob_path, '-') FROM reports WHERE id = '%s'" % rows[0][0])[0][0]
        self.assertEqual(blob, "-")
        g = self.http.get("/v1/apps/demo/leaks/" + DEMO_SIGNATURE, key=self.app.read).json
        self.assertGreaterEqual(g["occurrences"], 1)

    def test_3_spool_keeps_reports_until_the_server_is_back(self):
        spool = tempfile.mkdtemp(prefix="lw-e2e-spool.")
        self.addCleanup(shutil.rmtree, spool, True)
        dead = "http://127.0.0.1:%d" % H.free_port()
        self.run_demo(spool, server=dead, linger=2)
        kept = self.spooled(spool)
        self.assertEqual(len(kept), 1, "a report that could not be sent stays in the spool")
        before = {r[0] for r in self.report_ids_in_db()}
        # The next start of the app (same spool) sends the old report as well as its own.
        self.run_demo(spool, server="http://127.0.0.1:%d" % self.server.port)
        new = {r[0] for r in self.report_ids_in_db()} - before
        self.assertIn(kept[0], new)
        self.assertEqual(len(new), 2)
        self.assertEqual(self.spooled(spool), [])
        self.wait_for_group(sorted(new))
        g = self.http.get("/v1/apps/demo/leaks/" + DEMO_SIGNATURE, key=self.app.read).json
        self.assertGreaterEqual(g["occurrences"], 3)
        # Each spool keeps its own install id: this test used three spools, so three devices.
        self.assertEqual(g["devices"], 3)


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        H.shutdown()
