#!/usr/bin/env python3
"""Checks what actions_test.sh made sparge-studio write: masks v1 (.h5), JSON / CSV / Markdown reports
with PNG heatmaps, tuned parameters (re-run by `sparge run --params`) and the parameter import.
Expected values come from the files themselves and from the capture geometry, never from the GUI code."""
import csv
import json
import math
import os
import re
import struct
import sys
import zlib

import h5py
import numpy as np

OUT = sys.argv[1]
BQ, BK, TOKENS, HEADS = 128, 64, 512, 4
NQ, NK = TOKENS // BQ, TOKENS // BK
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
    return cond


def path(name):
    return os.path.join(OUT, name)


def load_json(name):
    with open(path(name)) as f:
        return json.load(f)


def entry(report, name):
    return next(e for e in report["entries"] if e["name"] == name)


def causal_valid():
    # A block holds a valid pair iff its first key is <= its last query (top-left aligned causal mask).
    i = np.arange(NQ)[:, None]
    j = np.arange(NK)[None, :]
    return j * BK <= i * BQ + BQ - 1


def read_png(p):
    """Minimal PNG decoder (8-bit RGB/RGBA, no interlace) -> (h, w, channels) uint8 array."""
    with open(p, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(p + ": not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise ValueError(p + ": unsupported PNG format")
            ch = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * ch
    img = np.zeros((h, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(h):
        ftype = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1).astype(np.int32)
        out = np.zeros(stride, dtype=np.int32)
        for x in range(stride):
            a = out[x - ch] if x >= ch else 0
            b = prev[x]
            c = prev[x - ch] if x >= ch else 0
            if ftype == 0:
                pred = 0
            elif ftype == 1:
                pred = a
            elif ftype == 2:
                pred = b
            elif ftype == 3:
                pred = (a + b) // 2
            else:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            out[x] = (line[x] + pred) & 0xFF
        img[y] = out
        prev = out
    return img.reshape(h, w, ch).astype(np.uint8)


# ---- masks v1
valid = causal_valid()
report = load_json("report.json")
rep = entry(report, "l00")
with h5py.File(path("masks.h5"), "r") as f:
    check(int(f.attrs.get("sparge_masks_version", -1)) == 1, "masks: sparge_masks_version != 1")
    g = f["entries/l00"]
    bm, pv = g["block_mask"][()], g["pv_skipped"][()]
    check(bm.dtype == np.uint8 and pv.dtype == np.uint8, "masks: not uint8")
    check(bm.shape == (1, HEADS, NQ, NK) and pv.shape == bm.shape, f"masks: shape {bm.shape}, expected (1,{HEADS},{NQ},{NK})")
    check(int(g.attrs["block_q"]) == BQ and int(g.attrs["block_k"]) == BK, "masks: block_q/block_k attributes")
    check(int(g.attrs["sink"]) == 1, "masks: sink attribute should be 1 (--set sink=1)")
    check(set(np.unique(bm)) <= {0, 1} and set(np.unique(pv)) <= {0, 1}, "masks: values other than 0/1")
    check(not np.any(pv & ~bm & 1), "masks: a PV-skipped block that is not selected")
    check(not np.any(bm[:, :, ~valid]), "masks: a selected block with no valid causal pair")
    check(np.all(bm[:, :, :, 0] == 1), "masks: sink column (key block 0) not always on")
    for h in rep["heads"]:
        sel = int(bm[0, h["head"]].sum())
        check(sel == h["selected_blocks"], f"masks: head {h['head']} has {sel} blocks on, report says {h['selected_blocks']}")
        check(h["valid_blocks"] == int(valid.sum()), f"report: head {h['head']} valid_blocks {h['valid_blocks']} != {valid.sum()}")
    total_sel = int(bm.sum())
    stage1 = 1 - total_sel / (HEADS * valid.sum())
    check(abs(stage1 - rep["totals"]["sparsity_stage1"]) < 1e-9, f"report: stage-1 sparsity {rep['totals']['sparsity_stage1']} != masks {stage1}")
    check(abs(float(g.attrs["sparsity_stage1"]) - stage1) < 1e-6, "masks: sparsity_stage1 attribute disagrees with the mask")

# ---- CSV report
with open(path("report.csv")) as f:
    rows = list(csv.DictReader(f))
check(len(rows) == HEADS, f"csv: {len(rows)} rows, expected {HEADS}")
for row in rows:
    h = next(x for x in rep["heads"] if x["head"] == int(row["head"]))
    check(math.isclose(float(row["l1"]), h["l1"], rel_tol=1e-5), f"csv: head {row['head']} l1 differs from the JSON report")

# ---- Markdown report and its heatmaps
with open(path("report.md")) as f:
    md = f.read()
pngs = re.findall(r"\]\(([^)]+\.png)\)", md)
check(len(pngs) == 2 * HEADS, f"markdown: {len(pngs)} images, expected {2 * HEADS}")
for p in pngs:
    check(os.path.isfile(path(p)), f"markdown: {p} does not exist")
# The error split as in the CLI's report: every part of L1 and of the cosine similarity, equal to the JSON's.
lines = [l for l in md.splitlines() if l.startswith("|")]
cols = [c.strip() for c in lines[0].strip("|").split("|")]
for col in ("L1", "L1 sparse", "L1 quant", "cos", "cos sparse", "cos quant", "mask", "dropped mass"):
    check(col in cols, f"markdown: no column '{col}' in {cols}")
for line in lines[2:]:
    row = dict(zip(cols, (c.strip() for c in line.strip("|").split("|"))))
    h = next(x for x in rep["heads"] if x["head"] == int(row["head"]))
    for col, key, digits in (("L1", "l1", 5), ("L1 sparse", "l1_sparse", 5), ("L1 quant", "l1_quant", 5),
                             ("cos", "cos_sim", 6), ("cos sparse", "cos_sim_sparse", 6),
                             ("cos quant", "cos_sim_quant", 6)):
        check(row.get(col) == f"{h[key]:.{digits}f}", f"markdown: head {row['head']} {col} {row.get(col)} != JSON {h[key]}")
check("- Numerics int8-fp8, target sm89, geometry 128x64" in md, "markdown: numerics line missing")
for head in range(HEADS):
    p = path(f"report_img/b0_h{head}_mask.png")
    if not check(os.path.isfile(p), f"{p} missing"):
        continue
    img = read_png(p)
    scale = img.shape[0] // NQ
    check(img.shape[0] == NQ * scale and img.shape[1] == NK * scale and scale >= 1, f"{p}: size {img.shape} not a multiple of the {NQ}x{NK} grid")
    on_colors, off_colors = set(), set()
    for i in range(NQ):
        for j in range(NK):
            c = tuple(img[i * scale + scale // 2, j * scale + scale // 2, :3])
            (on_colors if bm[0, head, i, j] else off_colors).add(c)
    check(on_colors and off_colors and not (on_colors & off_colors), f"{p}: selected and unselected blocks share colours")

# ---- tuned parameters, re-run by the CLI
def check_params(name, rerun_name, l1_budget, entries):
    p = load_json(name)
    check(p["sparge_params_version"] == 1 and p["mode"] == "cdf", f"{name}: version/mode")
    check(abs(p["l1"] - l1_budget) < 1e-9, f"{name}: l1 budget {p['l1']}, expected {l1_budget}")
    check(p["sink"] is True, f"{name}: sink should be true (tuned with the sink on)")
    # Tuned and exported in the GUI's default numerics (sm89: int8-fp8), without the diagonal extension.
    check(p["numerics"] == "int8-fp8", f"{name}: numerics {p['numerics']}, expected int8-fp8")
    check(p["diagonal"] is False, f"{name}: diagonal should be false")
    groups = {g["name"]: g for g in p["groups"]}
    check(sorted(groups) == sorted(entries), f"{name}: groups {sorted(groups)}, expected {sorted(entries)}")
    rerun = load_json(rerun_name)
    sparse_heads = 0
    for gname, g in groups.items():
        check(g["complete"] and len(g["heads"]) == HEADS, f"{name}: group {gname} incomplete")
        e = entry(rerun, gname)
        for h in g["heads"]:
            r = next(x for x in e["heads"] if x["head"] == h["head"])
            where = f"{name}: {gname} head {h['head']}"
            check(math.isclose(r["l1"], h["l1"], rel_tol=1e-4, abs_tol=1e-7), f"{where}: re-run L1 {r['l1']} != recorded {h['l1']}")
            check(r["l1"] < p["l2"], f"{where}: re-run L1 {r['l1']} over the l2 budget {p['l2']}")
            if r["pv_skip_rate"] == 0:
                check(r["l1"] < p["l1"], f"{where}: L1 {r['l1']} over the l1 budget without PV skip")
            check(abs(r["sparsity_stage1"] - h["stage1_sparsity"]) < 1e-9, f"{where}: sparsity differs from the recorded one")
            sparse_heads += h["is_sparse"]
    check(sparse_heads > 0, f"{name}: no sparse head at all (the synthetic capture has block structure)")
    return p

params = check_params("params.json", "rerun.json", 0.07, ["l00"])
check_params("params_all.json", "rerun_all.json", 0.06, ["l00", "l01"])

# ---- parameter import: the report written after load-params shows exactly the loaded values
after = entry(load_json("after_load.json"), "l00")
g = next(g for g in params["groups"] if g["name"] == "l00")
for h in g["heads"]:
    r = next(x for x in after["heads"] if x["head"] == h["head"])["params"]
    where = f"load-params: head {h['head']}"
    check(r["is_sparse"] == h["is_sparse"], f"{where}: is_sparse")
    for key in ("simthreshd1", "cdfthreshd", "pvthreshd"):
        check(math.isclose(r[key], h[key], rel_tol=1e-6), f"{where}: {key} {r[key]} != {h[key]}")

check(os.path.getsize(path("final.png")) > 10000, "final screenshot missing or tiny")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("all export checks passed")
