#!/usr/bin/env python3
"""A causal capture with two planted heads whose blind methods are known by construction (docs/methods.md):

head 0, vertical stripes: five key tokens (one per key block) aligned with every query hold nearly all the
  attention; the other keys of each stripe's block cancel it (the block's mean along the stripe direction is
  zero). Gates that score blocks by pooled keys (MoBA's q · mean(K), SpargeAttn's pooled Q·K) cannot see the
  stripes; line and antidiagonal scoring (MInference, FlexPrefill, XAttention) can.
head 1, a slash at an even lag L: query t attends to key t - L. XAttention's antidiagonals with an even
  stride S pair query q with key k only when q + k = S - 1 (mod S), an odd number, while q + k = 2k + L is
  even on the slash: XAttention cannot see it; line scoring (MInference, FlexPrefill) can.

usage: make_planted_capture.py OUT.h5 [TOKENS]
"""
import sys

import h5py
import numpy as np

D = 64
STRIPES = (5, 420, 900, 1330, 1700)
LAG = 256


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def stripe_head(rng, n, block_k=64):
    u = unit(rng.standard_normal(D))
    q = 8.0 * u + rng.standard_normal((n, D))
    k = rng.standard_normal((n, D))
    for s in (s for s in STRIPES if s < n):
        b0 = s // block_k * block_k
        others = [t for t in range(b0, min(b0 + block_k, n)) if t != s]
        k[s] += 16.0 * u
        k[others] -= 16.0 * u / len(others)
    return q, k


def slash_head(rng, n):
    r = unit(rng.standard_normal((n, D)))
    q = 11.3 * r
    k = 11.3 * unit(rng.standard_normal((n, D)))
    k[: n - LAG] = 11.3 * r[LAG:]
    return q, k


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    rng = np.random.default_rng(2025)
    heads = [stripe_head(rng, n), slash_head(rng, n)]
    q = np.stack([h[0] for h in heads])[None]
    k = np.stack([h[1] for h in heads])[None]
    v = rng.standard_normal((1, 2, n, D))
    with h5py.File(out, "w") as f:
        f.attrs["sparge_capture_version"] = 1
        g = f.create_group("entries/planted")
        g.attrs["causal"] = 1
        g.attrs["layout"] = "HND"
        for key, x in (("q", q), ("k", k), ("v", v)):
            g[key] = x.astype(np.float16)


if __name__ == "__main__":
    main()
