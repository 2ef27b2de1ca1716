#!/usr/bin/env python3
"""Captures for the hostile CLI tests that are valid but unusual. usage: make_special.py KIND OUT.h5

names       entries whose names hold a comma, quotes and a line break, a terminal escape sequence and
            bytes that are not UTF-8
nonfinite   finite inputs whose attention scores overflow float32 (values near 3e38; scale 1e300)
big_grid    2^23 tokens of zeros (tiny on disk, gzip): a block grid no machine can hold
"""
import sys

import h5py
import numpy as np

kind, out = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(5)
NAMES = ['a,b "quoted"\nnext line', "\x1b[31mred\x1b[0m", b"bytes\xff\xfe-not-utf8", "plain"]


def qkv(h=2, n=300, d=32, dtype="f2", scale=1.0):
    return [(rng.standard_normal((1, h, n, d)) * scale).astype(dtype) for _ in range(3)]


with h5py.File(out, "w") as f:
    f.attrs["sparge_capture_version"] = 1
    entries = f.create_group("entries")
    if kind == "names":
        for i, name in enumerate(NAMES):
            g = entries.create_group(name)
            g.attrs["layer"] = i
            g["q"], g["k"], g["v"] = qkv()
    elif kind == "nonfinite":
        # float32 values near 3e38: q·k overflows float32 in every head (the inputs themselves are finite).
        g = entries.create_group("huge_values")
        q, k, v = qkv(h=2, n=256, d=32, dtype="f4")
        g["q"], g["k"], g["v"] = q * np.float32(3e38), k * np.float32(3e38), v
        # Ordinary values with scale 1e300: every scaled score is infinite.
        g = entries.create_group("huge_scale")
        g.attrs["scale"] = 1e300
        g["q"], g["k"], g["v"] = qkv(h=2, n=256, d=32, dtype="f4")
    elif kind == "big_grid":
        g = entries.create_group("long")
        n = 2**23
        for t in ("q", "k", "v"):
            g.create_dataset(t, data=np.zeros((1, 1, n, 1), "f2"), chunks=(1, 1, 2**20, 1), compression="gzip")
    else:
        sys.exit(f"unknown kind {kind}")
