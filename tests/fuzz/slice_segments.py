#!/usr/bin/env python3
"""slice_segments.py SRC OUT FIRST COUNT — how the android-binder-*segments* seeds were made.

Cuts a small valid HPROF out of a large one: header, the heap-dump segments [first, first+n),
and only the STRING / LOAD_CLASS records those segments' CLASS_DUMPs and instances need."""
import struct, sys
src, out, first, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
d = open(src, 'rb').read()
p = d.index(b'\0') + 1
ids = struct.unpack('>I', d[p:p + 4])[0]
header = d[:p + 12]
p += 12
def rid(q): return int.from_bytes(d[q:q + ids], 'big')
TS = {2: ids, 4: 1, 5: 2, 6: 4, 7: 8, 8: 1, 9: 2, 10: 4, 11: 8}
ROOT = {0xff: 0, 1: ids, 2: 8, 3: 8, 4: 4, 5: 0, 6: 4, 7: 0, 8: 8, 0x89: 0, 0x8a: 0, 0x8b: 0, 0x8c: 0, 0x8d: 0, 0x8e: 8, 0x90: 0}
strings, loads, segs, recs = {}, {}, [], []
while p < len(d):
    tag = d[p]; ln = struct.unpack('>I', d[p + 5:p + 9])[0]
    rec = d[p:p + 9 + ln]
    if tag == 1: strings[rid(p + 9)] = rec
    elif tag == 2: loads[rid(p + 9 + 4)] = (rec, rid(p + 9 + 8 + ids + 4))
    elif tag == 0x1c: segs.append((p + 9, p + 9 + ln, rec))
    p += 9 + ln
need_cls, need_str = set(), set()
chosen = segs[first:first + n]
for s, e, _ in chosen:
    q = s
    while q < e:
        t = d[q]; q += 1
        if t in ROOT: q += ids + ROOT[t]
        elif t == 0x20:
            cid = rid(q); need_cls.add(cid); need_cls.add(rid(q + ids + 4))
            q += 7 * ids + 8
            cp = struct.unpack('>H', d[q:q + 2])[0]; q += 2
            for _ in range(cp): q += 2; ty = d[q]; q += 1 + TS[ty]
            ns = struct.unpack('>H', d[q:q + 2])[0]; q += 2
            for _ in range(ns): need_str.add(rid(q)); ty = d[q + ids]; q += ids + 1 + TS[ty]
            nf = struct.unpack('>H', d[q:q + 2])[0]; q += 2
            for _ in range(nf): need_str.add(rid(q)); q += ids + 1
        elif t == 0x21:
            need_cls.add(rid(q + ids + 4)); q += 2 * ids + 4; ln = struct.unpack('>I', d[q:q + 4])[0]; q += 4 + ln
        elif t == 0x22:
            cnt = struct.unpack('>I', d[q + ids + 4:q + ids + 8])[0]; need_cls.add(rid(q + ids + 8)); q += 2 * ids + 8 + cnt * ids
        elif t in (0x23, 0xc3):
            cnt = struct.unpack('>I', d[q + ids + 4:q + ids + 8])[0]; ty = d[q + ids + 8]
            q += ids + 9 + (0 if t == 0xc3 else cnt * TS[ty])
        elif t == 0xfe: q += 4 + ids
        else: raise SystemExit('unknown sub-record 0x%02x at %d' % (t, q - 1))
body = []
for cid in sorted(need_cls):
    if cid in loads: need_str.add(loads[cid][1])
for sid in sorted(need_str):
    if sid in strings: body.append(strings[sid])
for cid in sorted(need_cls):
    if cid in loads: body.append(loads[cid][0])
body += [r for _, _, r in chosen]
body.append(bytes([0x2c]) + bytes(8))
open(out, 'wb').write(header + b''.join(body))
