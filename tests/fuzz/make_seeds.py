#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus (committed; re-run only to change it). usage: make_seeds.py"""
import json
import os

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CAP = os.path.join(HERE, "corpus", "capture_reader")
PAR = os.path.join(HERE, "corpus", "params")
CLI = os.path.join(HERE, "corpus", "cli_options")
rng = np.random.default_rng(11)


def capture(name, entries):
    with h5py.File(os.path.join(CAP, name), "w", libver="latest") as f:
        f.attrs["sparge_capture_version"] = 1
        f.attrs["model"] = "seed"
        for ename, build in entries.items():
            build(f.create_group(f"entries/{ename}"))


def hnd(dtype, h=2, hkv=2, n=8, d=4, gzip=False, **attrs):
    def build(g):
        for t, heads in (("q", h), ("k", hkv), ("v", hkv)):
            data = rng.standard_normal((1, heads, n, d)).astype(dtype)
            if gzip:
                g.create_dataset(t, data=data, chunks=(1, 1, n, d), compression="gzip", shuffle=True)
            else:
                g.create_dataset(t, data=data)
        g.attrs.update(attrs)
    return build


def bf16_nhd(g):
    for t in ("q", "k", "v"):
        bits = (rng.standard_normal((1, 8, 2, 4)).astype("f4").view("u4") >> 16).astype("u2")
        d = g.create_dataset(t, data=bits)
        d.attrs["dtype"] = "bfloat16"
    g.attrs["layout"] = "NHD"


capture("fp16_causal.h5", {"l0": hnd("f2", causal=1, layer=0, step=0, scale=0.5)})
capture("fp16_gzip.h5", {"l0": hnd("f2", gzip=True)})
capture("fp32_gqa.h5", {"l1": hnd("f4", h=4, hkv=2, n=6, d=3), "l10": hnd("f4", n=5)})
capture("bf16_nhd.h5", {"a": bf16_nhd})

# A regression seed: the global-heap object behind the root string claims 2^61 bytes (HDF5 1.10 overflows
# its buffer on it; the reader must turn that into an error).
path = os.path.join(CAP, "heap_overflow.h5")
capture("heap_overflow.h5", {"l0": hnd("f2", n=4, d=2)})
data = bytearray(open(path, "rb").read())
heap = data.find(b"GCOL")
data[heap + 24:heap + 32] = (0x2000000000000004).to_bytes(8, "little")
open(path, "wb").write(bytes(data))

base = {"sparge_params_version": 1, "generator": "sparge tune", "complete": True, "capture": "c.h5",
        "engine": "cpu", "mode": "cdf", "l1": 0.05, "l2": 0.06, "tune_pv": True, "geometry": "128x64",
        "smooth_k": True, "sink": False,
        "groups": [{"name": "l0", "entries": ["l0"], "layer": 0, "heads_q": 4, "complete": True,
                    "heads": [{"head": h, "is_sparse": h != 2, "simthreshd1": 0.25 * h - 0.5,
                               "cdfthreshd": 0.9, "pvthreshd": 1e30 if h == 3 else 5.0, "sparsity": 0.5,
                               "stage1_sparsity": 0.4, "l1": 0.04} for h in range(4)]}]}
with open(os.path.join(PAR, "cdf.json"), "w") as f:
    json.dump(base, f, indent=1)
topk = json.loads(json.dumps(base))
topk["mode"], topk["geometry"], topk["complete"] = "topk", "64x128", False
for h in topk["groups"][0]["heads"]:
    h["topk"] = h.pop("cdfthreshd")
topk["groups"][0].update(complete=False, heads=topk["groups"][0]["heads"][:2], layer=None)
with open(os.path.join(PAR, "topk_partial.json"), "w") as f:
    json.dump(topk, f)

# Command lines for the CLI parser: arguments separated by NUL bytes.
COMMAND_LINES = {
    "run.args": ["run", "s.h5", "--theta", "0.5", "--tau", "0.9", "--lambda", "20", "--heads", "0,1",
                 "--report", "r.json", "--engine", "cpu", "--threads", "2"],
    "run_topk.args": ["run", "--topk", "0.25", "--target", "sm90", "--quant", "none", "--max-memory", "8G",
                      "--timings", "t.trace.json", "--repeat", "3", "--warmup-ms", "100", "--entry", "l00"],
    "tune.args": ["tune", "c.h5", "--l1", "0.05", "--l2", "0.06", "-o", "p.json", "--heads", "0,1,2",
                  "--topk-mode", "--group-by-layer"],
    "synth.args": ["synth", "x.h5", "--heads", "4", "--kv-heads", "2", "--tokens", "256", "--segment", "64",
                   "--sharpness", "1.5", "--seed", "7", "--dtype", "bf16", "--layout", "NHD", "--entries", "2"],
    "info.args": ["info", "c.h5", "--group-by", "module"],
    "bench.args": ["bench", "--tokens", "4096,8192", "--dims", "64", "--topk", "0.5,0.2", "--causal", "0,1"],
}
os.makedirs(CLI, exist_ok=True)
for name, args in COMMAND_LINES.items():
    with open(os.path.join(CLI, name), "wb") as f:
        f.write("\0".join(args).encode())
