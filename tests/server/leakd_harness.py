"""leakd_harness.py — what tests/server/test_leakd.py needs to drive a REAL leakd against a
REAL PostgreSQL: binaries and inputs, throwaway databases and clusters, leakd processes on
free loopback ports, raw HTTP, multipart bodies, and validation of every JSON body against
server/openapi.yaml.

Python 3 standard library plus PyYAML and jsonschema (Debian: python3-yaml, python3-jsonschema).

Environment (all optional):
  LEAKD_TEST_DATABASE_URL  a PostgreSQL URL whose server the tests may CREATE DATABASE on
                           (tests/server/with_pg.sh sets it); without it a throwaway cluster is
                           started with tests/server/pg_cluster.sh, or the tests are skipped
  LEAKD_BIN, LEAKSCAN_BIN, GEN_HEAP_BIN, DUMP_DIR, EXPECTED_DIR, OPENAPI_YAML, PG_BINDIR
"""
import copy
import hashlib
import http.client
import json
import os
import re
import resource
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("LEAKD_BUILD_DIR", os.path.join(REPO, "build"))

LEAKD_BIN = os.environ.get("LEAKD_BIN", os.path.join(BUILD, "server", "leakd"))
LEAKSCAN_BIN = os.environ.get("LEAKSCAN_BIN", os.path.join(BUILD, "shared", "leakscan"))
GEN_HEAP_BIN = os.environ.get("GEN_HEAP_BIN", os.path.join(BUILD, "tests", "bench", "gen_heap"))
DUMP_DIR = os.environ.get("DUMP_DIR", os.path.join(BUILD, "tests", "dumps"))
EXPECTED_DIR = os.environ.get("EXPECTED_DIR", os.path.join(REPO, "tests", "java", "expected"))
OPENAPI_YAML = os.environ.get("OPENAPI_YAML", os.path.join(REPO, "server", "openapi.yaml"))
PG_CLUSTER_SH = os.path.join(HERE, "pg_cluster.sh")

VERBOSE = bool(os.environ.get("LEAKD_TEST_VERBOSE"))


def log(msg):
    if VERBOSE:
        print("  [harness] " + msg, flush=True)


# ---- PostgreSQL --------------------------------------------------------------------------

def pg_bindir():
    cands = []
    if os.environ.get("PG_BINDIR"):
        cands.append(os.environ["PG_BINDIR"])
    cands.append("/usr/lib/postgresql/15/bin")
    if os.path.isdir("/usr/lib/postgresql"):
        for v in sorted(os.listdir("/usr/lib/postgresql"), reverse=True):
            cands.append(os.path.join("/usr/lib/postgresql", v, "bin"))
    for d in cands:
        if os.access(os.path.join(d, "pg_ctl"), os.X_OK) and os.access(os.path.join(d, "psql"), os.X_OK):
            return d
    return None


def psql_path():
    d = pg_bindir()
    if d:
        return os.path.join(d, "psql")
    return shutil.which("psql")


def missing_prerequisites():
    """A message naming what is missing, or None."""
    if not psql_path():
        return "PostgreSQL client binaries (psql) not found: install postgresql-15 or set PG_BINDIR"
    if not os.environ.get("LEAKD_TEST_DATABASE_URL") and not pg_bindir():
        return "PostgreSQL server binaries (pg_ctl/initdb) not found and LEAKD_TEST_DATABASE_URL unset"
    for name, path in (("LEAKD_BIN", LEAKD_BIN), ("LEAKSCAN_BIN", LEAKSCAN_BIN)):
        if not os.access(path, os.X_OK):
            return "%s (%s) is not built: run cmake --build build" % (name, path)
    if not os.path.isfile(os.path.join(DUMP_DIR, "listener_list.hprof")):
        return "the Java test dumps are missing in %s (run ctest -R java_dump first)" % DUMP_DIR
    return None


def url_with_db(url, dbname):
    p = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((p.scheme, p.netloc, "/" + dbname, p.query, p.fragment))


