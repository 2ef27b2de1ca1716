#!/usr/bin/env python3
"""A small random capture for the method oracles: GQA, partial blocks, causal and bidirectional entries,
windows (causal sliding and bidirectional local), an NHD entry, a bfloat16 one and one whose softmax scale is not
D^-1/2 (as captures of models that pre-scale Q and K have). Queries and keys share a
per-head offset and a few strong key columns, so that the methods' scores are not uniform.

usage: make_random_capture.py OUT.h5
"""
import sys

import h5py
import numpy as np


def bf16_bits(x):
    b = np.asarray(x, np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def main():
    rng = np.random.default_rng(77)
    with h5py.File(sys.argv[1], "w") as f:
        f.attrs["sparge_capture_version"] = 1
        for name, causal, n, window, layout, dtype in (
                ("causal", 1, 1000, None, "HND", "f16"), ("bidir", 0, 900, None, "HND", "f16"),
                ("slide", 1, 1100, [300, 0], "HND", "f16"), ("local", 0, 800, [200, 200], "NHD", "f16"),
                ("bf", 1, 700, None, "HND", "bf16"), ("scaled", 0, 600, None, "HND", "f16")):
            g = f.create_group(f"entries/{name}")
            g.attrs["causal"] = causal
            g.attrs["layout"] = layout
            if name == "scaled":
                g.attrs["scale"] = 0.05
            if window:
                g.attrs["window"] = np.array(window, dtype=np.int64)
            hq, hkv, d = 4, 2, 64
            base = rng.standard_normal((1, hkv, 1, d)) * 2.0
            q = rng.standard_normal((1, hq, n, d)) + np.repeat(base, hq // hkv, axis=1)
            k = rng.standard_normal((1, hkv, n, d)) * 0.7 + base
            sinks = rng.choice(n, size=6, replace=False)
            k[:, :, sinks, :] += base * 1.5  # strong columns
            v = rng.standard_normal((1, hkv, n, d))
            if layout == "NHD":
                q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
            for key, x in (("q", q), ("k", k), ("v", v)):
                if dtype == "bf16":
                    ds = g.create_dataset(key, data=bf16_bits(x))
                    ds.attrs["dtype"] = "bfloat16"
                else:
                    g[key] = x.astype(np.float16)


if __name__ == "__main__":
    main()
