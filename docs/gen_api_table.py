#!/usr/bin/env python3
"""gen_api_table.py — the endpoint table of docs/api.md, generated from server/openapi.yaml.

    python3 docs/gen_api_table.py            print the table (Markdown)
    python3 docs/gen_api_table.py --write    replace the table in docs/api.md
    python3 docs/gen_api_table.py --check    exit 1 if docs/api.md's table is not current, or if
                                             an error code of the Error schema is missing from
                                             docs/api.md or docs/troubleshooting.md (a ctest)

The table sits between the BEGIN/END markers below in docs/api.md. Needs PyYAML
(python3-yaml).
"""
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OPENAPI = os.environ.get("OPENAPI_YAML", os.path.join(REPO, "server", "openapi.yaml"))
API_MD = os.path.join(HERE, "api.md")
TROUBLE_MD = os.path.join(HERE, "troubleshooting.md")
BEGIN = "<!-- BEGIN endpoint table: generated from server/openapi.yaml by docs/gen_api_table.py --write; do not edit -->"
END = "<!-- END endpoint table -->"
METHODS = ("get", "post", "patch", "put", "delete")


def load():
    with open(OPENAPI, encoding="utf-8") as f:
        return yaml.safe_load(f)


def table(spec):
    rows = ["| method and path | what | auth | statuses |", "|---|---|---|---|"]
    for path, item in spec["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if not op:
                continue
            security = op.get("security", spec.get("security"))
            auth = "none" if security == [] else "Bearer key"
            statuses = ", ".join(sorted(op.get("responses", {})))
            summary = " ".join(op.get("summary", "").split()).replace("|", "\\|")
            rows.append("| `%s %s` | %s | %s | %s |" % (method.upper(), path, summary, auth, statuses))
    with_options = [p for p, item in spec["paths"].items() if "options" in item]
    rows.append("")
    rows.append("`OPTIONS` (CORS preflight, no key: `204` or `403`) is answered on %s." %
                ", ".join("`%s`" % p for p in with_options))
    return "\n".join(rows) + "\n"


def error_codes(spec):
    return spec["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"]


def current_block(text):
    m = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), text, re.S)
    return m


def main(argv):
    spec = load()
    want = table(spec)
    if len(argv) == 1:
        sys.stdout.write(want)
        return 0
    with open(API_MD, encoding="utf-8") as f:
        text = f.read()
    m = current_block(text)
    if not m:
        print("gen_api_table: %s has no %r ... %r block" % (API_MD, BEGIN, END), file=sys.stderr)
        return 1
    if argv[1] == "--write":
        text = text[:m.start(1)] + want + text[m.end(1):]
        with open(API_MD, "w", encoding="utf-8") as f:
            f.write(text)
        return 0
    if argv[1] != "--check":
        print(__doc__, file=sys.stderr)
        return 2
    ok = True
    if m.group(1) != want:
        print("gen_api_table: docs/api.md's endpoint table is out of date with server/openapi.yaml; "
              "run python3 docs/gen_api_table.py --write", file=sys.stderr)
        ok = False
    with open(TROUBLE_MD, encoding="utf-8") as f:
        trouble = f.read()
    for code in error_codes(spec):
        for name, doc in (("docs/api.md", text), ("docs/troubleshooting.md", trouble)):
            if "`%s`" % code not in doc:
                print("gen_api_table: error code %s (server/openapi.yaml) is not documented in %s" % (code, name),
                      file=sys.stderr)
                ok = False
    if ok:
        print("gen_api_table: docs/api.md is current (%d endpoints, %d error codes)"
              % (want.count("\n| `"), len(error_codes(spec))))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