def psql(url, sql, check=True):
    """Runs `sql`; returns rows as lists of strings (NULL -> None)."""
    r = subprocess.run([psql_path(), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-P", "null=\\N",
                        "-F", "\x1f", "-R", "\x1e", "-d", url, "-c", sql],
                       capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError("psql failed (%d): %s\n%s" % (r.returncode, sql, r.stderr))
    out = r.stdout
    if out.endswith("\n"):
        out = out[:-1]
    rows = []
    for rec in out.split("\x1e"):
        if rec == "":
            continue
        rows.append([None if v == "\\N" else v for v in rec.split("\x1f")])
    return rows


def as_pg_cmd(args):
    """Runs a server-side PostgreSQL command as `postgres` when we are root (as pg_cluster.sh does)."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--"] + args
    return args


class Cluster:
    """A throwaway PostgreSQL cluster (pg_cluster.sh) that a test may stop and start again."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="lwpg.", dir="/tmp")
        r = subprocess.run([PG_CLUSTER_SH, "start", self.dir], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise RuntimeError("pg_cluster.sh start failed: " + r.stderr)
        with open(os.path.join(self.dir, "url")) as f:
            self.url = f.read().strip()
        with open(os.path.join(self.dir, "port")) as f:
            self.port = int(f.read().strip())
        self.bindir = pg_bindir()

    def stop_server(self):
        subprocess.run(as_pg_cmd([os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.dir, "data"),
                                  "-m", "fast", "-w", "-t", "30", "-s", "stop"]), check=True, timeout=60,
                       capture_output=True)

    def start_server(self):
        opts = ("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s/sock -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100 -c shared_buffers=16MB "
                "-c log_min_messages=warning" % (self.port, self.dir))
        subprocess.run(as_pg_cmd([os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.dir, "data"),
                                  "-l", os.path.join(self.dir, "server.log"), "-w", "-t", "30", "-s", "-o", opts,
                                  "start"]), check=True, timeout=60, capture_output=True)

    def _pids(self):
        """The postmaster and its children (backends, checkpointer, ...)."""
        with open(os.path.join(self.dir, "data", "postmaster.pid")) as f:
            pm = int(f.readline())
        pids = [pm]
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    with open("/proc/%s/stat" % p) as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == pm:
                            pids.append(int(p))
                except (OSError, IndexError, ValueError):
                    pass
        return pids

    def freeze(self):
        """Stops every process of this cluster (SIGSTOP): a server that hangs with its
        connections open, which no client notices by itself."""
        self._frozen = self._pids()
        for p in self._frozen:
            try:
                os.kill(p, signal.SIGSTOP)
            except ProcessLookupError:
                pass  # a backend that ended after it was listed

    def thaw(self):
        for p in getattr(self, "_frozen", []):
            try:
                os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self._frozen = []

    def destroy(self):
        self.thaw()
        subprocess.run([PG_CLUSTER_SH, "stop", self.dir], capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


_base_url = None
_own_cluster = None


def base_database_url():
    """LEAKD_TEST_DATABASE_URL, or a cluster of our own (stopped by shutdown())."""
    global _base_url, _own_cluster
    if _base_url:
        return _base_url
    if os.environ.get("LEAKD_TEST_DATABASE_URL"):
        _base_url = os.environ["LEAKD_TEST_DATABASE_URL"]
    else:
        _own_cluster = Cluster()
        _base_url = _own_cluster.url
    return _base_url


def shutdown():
    global _own_cluster
    if _own_cluster:
        _own_cluster.destroy()
        _own_cluster = None


_db_counter = [0]


def fresh_database(base_url=None):
    """Creates an empty database on the test server; returns its URL (dropped by drop_database)."""
    base = base_url or base_database_url()
    _db_counter[0] += 1
    name = "lwt_%d_%d_%s" % (os.getpid(), _db_counter[0], uuid.uuid4().hex[:6])
    psql(url_with_db(base, "postgres"), "CREATE DATABASE %s" % name)
    return url_with_db(base, name)


def drop_database(url):
    name = urllib.parse.urlsplit(url).path.lstrip("/")
    psql(url_with_db(url, "postgres"), "DROP DATABASE IF EXISTS %s WITH (FORCE)" % name, check=False)


# ---- leakd command line --------------------------------------------------------------------

def leakd_cli(db_url, *args, timeout=30, env=None):
    extra, env = env or {}, dict(os.environ)
    env["LEAKD_DATABASE_URL"] = db_url
    env.pop("LEAKD_LISTEN", None)
    env.update(extra)
    r = subprocess.run([LEAKD_BIN] + list(args), capture_output=True, text=True, env=env, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


KEY_RE = re.compile(r"lw_(ingest|read|admin)_([1-9][0-9]*)_[0-9A-Za-z]+")


class App:
    def __init__(self, slug, ingest, read):
        self.slug, self.ingest, self.read = slug, ingest, read


def create_app(db_url, slug):
    rc, out, err = leakd_cli(db_url, "app", "create", slug)
    if rc != 0:
        raise RuntimeError("app create %s: %d %s" % (slug, rc, err))
    keys = {m.group(1): m.group(0) for m in KEY_RE.finditer(out)}
    return App(slug, keys["ingest"], keys["read"])


def create_key(db_url, *args):
    rc, out, err = leakd_cli(db_url, "key", "create", *args)
    if rc != 0:
        raise RuntimeError("key create %s: %d %s" % (args, rc, err))
    return KEY_RE.search(out).group(0)


def key_id(key):
    return int(KEY_RE.fullmatch(key).group(2))


def migrated_database(base_url=None):
    url = fresh_database(base_url)
    rc, out, err = leakd_cli(url, "migrate")
    if rc != 0:
        raise RuntimeError("migrate: %s" % err)
    return url


# ---- leakd serve -------------------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_listening_v6(port):
    """True once something accepts connections on [::1]:port."""
    try:
        socket.create_connection(("::1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def proc_children(pid):
    """PIDs whose parent is `pid`."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...
        rest = st[st.rfind(")") + 2:].split()
        if len(rest) > 1 and int(rest[1]) == pid:
            kids.append(int(d))
    return kids


def vm_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Leakd:
    """One `leakd serve` on free loopback ports with its own data dir."""

    def __init__(self, db_url, workers=2, data_dir=None, **settings):
        self.db_url = db_url
        self.port = free_port()
        self.metrics_port = free_port()
        self.tmp = tempfile.mkdtemp(prefix="leakd-test.")
        self.data_dir = data_dir or os.path.join(self.tmp, "data")
        self.log_path = os.path.join(self.tmp, "serve.log")
        self.env = dict(os.environ)
        self.env.update({
            "LEAKD_DATABASE_URL": db_url,
            "LEAKD_LISTEN": "127.0.0.1:%d" % self.port,
            "LEAKD_METRICS_LISTEN": "127.0.0.1:%d" % self.metrics_port,
            "LEAKD_DATA_DIR": self.data_dir,
            "LEAKD_WORKERS": str(workers),
            "LEAKD_LOG_LEVEL": "info",
        })
        for k, v in settings.items():
            self.env["LEAKD_" + k.upper()] = str(v)
        self.proc = None
        self.workers = workers
        self.bin = LEAKD_BIN  # a test may start a copy of it

    def start(self, wait=True, nofile=None):
        """nofile: (soft, hard) RLIMIT_NOFILE to start leakd with."""
        for tries_left in range(4, -1, -1):
            if self._start(wait, nofile, tries_left):
                return self

    def _start(self, wait, nofile, tries_left):
        """False when leakd could not listen on a port free_port chose (another test's process
        took it meanwhile: ctest runs two suites at once) and may try again on others."""
        logged = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        if getattr(self, "_log", None):
            self._log.close()  # a restart's: the child has its own copy of the descriptor
        self._log = open(self.log_path, "ab")
        pre = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, nofile)) if nofile else None
        self.proc = subprocess.Popen([self.bin, "serve"], env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=pre)
        if wait:
            deadline = time.time() + 15
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    if tries_left and self._new_ports_after_a_lost_race(logged):
                        self._log.close()
                        os.truncate(self.log_path, logged)
                        return False
                    raise RuntimeError("leakd serve exited with %d:\n%s" % (self.proc.returncode, self.log()))
                # Its log says when it serves, the API and /metrics both listening (a port that
                # answers may be another process's, which holds a port free_port chose while this
                # leakd is about to exit for it); below level info, the API's port answering does.
                if self.env.get("LEAKD_LOG_LEVEL", "info").lower() in ("debug", "info"):
                    if self._logged_since(logged, b" serving on "):
                        break
                    time.sleep(0.02)
                    continue
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                raise RuntimeError("leakd serve did not listen:\n" + self.log())
            deadline = time.time() + 10
            while len(self.worker_pids()) < self.workers and time.time() < deadline:
                time.sleep(0.05)
        return True

    def _logged_since(self, logged, what):
        """Whether the log holds `what` after its first `logged` bytes (this start's lines)."""
        with open(self.log_path, "rb") as f:
            f.seek(logged)
            return what in f.read()

    def _new_ports_after_a_lost_race(self, logged):
        """leakd exited for an address in use that free_port chose: choose again."""
        if not self._logged_since(logged, b"(in use, or not allowed)"):
            return False
        mine = {"LEAKD_LISTEN": "127.0.0.1:%d" % self.port, "LEAKD_METRICS_LISTEN": "127.0.0.1:%d" % self.metrics_port}
        if not any(self.env.get(k) == v for k, v in mine.items()):
            return False  # the test chose them
        if self.env.get("LEAKD_LISTEN") == mine["LEAKD_LISTEN"]:
            self.port = free_port()
            self.env["LEAKD_LISTEN"] = "127.0.0.1:%d" % self.port
        if self.env.get("LEAKD_METRICS_LISTEN") == mine["LEAKD_METRICS_LISTEN"]:
            self.metrics_port = free_port()
            self.env["LEAKD_METRICS_LISTEN"] = "127.0.0.1:%d" % self.metrics_port
        return True

    def log(self):
        # leakd serve's log writer writes its info lines every 10 ms (docs/configuration.md):
        # what the server logged before this call is on disk a little later.
        if self.proc and self.proc.poll() is None:
            time.sleep(0.03)
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def worker_pids(self):
        return proc_children(self.proc.pid) if self.proc else []

    def stop(self, timeout=20):
        """SIGTERM and wait; SIGKILL the process group when it does not go. Returns the exit code."""
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        return self.proc.returncode

    def kill(self):
        if not self.proc:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def cleanup(self):
        """Stops leakd and every process of its group (workers, analysis children); removes the temp dir."""
        if self.proc and self.proc.poll() is None:
            for pid in self.worker_pids():
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            self.stop(timeout=15)
        if self.proc:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # stray analysis children
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self._log.close()
        except Exception:
            pass
        if os.environ.get("LEAKD_TEST_KEEP"):
            print("kept", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def tmp_files(self):
        """What data/tmp holds: the entries of each instance's scratch dir (tmp/<host>-<listen>/,
        server/scratch.h), and anything else there."""
        d = os.path.join(self.data_dir, "tmp")
        out = []
        for e in (os.listdir(d) if os.path.isdir(d) else []):
            p = os.path.join(d, e)
            out += os.listdir(p) if os.path.isdir(p) and not e.startswith("job-") else [e]
        return sorted(out)

    def scratch_dir(self):
        """This leakd's own scratch dir (server/scratch.c's name for it)."""
        name = re.sub(r"[^A-Za-z0-9.-]", "_", "%s-%s" % (socket.gethostname(), self.env["LEAKD_LISTEN"]))
        return os.path.join(self.data_dir, "tmp", name)

    def blob_path(self, app, report_id):
        return os.path.join(self.data_dir, "blobs", app, report_id + ".hprof.zst")

    def metrics(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=10)
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        body = r.read().decode()
        conn.close()
        if r.status != 200:
            raise RuntimeError("metrics: %d" % r.status)
        out = {}
        for line in body.splitlines():
            if not line or line.startswith("#"):
                continue
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
        return out


# ---- OpenAPI validation ------------------------------------------------------------------

def _nullable_to_jsonschema(node):
    """OpenAPI 3.0 schema objects -> JSON Schema draft 4 (nullable: true -> anyOf [..., null])."""
    if isinstance(node, list):
        return [_nullable_to_jsonschema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable_to_jsonschema(v) for k, v in node.items() if k not in ("nullable", "example")}
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


class OpenAPI:
    def __init__(self, path=OPENAPI_YAML):
        import yaml  # python3-yaml
        import jsonschema  # python3-jsonschema
        self.jsonschema = jsonschema
        with open(path) as f:
            self.doc = yaml.safe_load(f)
        assert self.doc.get("openapi") == "3.0.3", "openapi.yaml must be OpenAPI 3.0.3"
        self.components = {"schemas": _nullable_to_jsonschema(self.doc["components"]["schemas"])}
        self.templates = []
        for tpl in self.doc["paths"]:
            rx = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(tpl)) + "/?$"
            self.templates.append((re.compile(rx), tpl))
        self._validators = {}
        self.seen = set()  # (template, method, status) the tests saw

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            assert ref.startswith("#/"), ref
            cur = self.doc
            for part in ref[2:].split("/"):
                cur = cur[part]
            node = cur
        return node

    def template(self, path):
        path = path.split("?", 1)[0]
        for rx, tpl in self.templates:
            if rx.match(path):
                return tpl
        return None

    def response_spec(self, method, path, status):
        tpl = self.template(path)
        if tpl is None:
            return None, None
        op = self.doc["paths"][tpl].get(method.lower())
        if op is None:
            return tpl, None
        return tpl, self.resolve(op["responses"].get(str(status)))

    def validator_for_schema(self, schema):
        key = json.dumps(schema, sort_keys=True)
        v = self._validators.get(key)
        if v is None:
            root = {"allOf": [_nullable_to_jsonschema(schema)], "components": self.components}
            cls = self.jsonschema.Draft4Validator
            cls.check_schema(root)
            v = cls(root)
            self._validators[key] = v
        return v

    def validate_schema(self, name, instance):
        self.validate_against({"$ref": "#/components/schemas/" + name}, instance)

    def validate_against(self, schema, instance):
        v = self.validator_for_schema(schema)
        errors = sorted(v.iter_errors(instance), key=lambda e: list(e.absolute_path))
        if errors:
            msgs = ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(root)", e.message) for e in errors[:5]]
            raise AssertionError("does not match the schema:\n  " + "\n  ".join(msgs) +
                                 "\n  body: " + json.dumps(instance)[:800])

    def check_response(self, method, path, status, headers, body):
        """Asserts that the response is declared for its operation and that its body matches."""
        tpl, resp = self.response_spec(method, path, status)
        where = "%s %s -> %d" % (method, path, status)
        if tpl is None:
            # Not an API path (e.g. a 404 for an unknown endpoint): the body is still an Error.
            if body:
                self.validate_schema("Error", json.loads(body))
            return
        if method.upper() not in ("HEAD",) and self.doc["paths"][tpl].get(method.lower()) is None:
            if status == 405 and body:
                self.validate_schema("Error", json.loads(body))
                return
            raise AssertionError("%s: openapi.yaml has no %s operation on %s" % (where, method, tpl))
        if resp is None:
            raise AssertionError("%s: status %d is not declared in openapi.yaml for %s %s" % (where, status, method, tpl))
        self.seen.add((tpl, method.lower(), status))
        for hname, hspec in (resp.get("headers") or {}).items():
            hspec = self.resolve(hspec)
            if hspec.get("required"):
                val = headers.get(hname)
                assert val is not None, "%s: header %s is required by openapi.yaml" % (where, hname)
                if self.resolve(hspec.get("schema", {})).get("type") == "integer":
                    assert re.fullmatch(r"[0-9]+", val) and int(val) >= 1, "%s: %s: %r" % (where, hname, val)
        content = resp.get("content")
        if not content:
            assert not body, "%s: openapi.yaml declares no body, got %r" % (where, body[:200])
            return
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip()
        if not ctype and "application/json" not in content:
            return  # plain text without a Content-Type (the metrics listener's 404)
        assert ctype in content, "%s: Content-Type %r is not declared (%s)" % (where, ctype, list(content))
        if ctype == "application/json":
            try:
                obj = json.loads(body)
            except ValueError:
                raise AssertionError("%s: body is not JSON: %r" % (where, body[:200]))
            try:
                self.validate_against(content[ctype]["schema"], obj)
            except AssertionError as e:
                raise AssertionError("%s: %s" % (where, e))


# ---- HTTP ----------------------------------------------------------------------------------

class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body
        self._json = None

    @property
    def json(self):
        if self._json is None:
            self._json = json.loads(self.body)
        return self._json

    def header(self, name):
        return self.headers.get(name)

    def __repr__(self):
        return "<%d %s>" % (self.status, self.body[:300])


class _Headers(dict):
    def get(self, name, default=None):
        for k, v in self.items():
            if k.lower() == name.lower():
                return v
        return default


class Client:
    """HTTP to one leakd; every response is checked against openapi.yaml."""

    def __init__(self, port, api, tls_ca=None):
        self.port = port
        self.api = api
        # HTTPS, trusting only this certificate (the test's own, for IP 127.0.0.1)
        self.tls = ssl.create_default_context(cafile=tls_ca) if tls_ca else None

    def _connection(self, timeout):
        if self.tls:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=self.tls)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, key=None, body=None, headers=None, timeout=60, check=True):
        h = {}
        if key is not None:
            h["Authorization"] = "Bearer " + key
        if headers:
            h.update(headers)
        conn = self._connection(timeout)
        try:
            if body is not None and hasattr(body, "read"):
                conn.putrequest(method, path, skip_accept_encoding=True)
                for k, v in h.items():
                    conn.putheader(k, v)
                conn.endheaders()
                while True:
                    chunk = body.read(1 << 20)
                    if not chunk:
                        break
                    conn.send(chunk)
            else:
                conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            resp = Response(r.status, _Headers(r.getheaders()), data)
        finally:
            conn.close()
        if check:
            self.api.check_response(method, path, resp.status, resp.headers, resp.body)
        return resp

    def get(self, path, key=None, **kw):
        return self.request("GET", path, key=key, **kw)

    def patch(self, path, key, obj, **kw):
        body = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
        return self.request("PATCH", path, key=key, body=body, headers={"Content-Type": "application/json"}, **kw)

    def upload(self, key, meta, data=None, data_name=None, data_type=None, **kw):
        body, ctype = multipart(meta, data, data_name, data_type)
        return self.request("POST", "/v1/reports", key=key, body=body, headers={"Content-Type": ctype}, **kw)

    def upload_file(self, key, meta, path, data_name="heap", data_type="application/zstd", **kw):
        """Streams a file as the data part (the body is never all in memory)."""
        boundary = "lwtest" + uuid.uuid4().hex
        head = _part_head(boundary, "meta", "application/json") + json.dumps(meta).encode() + b"\r\n" + \
            _part_head(boundary, data_name, data_type)
        tail = ("\r\n--%s--\r\n" % boundary).encode()
        size = len(head) + os.path.getsize(path) + len(tail)
        stream = _ChainReader([head, path, tail])
        try:
            return self.request("POST", "/v1/reports", key=key, body=stream,
                                headers={"Content-Type": "multipart/form-data; boundary=" + boundary,
                                         "Content-Length": str(size)}, **kw)
        finally:
            stream.close()


class _ChainReader:
    def __init__(self, items):
        self.items = list(items)
        self.f = None

    def read(self, n):
        while self.items or self.f:
            if self.f:
                b = self.f.read(n)
                if b:
                    return b
                self.f.close()
                self.f = None
                continue
            it = self.items.pop(0)
            if isinstance(it, bytes):
                return it
            self.f = open(it, "rb")
        return b""

    def close(self):
        if self.f:
            self.f.close()


def _part_head(boundary, name, ctype):
    h = "--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n" % (boundary, name)
    if ctype is not None:
        h += "Content-Type: %s\r\n" % ctype
    return (h + "\r\n").encode()


def multipart(meta, data=None, data_name=None, data_type=None, boundary=None, parts=None):
    """A multipart/form-data body: meta (dict -> JSON, or bytes) then the data part; or any
    `parts` list of (name, content_type, bytes). Returns (body, content_type)."""
    boundary = boundary or ("lwtest" + uuid.uuid4().hex)
    if parts is None:
        parts = []
        if meta is not None:
            parts.append(("meta", "application/json", meta if isinstance(meta, bytes) else json.dumps(meta).encode()))
        if data is not None:
            parts.append((data_name, data_type, data))
    body = b""
    for name, ctype, content in parts:
        body += _part_head(boundary, name, ctype) + content + b"\r\n"
    body += ("--%s--\r\n" % boundary).encode()
    return body, "multipart/form-data; boundary=" + boundary


def make_meta(app, mode="heap", report_id=None, version="1.0", build=10, install_id=None, **extra):
    m = {
        "report_id": report_id or str(uuid.uuid4()),
        "app": app,
        "app_version": version,
        "build": build,
        "sdk_version": "0.1.0",
        "runtime": "jvm",
        "mode": mode,
        "created_at": "2026-01-01T00:00:00Z",
        "device": {"install_id": install_id or str(uuid.uuid4()), "manufacturer": "Test", "model": "VM",
                   "os": "linux", "os_version": "6.1", "abi": "x86_64"},
        "heap": {"used_bytes": 1000000, "max_bytes": 4000000},
        "trigger": "manual",
        "retained": [],
        "dropped": 0,
    }
    m.update(extra)
    return m


# ---- traces -----------------------------------------------------------------------------

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha1(s):
    return hashlib.sha1(s.encode()).hexdigest()


def synthetic_leak(holder, screen, count=1, field="leak", library_pattern=None):
    """A one-trace leak: holder class --static field--> screen (leaking). Its true signature
    is sha1(holder + field) (or sha1(pattern) for a library leak)."""
    lib = library_pattern is not None
    elements = [
        {"class": holder, "object_kind": "class", "leaking": "NO", "reason": "a class is never leaking",
         "reference": {"kind": "static_field", "name": field, "suspect": True}},
        {"class": screen, "object_kind": "instance", "leaking": "YES", "reason": "ObjectWatcher was watching this",
         "key": str(uuid.uuid4()), "description": screen + " destroyed", "watch_ms": 10, "retained_ms": 5},
    ]
    sig = sha1(library_pattern) if lib else sha1(holder + field)
    return {
        "signature": sig,
        "kind": "library" if lib else "application",
        "short_description": library_pattern if lib else "%s.%s" % (holder.rsplit(".", 1)[-1], field),
        "library_pattern": library_pattern,
        "count": count,
        "traces": [{"gc_root": "STICKY_CLASS", "elements": elements}],
    }


def traces_doc(*leaks):
    return {"format": 1, "analyzer": {"name": "leakwatch", "version": "0.1.0"},
            "duration_ms": {"index": 1, "paths": 1}, "leaks": list(leaks)}


# ---- inputs ----------------------------------------------------------------------------------

class Inputs:
    """Inputs made once per run (in a temp dir removed at the end)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="leakd-inputs.")
        self._cache = {}

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def _once(self, name, make):
        if name not in self._cache:
            t = time.time()
            self._cache[name] = make(os.path.join(self.dir, name))
            log("made %s in %.1f s" % (name, time.time() - t))
        return self._cache[name]

    def stripped(self, scenario):
        """A real HotSpot dump, trimmed and zstd'd by leakscan strip (as the SDK does)."""
        def make(out):
            subprocess.run([LEAKSCAN_BIN, "strip", os.path.join(DUMP_DIR, scenario + ".hprof"), out],
                           check=True, capture_output=True, timeout=120)
            return out
        return self._once(scenario + ".hprof.zst", make)

    def traces_json(self, scenario):
        """`leakscan analyze --json` of a real dump (exit 1 = leaks found)."""
        def make(out):
            r = subprocess.run([LEAKSCAN_BIN, "analyze", os.path.join(DUMP_DIR, scenario + ".hprof"), "--json"],
                               capture_output=True, timeout=120)
            if r.returncode not in (0, 1):
                raise RuntimeError("leakscan analyze: %d %s" % (r.returncode, r.stderr))
            return json.loads(r.stdout)
        return copy.deepcopy(self._once(scenario + ".json", make))

    def expected(self, scenario):
        with open(os.path.join(EXPECTED_DIR, scenario + ".json")) as f:
            return json.load(f)

    def zstd_of(self, name, producer_cmd):
        def make(out):
            subprocess.run("%s | zstd -q -1 -T0 -o %s" % (producer_cmd, out), shell=True, check=True, timeout=300)
            return out
        return self._once(name, make)

    def bomb(self):
        """An HPROF header and 600 MB of zeros, zstd'd (a few tens of KB): the header passes,
        and the first record, of tag 0, is refused as it is decompressed."""
        return self.zstd_of("bomb.zst", "{ printf 'JAVA PROFILE 1.0.2\\0\\0\\0\\0\\10'; head -c 600M /dev/zero; }")

    def valid_bomb(self, frames=1):
        """An HPROF whose heap dump is one byte array of 600 MB of zeros, zstd'd: a valid dump,
        which passes every check of what is decompressed, so the cap is what stops it. One
        frame states no size (zstd reading a pipe); two frames (as pzstd writes) state theirs."""
        n = 600 << 20
        head = (b"JAVA PROFILE 1.0.2\0" + (4).to_bytes(4, "big") + bytes(8) + b"\x1c" + bytes(4) +
                (14 + n).to_bytes(4, "big") + b"\x23" + (1).to_bytes(4, "big") + bytes(4) + n.to_bytes(4, "big") + b"\x08")
        first = "{ printf '%s'; head -c %d /dev/zero; }" % ("".join("\\%03o" % c for c in head), n // 2)
        if frames == 1:
            return self.zstd_of("valid-bomb.zst", "{ %s; head -c %d /dev/zero; }" % (first, n - n // 2))

        def make(out):
            part = out + ".part"
            for i, producer in enumerate((first, "head -c %d /dev/zero" % (n - n // 2))):
                subprocess.run("%s > %s && zstd -q -1 -c %s %s %s && rm %s" % (producer, part, part, ">" if i == 0 else ">>",
                                                                             out, part), shell=True, check=True, timeout=300)
            return out
        return self._once("valid-bomb-2-frames.zst", make)

    def claims_size(self, size):
        """A 17-byte zstd frame whose header states `size` decompressed bytes (it holds none)."""
        def make(out):
            with open(out, "wb") as f:
                # magic; descriptor: 8-byte content size, windowed; window 2 MiB; size; an
                # empty last raw block
                f.write(b"\x28\xb5\x2f\xfd\xc0\x58" + size.to_bytes(8, "little") + b"\x01\x00\x00")
            return out
        return self._once("claims-%d.zst" % size, make)

    def truncated_hprof(self):
        """A real dump cut at 1,000,000 bytes, zstd'd."""
        return self.zstd_of("truncated.hprof.zst", "head -c 1000000 %s" % os.path.join(DUMP_DIR, "listener_list.hprof"))

    def garbage(self, size=1 << 20):
        """Not zstd, not HPROF: non-UTF-8 bytes and a NUL in its first 64 bytes."""
        def make(out):
            with open(out, "wb") as f:
                f.write(b"\xc4\xe4\xa8\x98 garbage\x00" + os.urandom(size - 14))
            return out
        return self._once("garbage-%d.bin" % size, make)

    def random_file(self, size):
        def make(out):
            with open(out, "wb") as f:
                f.write(b"R" * 64)  # no NUL up front: "no version string" (plain ASCII error)
                left = size - 64
                while left:
                    n = min(left, 8 << 20)
                    f.write(os.urandom(n))
                    left -= n
            return out
        return self._once("random-%d.bin" % size, make)

    def slow_heap(self):
        """A generated ~300 MB / 3 M-object dump, zstd'd: its analysis takes seconds."""
        def make(out):
            raw = out[:-4]
            subprocess.run([GEN_HEAP_BIN, raw, "--objects", "3000000"], check=True, capture_output=True, timeout=300)
            subprocess.run(["zstd", "-q", "-1", "-T0", "-f", "--rm", raw, "-o", out], check=True, timeout=300)
            return out
        return self._once("slow.hprof.zst", make)


def read_to_eof(sock):
    """Everything `sock` receives until its peer closes it."""
    data = b""
    while True:
        more = sock.recv(65536)
        if not more:
            return data
        data += more


def wait_for(pred, timeout, interval=0.1, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %.0f s waiting for %s (last: %r)" % (timeout, what, last))
