#!/usr/bin/env python3
"""Captures for the hostile CLI tests that are valid but unusual. usage: make_special.py KIND OUT.h5

names       entries whose names hold a comma, quotes and a line break, a terminal escape sequence and
            bytes that are not UTF-8
nonfinite   finite inputs whose attention scores overflow float32 (values near 3e38; scale 1e300)
big_grid    2^23 tokens of zeros (tiny on disk, gzip): a block grid no machine can hold
window_empty  512 queries, 128 keys, window [64, 0]: queries 192 … 511 see no key at all
big_attrs   a 10 MB `module` attribute, a 1 MB root attribute and a root uint64 of 2^64 − 1
uint64_layer  an entry whose `layer` is the uint64 2^63 (beyond int64)
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
    elif kind == "window_empty":
        g = entries.create_group("windowed")
        g.attrs["window"] = np.array([64, 0], dtype=np.int64)
        g["q"] = rng.standard_normal((1, 2, 512, 32)).astype("f2")
        g["k"], g["v"] = (rng.standard_normal((1, 2, 128, 32)).astype("f2") for _ in range(2))
    elif kind == "big_attrs":
        f.attrs["notes"] = "n" * 2**20
        f.attrs["max_uint64"] = np.uint64(2**64 - 1)
        for i in range(2):
            g = entries.create_group(f"l{i}")
            g.attrs["module"] = "model.layers.%d." % i + "x" * (10 * 2**20) + ".self_attn"
            g["q"], g["k"], g["v"] = qkv(h=1, n=128)
    elif kind == "uint64_layer":
        g = entries.create_group("l0")
        g.attrs["layer"] = np.uint64(2**63)
        g["q"], g["k"], g["v"] = qkv(h=1, n=128)
    else:
        sys.exit(f"unknown kind {kind}")
