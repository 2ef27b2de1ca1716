#!/usr/bin/env python3
"""Independent numpy transcription of SpargeAttn's Stage 1 (docs/method.md), used to check the
masks that `sparge run --masks` writes on inputs the engine was not tuned to. Block validity follows the
capture's causal flag and window (query i sees keys i-left ... i+right, -1 = unbounded), computed here
pair by pair; `--diagonal` (Sparge Studio's extension) keeps the blocks holding key == query.

usage: stage1_reference.py CAPTURE.h5 MASKS.h5 --theta X (--tau X | --topk X) [--block 128x64]
                           [--no-smooth-k] [--sink] [--diagonal] [--max-diff 0.001]
Exit 0 when the fraction of differing blocks is <= --max-diff and every difference sits at a near-tie of
pooled probabilities (|cdf - tau| or |p_a - p_b| within half-precision rounding); 1 otherwise.
"""
import argparse
import sys

import h5py
import numpy as np


def to_half(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def load(ds):
    raw = ds[...]
    if ds.dtype == np.uint16 and ds.attrs.get("dtype", b"") in (b"bfloat16", "bfloat16"):
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(np.float32)


def block_pass(x, bs, mean):
    n, d = x.shape
    nb = -(-n // bs)
    pooled = np.zeros((nb, d), np.float32)
    sim = np.full(nb, np.nan, np.float32)
    for b in range(nb):
        rows = x[b * bs:(b + 1) * bs]
        if mean is not None:
            rows = to_half(rows - mean)
        cnt = rows.shape[0]
        pooled[b] = to_half(rows.sum(0, dtype=np.float32) / cnt)
        padded = np.zeros((bs, d), np.float32)
        padded[:cnt] = rows
        with np.errstate(invalid="ignore", divide="ignore"):
            norms = np.sqrt((padded * padded).sum(1, keepdims=True))
            u = to_half(padded / norms)
            gram = u @ u.T  # all bs rows, padding included: NaN for partial or zero-row blocks
            sim[b] = gram.sum() / (cnt * cnt)
    return pooled, sim


def visible_pairs(nq_tok, nk_tok, causal, window):
    """[nq_tok, nk_tok] bool: which (query, key) pairs the attention allows (top-left aligned)."""
    qi, ki = np.arange(nq_tok)[:, None], np.arange(nk_tok)[None, :]
    keep = np.ones((nq_tok, nk_tok), bool)
    if causal:
        keep &= ki <= qi
    if window is not None:
        left, right = window
        if right >= 0:
            keep &= ki <= qi + right
        if left >= 0:
            keep &= ki >= qi - left
    return keep


def block_any(pairs, bq, bk):
    """Per (q-block, k-block): does any pair hold."""
    nq_tok, nk_tok = pairs.shape
    nq, nk = -(-nq_tok // bq), -(-nk_tok // bk)
    padded = np.zeros((nq * bq, nk * bk), bool)
    padded[:nq_tok, :nk_tok] = pairs
    return padded.reshape(nq, bq, nk, bk).any(axis=(1, 3))


def predict(q, k, theta, tau, topk, bq, bk, causal, smooth, sink, window=None, diagonal=False):
    nq_tok, d = q.shape
    nk_tok = k.shape[0]
    mean = to_half(k.mean(0, dtype=np.float64)) if smooth else None
    pq, simq = block_pass(q, bq, None)
    pk, simk = block_pass(k, bk, mean)
    nq, nk = pq.shape[0], pk.shape[0]
    scores = to_half(to_half(pq @ pk.T) * np.float32(d ** -0.5))
    with np.errstate(invalid="ignore"):
        simq_ok = simq > theta
        simk_ok = simk > theta
    pairs = visible_pairs(nq_tok, nk_tok, causal, window)
    valid = block_any(pairs, bq, bk)
    s = np.where(simk_ok[None, :] & valid, scores, -np.inf)
    mask = np.zeros((nq, nk), bool)
    ties = np.zeros((nq, nk), bool)  # blocks whose selection sits at a near-tie
    for i in range(nq):
        row = s[i]
        if np.all(np.isneginf(row)):
            mask[i, :] = True
            continue
        e = np.exp((row - row.max()).astype(np.float64))
        p = to_half(e / e.sum())
        order = sorted(range(nk), key=lambda j: (-p[j], j))
        if tau is not None:
            cdf = np.cumsum(p[order].astype(np.float32))
            keep = int(np.sum(to_half(cdf) <= np.float32(tau)))
            # the block at the boundary and any block tied in probability with it are near-ties
            for r in range(nk):
                if abs(float(cdf[r]) - tau) < 2e-3:
                    ties[i, order[r]] = True
                    if r + 1 < nk:
                        ties[i, order[r + 1]] = True
        else:
            keep = int(np.float32(topk) * np.float32(nk))
        keep = max(keep, 1)
        for j in order[:keep]:
            mask[i, j] = True
        if 0 < keep < nk:
            boundary = p[order[keep - 1]]
            for j in range(nk):
                if abs(p[j] - boundary) <= 2e-3 * max(boundary, 1e-3):
                    ties[i, j] = True
    mask[:, ~simk_ok] = True
    mask[~simq_ok, :] = True
    if sink:
        mask[:, 0] = True
    if diagonal:
        n = min(nq_tok, nk_tok)
        diag = np.zeros_like(pairs)
        diag[np.arange(n), np.arange(n)] = pairs[np.arange(n), np.arange(n)]
        mask |= block_any(diag, bq, bk)
    mask &= valid  # invalid blocks go off after every forcing rule
    return mask, ties


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("capture")
    ap.add_argument("masks")
    ap.add_argument("--theta", type=float, default=0.6)
    ap.add_argument("--tau", type=float)
    ap.add_argument("--topk", type=float)
    ap.add_argument("--block", default="128x64")
    ap.add_argument("--no-smooth-k", action="store_true")
    ap.add_argument("--sink", action="store_true")
    ap.add_argument("--diagonal", action="store_true")
    ap.add_argument("--max-diff", type=float, default=0.001)
    a = ap.parse_args()
    if a.tau is None and a.topk is None:
        a.tau = 0.98
    bq, bk = (int(x) for x in a.block.split("x"))
    total = differing = unexplained = 0
    with h5py.File(a.capture, "r") as cap, h5py.File(a.masks, "r") as mf:
        assert int(mf.attrs["sparge_masks_version"]) == 1
        for name, grp in mf["entries"].items():
            e = cap["entries"][name]
            assert int(grp.attrs["block_q"]) == bq and int(grp.attrs["block_k"]) == bk
            q, k = load(e["q"]), load(e["k"])
            if e.attrs.get("layout", b"HND") in (b"NHD", "NHD"):
                q, k = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3)
            causal = bool(int(e.attrs.get("causal", 0)))
            window = tuple(int(x) for x in e.attrs["window"]) if "window" in e.attrs else None
            got = grp["block_mask"][...]
            group = q.shape[1] // k.shape[1]
            for b in range(q.shape[0]):
                for h in range(q.shape[1]):
                    want, ties = predict(q[b, h], k[b, h // group], a.theta, a.tau, a.topk, bq, bk, causal,
                                         not a.no_smooth_k, a.sink, window, a.diagonal)
                    diff = want != got[b, h].astype(bool)
                    total += diff.size
                    differing += int(diff.sum())
                    unexplained += int((diff & ~ties).sum())
                    if (diff & ~ties).any():
                        print(f"{name} b{b} h{h}: {int((diff & ~ties).sum())} unexplained differing blocks")
    frac = differing / max(total, 1)
    print(f"blocks {total}, differing {differing} ({frac:.5%}), not at a near-tie {unexplained}")
    return 0 if frac <= a.max_diff and unexplained == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
