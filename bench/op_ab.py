#!/usr/bin/env python3
"""Builds of libsparge_attn side by side in one process: the op's whole call per cell, timed with each build in
turn, round after round (the order reversed every other round, as bench/capi_bench.py does), so that clock
and thermal drift and the state each process starts in fall on every build alike (builds timed in separate
processes, one after another, differed by up to 7 % on the same cell).

Each build is loaded from its own path (ctypes, RTLD_LOCAL: its own kernels, streams and caches) and keeps its
own plans; the op's Python side is shared. Cells are (tokens, head dim, causal, top-k[, counters]) on random
N(0, 1) fp16 data, B 1, H 32, simthreshd1 -0.1, pvthreshd 50 (as bench/capi_bench.py). Each timing is the
median of --repeat CUDA-event measurements after --warmup-ms of untimed running; a cell's figure per build is
the median over rounds, with the rounds' min and max. Every build's output of a cell must be the same (bits
of the sum of |O|), or the line says which differ.

usage: python3 bench/op_ab.py LIB_A.so LIB_B.so [...] [--cells 32768,128,1,0.5 ...] [--rounds 3] [--json OUT]
Needs torch with a CUDA device and the sparge_attn package importable (PYTHONPATH=python).
"""
import argparse
import ctypes
import json
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from compare_spargeattn import alternating_rounds, timed  # noqa: E402
import sparge_attn  # noqa: E402
from sparge_attn import _capi, _op  # noqa: E402

DEFAULT_CELLS = ["32768,128,1,0.5", "32768,128,1,1.0", "32768,128,0,0.5", "32768,128,0,0.2", "32768,64,0,0.5",
                 "32768,64,0,0.2", "32768,64,1,0.5", "16384,128,1,0.5", "8192,128,0,0.2"]


class Build:
    """One libsparge_attn with its own plan and call caches."""

    def __init__(self, path, name):
        self.name = name
        self.lib = ctypes.CDLL(os.path.abspath(path))
        _capi._declare(self.lib)
        self.plans, self.calls = _op._PlanCache(), _op._PlanCache(256)

    def use(self):
        _capi._lib, _op._plans, _op._calls = self.lib, self.plans, self.calls
        sparge_attn._prepared.clear()


def parse_cell(text):
    f = text.split(",")
    return int(f[0]), int(f[1]), bool(int(f[2])), float(f[3]), len(f) > 4 and bool(int(f[4]))


def run_cell(builds, cell, rounds, repeat, warmup_ms):
    N, D, causal, topk, counters = cell
    g = torch.Generator(device="cuda").manual_seed(N + D + causal)
    q, k, v = (torch.randn(1, 32, N, D, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))

    def call():
        return sparge_attn.attention(q, k, v, simthreshd1=-0.1, topk=topk, pvthreshd=50, is_causal=causal,
                                     return_sparsity=counters)

    sums = {}

    def run(b):
        b.use()
        o = call()
        o = o[0] if isinstance(o, tuple) else o
        sums[b.name] = float(o.float().abs().sum())
        return timed(torch, call, repeat, warmup_ms)[0]

    out = alternating_rounds({b.name: b for b in builds}, run, rounds)
    return {name: r["ms_rounds"] for name, r in out.items()}, sums


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("libs", nargs="+", help="libsparge_attn builds; the first is the reference of the ratios")
    ap.add_argument("--cells", nargs="*", default=DEFAULT_CELLS, help="N,D,causal,topk[,counters]")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--warmup-ms", type=float, default=200)
    ap.add_argument("--json")
    args = ap.parse_args()
    if len(set(os.path.abspath(p) for p in args.libs)) != len(args.libs):
        sys.exit("op_ab.py: the same build is given twice")
    names = [os.path.basename(p) for p in args.libs]
    if len(set(names)) != len(names):  # A/libsparge_attn.so and B/libsparge_attn.so: labelled by their paths
        names = list(args.libs)
    builds = [Build(p, n) for p, n in zip(args.libs, names)]
    out = {"gpu": torch.cuda.get_device_name(), "builds": [b.name for b in builds], "cells": []}
    for text in args.cells:
        cell = parse_cell(text)
        times, sums = run_cell(builds, cell, args.rounds, args.repeat, args.warmup_ms)
        ref = statistics.median(times[builds[0].name])
        cols = [f"{n} {statistics.median(t):.3f} ({min(t):.3f}-{max(t):.3f}) x{statistics.median(t) / ref:.3f}"
                for n, t in times.items()]
        same = len(set(sums.values())) == 1
        print(f"{text:22s} " + "  ".join(cols) + ("" if same else f"  OUTPUTS DIFFER {sums}"), flush=True)
        out["cells"].append({"cell": text, "ms": dict(times), "same_output": same})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
