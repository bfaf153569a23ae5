#!/usr/bin/env python3
"""slice_closure.py SRC OUT DEPTH CLASS... — how the android-binder-*-closure seeds were made.

Writes a small valid HPROF holding only the objects of the named classes, the objects
they reference (depth D), every class in those objects' hierarchies, the roots that point
at kept objects, and the STRING/LOAD_CLASS records those classes need."""
import struct, sys
src, out, depth = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = set(sys.argv[4:])
d = open(src, 'rb').read()
p = d.index(b'\0') + 1
ids = struct.unpack('>I', d[p:p + 4])[0]
header = d[:p + 12]; p += 12
def rid(q): return int.from_bytes(d[q:q + ids], 'big')
TS = {2: ids, 4: 1, 5: 2, 6: 4, 7: 8, 8: 1, 9: 2, 10: 4, 11: 8}
ROOT = {0xff: 0, 1: ids, 2: 8, 3: 8, 4: 4, 5: 0, 6: 4, 7: 0, 8: 8, 0x89: 0, 0x8a: 0, 0x8b: 0, 0x8c: 0, 0x8d: 0, 0x8e: 8, 0x90: 0}
strings, loads, objs, classes, roots = {}, {}, {}, {}, []
while p < len(d):
    tag = d[p]; ln = struct.unpack('>I', d[p + 5:p + 9])[0]
    if tag == 1: strings[rid(p + 9)] = d[p:p + 9 + ln]
    elif tag == 2: loads[rid(p + 13)] = (d[p:p + 9 + ln], rid(p + 13 + ids + 4))
    elif tag in (0x1c, 0x0c):
        q, e = p + 9, p + 9 + ln
        while q < e:
            t = d[q]; s = q; q += 1
            if t in ROOT: q += ids + ROOT[t]; roots.append(d[s:q])
            elif t == 0x20:
                cid = rid(q); sup = rid(q + ids + 4); q += 7 * ids + 8
                cp = struct.unpack('>H', d[q:q + 2])[0]; q += 2
                for _ in range(cp): q += 2; ty = d[q]; q += 1 + TS[ty]
                ns = struct.unpack('>H', d[q:q + 2])[0]; q += 2
                st, fl = [], []
                for _ in range(ns):
                    ty = d[q + ids]; st.append((rid(q), ty, rid(q + ids + 1) if ty == 2 else 0)); q += ids + 1 + TS[ty]
                nf = struct.unpack('>H', d[q:q + 2])[0]; q += 2
                for _ in range(nf): fl.append((rid(q), d[q + ids])); q += ids + 1
                classes[cid] = (d[s:q], sup, st, fl)
            elif t == 0x21:
                oid = rid(q); cid = rid(q + ids + 4); q += 2 * ids + 4
                ln2 = struct.unpack('>I', d[q:q + 4])[0]; q += 4
                objs[oid] = (d[s:q + ln2], cid, 'i', q); q += ln2
            elif t == 0x22:
                oid = rid(q); cnt = struct.unpack('>I', d[q + ids + 4:q + ids + 8])[0]; cid = rid(q + ids + 8)
                objs[oid] = (d[s:q + 2 * ids + 8 + cnt * ids], cid, 'a', (q + 2 * ids + 8, cnt)); q += 2 * ids + 8 + cnt * ids
            elif t in (0x23, 0xc3):
                oid = rid(q); cnt = struct.unpack('>I', d[q + ids + 4:q + ids + 8])[0]; ty = d[q + ids + 8]
                q += ids + 9 + (0 if t == 0xc3 else cnt * TS[ty]); objs[oid] = (d[s:q], None, 'p', None)
            elif t == 0xfe: q += 4 + ids; roots.append(d[s:q])
            else: raise SystemExit('bad sub 0x%02x' % t)
    p += 9 + ln
def cname(cid):
    if cid not in loads: return None
    r = strings.get(loads[cid][1]); return r[9 + ids:].decode().replace('/', '.') if r else None
def hier(cid):
    while cid and cid in classes: yield cid; cid = classes[cid][1]
def refs(oid):
    rec, cid, kind, x = objs[oid]
    if kind == 'a':
        q, cnt = x; return [rid(q + i * ids) for i in range(cnt)]
    if kind != 'i': return []
    q, out = x, []
    for c in hier(cid):
        for _, ty in classes[c][3]:
            if ty == 2: out.append(rid(q))
            q += TS[ty]
    return out
keep = {o for o, v in objs.items() if v[1] and cname(v[1]) in names}
frontier = set(keep)
for _ in range(depth):
    nxt = set()
    for o in frontier:
        for r in refs(o):
            if r in objs and r not in keep: nxt.add(r)
    keep |= nxt; frontier = nxt
# statics of the named classes count as edges too
for cid in list(classes):
    if cname(cid) in names:
        for _, ty, v in classes[cid][2]:
            if ty == 2 and v in objs: keep.add(v)
kc = set()
for o in keep:
    if objs[o][1]: kc |= set(hier(objs[o][1]))
for cid in list(classes):
    if cname(cid) in names: kc |= set(hier(cid))
ns = set()
for c in kc:
    if c in loads: ns.add(loads[c][1])
    ns |= {s[0] for s in classes[c][2]} | {f[0] for f in classes[c][3]}
sub = b''.join(classes[c][0] for c in sorted(kc)) + b''.join(objs[o][0] for o in sorted(keep))
kept = keep | kc
sub += b''.join(r for r in roots if r[0] == 0xfe or int.from_bytes(r[1:1 + ids], 'big') in kept)
body = [strings[s] for s in sorted(ns) if s in strings] + [loads[c][0] for c in sorted(kc) if c in loads]
body.append(bytes([0x1c]) + bytes(4) + struct.pack('>I', len(sub)) + sub)
body.append(bytes([0x2c]) + bytes(8))
open(out, 'wb').write(header + b''.join(body))
print(out, len(keep), 'objects', len(kc), 'classes')
