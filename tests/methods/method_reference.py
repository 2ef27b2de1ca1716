#!/usr/bin/env python3
"""Independent numpy implementations of the block predictors of docs/methods.md, written from each method's
rule (XAttention, MInference, FlexPrefill, a MoBA-style gate), used to check the masks that
`sparge run --method NAME --masks` writes and the element densities its JSON report gives.

Everything here works on whole token-pair matrices in float64 (the engines work per block and line in
float32 with the input's half-precision roundings), so a differing block must sit at a near-tie of the
method's own rule: a ranking boundary between nearly equal scores or a cumulative sum within rounding of
its threshold. Such blocks are counted as explained; any other difference fails.

usage: method_reference.py CAPTURE.h5 MASKS.h5 [--report REPORT.json] [--max-diff 0.001]
Exit 0 when the share of differing blocks is <= --max-diff, every difference is explained, and every
element density in the report matches the oracle's to 1e-9.
"""
import argparse
import json
import math
import sys

import h5py
import numpy as np

# Upstream constants (docs/methods.md).
MINF_LAST_Q, MINF_INIT, MINF_LOCAL, MINF_MIN_V, MINF_MIN_S = 64, 30, 100, 30, 50
REL_TIE = 2e-3  # relative closeness that counts as a near-tie of float32 / half-precision arithmetic


def load(ds):
    raw = ds[...]
    if ds.dtype == np.uint16 and ds.attrs.get("dtype", b"") in (b"bfloat16", "bfloat16"):
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(np.float32)


def to_half(x):
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float64)


def to_bf16(x):
    b = np.asarray(x, np.float32).view(np.uint32)
    return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32).astype(np.float64)


half = to_half  # the entry's rounding (set per entry in main: float16, or bfloat16 for bfloat16 captures)


def visible_pairs(nq, nk, causal, window):
    qi, ki = np.arange(nq)[:, None], np.arange(nk)[None, :]
    keep = np.ones((nq, nk), bool)
    left, right = window if window is not None else (-1, -1)
    if causal:
        right = 0
    if right >= 0:
        keep &= ki <= qi + right
    if left >= 0:
        keep &= ki >= qi - left
    return keep


def block_sum(x, bq, bk, op=np.add):
    nq_tok, nk_tok = x.shape
    nq, nk = -(-nq_tok // bq), -(-nk_tok // bk)
    pad = np.zeros((nq * bq, nk * bk), x.dtype)
    pad[:nq_tok, :nk_tok] = x
    r = pad.reshape(nq, bq, nk, bk)
    return r.any(axis=(1, 3)) if x.dtype == bool else r.sum(axis=(1, 3))


def diagonal_blocks(pairs, bq, bk):
    n = min(pairs.shape)
    d = np.zeros_like(pairs)
    d[np.arange(n), np.arange(n)] = pairs[np.arange(n), np.arange(n)]
    return block_sum(d, bq, bk)


def softmax_rows(s, allowed):
    s = np.where(allowed, s, -np.inf)
    m = s.max(axis=1, keepdims=True)
    m[~np.isfinite(m)] = 0
    e = np.where(allowed, np.exp(s - m), 0.0)
    tot = e.sum(axis=1, keepdims=True)
    tot[tot == 0] = 1
    return e / tot


def near(a, b, scale):
    if a == b:
        return True
    if not (np.isfinite(a) and np.isfinite(b)):
        return False
    return abs(a - b) <= REL_TIE * max(abs(scale) if np.isfinite(scale) else 0.0, 1e-12)


def rank_desc(v):
    return sorted(range(len(v)), key=lambda j: (-v[j], j))


def boundary_ties(values, order, keep, explained_cols):
    """Marks columns whose value is within rounding of the last kept / first dropped one."""
    if 0 < keep < len(order):
        edge = [values[order[keep - 1]], values[order[keep]]]
        for j in range(len(values)):
            if any(near(values[j], e, e) for e in edge):
                explained_cols.add(j)


# ---- XAttention: strided antidiagonal sums, softmax per strided row, block sums, cumulative threshold ----

def xattention(q, k, pairs, bq, bk, causal, prm, scale):
    s = prm["stride"]
    nq_tok, d = q.shape
    nk_tok = k.shape[0]
    full = (q.astype(np.float64) @ k.astype(np.float64).T)
    rows, cols = -(-nq_tok // s), -(-nk_tok // s)
    pad = np.zeros((rows * s, cols * s))
    pad[:nq_tok, :nk_tok] = full
    tiles = pad.reshape(rows, s, cols, s)[:, ::-1, :, :]          # row i of a sub-tile becomes S-1-i
    anti = np.einsum("atbt->ab", tiles) * scale / s       # antidiagonal of each S x S sub-tile
    allowed = block_sum(pairs, s, s)                              # sub-tiles holding a visible pair
    prob = softmax_rows(anti, allowed)
    blocks = block_sum(prob, bq // s, bk // s)
    valid = block_sum(pairs, bq, bk)
    diag = diagonal_blocks(pairs, bq, bk)
    nq, nk = blocks.shape
    mask = np.zeros((nq, nk), bool)
    explained = np.zeros((nq, nk), bool)
    for i in range(nq):
        row = blocks[i]
        total = row.sum()
        required = prm["threshold"] * total
        # Causal: key block 0 and the diagonal blocks are kept first and count toward τ. Otherwise key
        # block 0 is kept apart from the ranking (upstream's index padding turns it on).
        forced = {0} | (set(np.nonzero(diag[i])[0]) if causal else set())
        mask[i, list(forced)] = True
        others = [j for j in range(nk) if not (causal and j in forced)]
        others.sort(key=lambda j: (-row[j], j))
        before = np.concatenate([[0.0], np.cumsum(row[others])])[:-1] + (row[list(forced)].sum() if causal else 0)
        keep = int(np.sum(before < required))  # the rule: kept while the mass kept before it is below τ·total
        mask[i, others[:keep]] = True
        # near-ties: the mass before the first dropped (or last kept) block within rounding of τ·total, or a
        # block whose mass nearly equals the boundary's
        for r in (keep - 1, keep):
            if 0 <= r < len(others) and near(before[r], required, total):
                explained[i, others[r]] = True
        cols = set()
        boundary_ties(row, others, keep, cols)
        explained[i, list(cols)] = True
    return mask & valid, explained, None


# ---- MInference ----

def minference(q, k, pairs, bq, bk, causal, prm, scale):
    nq_tok, d = q.shape
    nk_tok = k.shape[0]
    valid = block_sum(pairs, bq, bk)
    if prm["pattern"] == "block_sparse":
        return minference_blocks(q, k, valid, bq, bk, prm["topk"])
    last = min(MINF_LAST_Q, nq_tok)
    rows = np.arange(nq_tok - last, nq_tok)
    # upstream computes the last queries' scores in the input's half type
    s = half(half(q[rows].astype(np.float64) @ k.astype(np.float64).T) * scale)
    p = softmax_rows(s, pairs[rows])
    vertical = p.sum(axis=0)
    offsets = rows[:, None] - np.arange(nk_tok)[None, :]
    slash = np.zeros(nq_tok)
    np.add.at(slash, offsets[offsets >= 0], p[offsets >= 0])
    vertical[:MINF_INIT] = np.inf
    slash[:MINF_LOCAL] = np.inf
    vs = min(nk_tok, max(prm["vertical_size"], MINF_MIN_V))
    ss = min(nq_tok, max(prm["slash_size"], MINF_MIN_S))
    vorder, sorder = rank_desc(vertical), rank_desc(slash)
    vsel, ssel = np.array(vorder[:vs]), np.array(sorder[:ss])
    on_col = np.zeros(nk_tok, bool)
    on_col[vsel] = True
    on_diag = np.zeros(nq_tok + nk_tok, bool)
    on_diag[ssel] = True
    qi, ki = np.arange(nq_tok)[:, None], np.arange(nk_tok)[None, :]
    off = qi - ki
    covered = pairs & (on_col[None, :] | (on_diag[np.clip(off, 0, None)] & (off >= 0)))
    mask = block_sum(covered, bq, bk)
    # near-ties: lines at the ranking boundary explain the blocks they cross
    explained = np.zeros_like(mask)
    tie_cols, tie_diags = set(), set()
    boundary_ties(vertical, vorder, vs, tie_cols)
    boundary_ties(slash, sorder, ss, tie_diags)
    line = np.zeros_like(pairs)
    for c in tie_cols:
        line[:, c] |= pairs[:, c]
    for o in tie_diags:
        line |= pairs & (off == o)
    explained |= block_sum(line, bq, bk)
    # the engine may pick another line at a near-tie: the density may differ by the pairs of those lines
    return mask, explained, (covered.sum() / pairs.sum(), line.sum() / pairs.sum())


def minference_blocks(q, k, valid, bq, bk, topk):
    nq_tok, d = q.shape
    nk_tok = k.shape[0]
    nq, nk = valid.shape
    qp = np.zeros((nq * bq, d))
    qp[:nq_tok] = q
    kp = np.zeros((nk * bk, d))
    kp[:nk_tok] = k
    pq = half(qp.reshape(nq, bq, d).sum(axis=1) / bq)   # mean over the whole tile, zero padding included
    pk = half(kp.reshape(nk, bk, d).sum(axis=1) / bk)
    score = pq @ pk.T
    mask = np.zeros((nq, nk), bool)
    explained = np.zeros((nq, nk), bool)
    for i in range(nq):
        cand = [j for j in range(nk) if valid[i, j]]
        order = sorted(cand, key=lambda j: (-score[i, j], j))
        for j in order[:topk]:
            mask[i, j] = True
        cols = set()
        boundary_ties(score[i], order, min(topk, len(order)), cols)
        for j in cols:
            explained[i, j] = True
    return mask, explained, None


# ---- FlexPrefill (square blocks of the larger tile side, mapped onto the tiles) ----

def cover_count(values, gamma, block):
    """Upstream's count of top scores covering γ (the prefix whose running sum stays <= γ, plus one), and
    whether a running sum within rounding of γ could move that count across a multiple of the block."""
    c = np.cumsum(np.sort(values)[::-1])
    n = int(np.sum(c <= gamma)) + 1
    tie = any(abs(c[r] - gamma) < 1e-5 and (r + 1) // block != (r + 2) // block
              for r in range(max(0, n - 3), min(len(c), n + 1)))
    return n, tie


def js_distance(a, b):
    m = (a + b) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(a > 0, a * np.log(a / m), 0) + np.where(b > 0, b * np.log(b / m), 0)
    return math.sqrt(max(0.0, 0.5 * t.sum()))


def flexprefill(q, k, pairs, bq, bk, causal, prm, scale):
    B = max(bq, bk)
    nq_tok, d = q.shape
    nk_tok = k.shape[0]
    nbq, nbk = -(-nq_tok // B), -(-nk_tok // B)
    valid = block_sum(pairs, bq, bk)
    explained = np.zeros(valid.shape, bool)
    min_b = max(1, -(-prm["min_budget"] // B))
    if nq_tok <= max(2 * B, min_b * B):
        return valid.copy(), explained, None
    max_b = min(nbk, -(-prm["max_budget"] // B) if prm["max_budget"] > 0 else nbk)
    last = min(B, nq_tok)
    rows = np.arange(nq_tok - last, nq_tok)
    p = softmax_rows(q[rows].astype(np.float64) @ k.astype(np.float64).T * scale, pairs[rows])
    vertical = p.mean(axis=0)
    off = rows[:, None] - np.arange(nk_tok)[None, :]
    slash = np.zeros(nk_tok)
    sel = (off >= 0) & (off < nk_tok)
    np.add.at(slash, off[sel], p[sel])
    slash /= last
    nv, vtie = cover_count(vertical, prm["gamma"], B)
    ns, stie = cover_count(slash, prm["gamma"], B)
    head_tie = vtie or stie  # a block count at the γ boundary is a near-tie of the whole head
    vblock = np.add.reduceat(np.concatenate([vertical, np.zeros(nbk * B - nk_tok)]), np.arange(0, nbk * B, B))
    sblock = np.zeros(nbk)
    for o in range(nk_tok):
        sblock[nbk - 1 - (nk_tok - 1 - o) // B] += slash[o]
    kpad = [k[j * B:min(nk_tok, (j + 1) * B)].astype(np.float64).mean(axis=0) for j in range(nbk)]
    kmean = np.array(kpad)
    qlast = (q[rows].astype(np.float64) * scale).mean(axis=0)
    seen = pairs[rows].any(axis=0)
    seen_blocks = np.array([seen[j * B:(j + 1) * B].any() for j in range(nbk)])
    pooled = softmax_rows((qlast @ kmean.T)[None, :], seen_blocks[None, :])[0]
    js = js_distance(pooled, vblock)
    head_tie = head_tie or abs(js - prm["tau"]) < 1e-3
    query_aware = js < prm["tau"]
    clamp = lambda n: min(max(n, min_b), max_b)  # noqa: E731
    nV = min_b if query_aware else clamp(nv // B + 1)
    nS = min_b if query_aware else clamp(ns // B + 1)
    vb, sb = vblock.copy(), sblock.copy()
    vb[0] = np.inf
    sb[0] = np.inf
    vorder, sorder = rank_desc(vb), rank_desc(sb)
    flex = np.zeros((nbq, nbk), bool)
    for J in vorder[:nV]:
        flex[:, J] = True
    for s in sorder[:nS]:
        for I in range(s, nbq):
            if I - s < nbk:
                flex[I, I - s] = True
    tie_cols, tie_diags = set(), set()
    boundary_ties(vb, vorder, min(nV, nbk), tie_cols)
    boundary_ties(sb, sorder, min(nS, nbk), tie_diags)
    fexpl = np.zeros_like(flex)
    for J in tie_cols:
        fexpl[:, J] = True
    for s in tie_diags:
        for I in range(s, nbq):
            if I - s < nbk:
                fexpl[I, I - s] = True
    if query_aware:
        fvalid = block_sum(pairs, B, B)
        qm = np.array([q[i * B:min(nq_tok, (i + 1) * B)].astype(np.float64).mean(axis=0) for i in range(nbq)])
        attn = softmax_rows(qm * scale @ kmean.T, fvalid).ravel()
        order = sorted(range(attn.size), key=lambda x: (-attn[x], x))
        c = np.cumsum(attn[order])
        keep = int(np.sum(c <= prm["gamma"] * nbq))
        for x in order[:keep]:
            flex.flat[x] = True
        flex[0, 0] = True
        if keep < len(order) and abs(c[keep] - prm["gamma"] * nbq) < 1e-4 * nbq:
            fexpl.flat[order[keep]] = True
        cols = set()
        boundary_ties(attn, order, keep, cols)
        for x in cols:
            fexpl.flat[x] = True
    tile = np.zeros(valid.shape, bool)
    for i in range(valid.shape[0]):
        for j in range(valid.shape[1]):
            tile[i, j] = flex[i * bq // B, j * bk // B]
            explained[i, j] = head_tie or fexpl[i * bq // B, j * bk // B]
    return tile & valid, explained, None


# ---- MoBA-style gate: per query token, its own block plus the best others by q · mean(K block) ----

def moba(q, k, pairs, bq, bk, causal, prm, scale):
    nq_tok, d = q.shape
    nk_tok = k.shape[0]
    nk = -(-nk_tok // bk)
    gate_keys = np.array([half(k[j * bk:min(nk_tok, (j + 1) * bk)].astype(np.float64).mean(axis=0))
                          for j in range(nk)])
    gate = q.astype(np.float64) @ gate_keys.T
    seen = block_sum(pairs, 1, bk)                       # [token, key block]: holds a visible key
    own = np.full(nq_tok, -1)
    t = np.arange(min(nq_tok, nk_tok))
    own[t[pairs[t, t]]] = t[pairs[t, t]] // bk
    chosen = np.zeros((nq_tok, nk), bool)
    tie_tok = np.zeros((nq_tok, nk), bool)
    for tok in range(nq_tok):
        cand = [j for j in range(nk) if seen[tok, j] and j != own[tok]]
        order = ([own[tok]] if own[tok] >= 0 else []) + sorted(cand, key=lambda j: (-gate[tok, j], j))
        kk = min(prm["topk"], len(order))
        chosen[tok, order[:kk]] = True
        g = [np.inf if j == own[tok] else gate[tok, j] for j in order]
        cols = set()
        boundary_ties(g, list(range(len(order))), kk, cols)
        for x in cols:
            tie_tok[tok, order[x]] = True
    covered = pairs & np.repeat(chosen, bk, axis=1)[:, :nk_tok]
    tie_pairs = pairs & np.repeat(tie_tok, bk, axis=1)[:, :nk_tok]
    mask = block_sum(covered, bq, bk)
    tile_of = np.arange(nq_tok) // bq
    explained = np.zeros_like(mask)
    for tok in np.nonzero(tie_tok.any(axis=1))[0]:
        explained[tile_of[tok]] |= tie_tok[tok]
    return mask, explained, (covered.sum() / pairs.sum(), tie_pairs.sum() / pairs.sum())


METHODS = {"xattention": xattention, "minference": minference, "flexprefill": flexprefill, "moba": moba}


def main():
    global half
    ap = argparse.ArgumentParser()
    ap.add_argument("capture")
    ap.add_argument("masks")
    ap.add_argument("--report")
    ap.add_argument("--max-diff", type=float, default=0.001)
    a = ap.parse_args()
    report = {}
    if a.report:
        with open(a.report) as f:
            for e in json.load(f)["entries"]:
                for h in e["heads"]:
                    report[(e["name"], h["batch"], h["head"])] = h
    total = differing = unexplained = 0
    density_bad = 0
    with h5py.File(a.capture, "r") as cap, h5py.File(a.masks, "r") as mf:
        for name, grp in mf["entries"].items():
            method = grp.attrs["method"]
            method = method.decode() if isinstance(method, bytes) else method
            params = json.loads(grp.attrs["method_params"])
            fn = METHODS[method]
            bq, bk = int(grp.attrs["block_q"]), int(grp.attrs["block_k"])
            e = cap["entries"][name]
            q, k = load(e["q"]), load(e["k"])
            if e.attrs.get("layout", b"HND") in (b"NHD", "NHD"):
                q, k = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3)
            causal = bool(int(e.attrs.get("causal", 0)))
            # the entry's softmax scale, where the methods' reference code writes D^-1/2
            scale = float(e.attrs["scale"]) if "scale" in e.attrs else 1.0 / math.sqrt(q.shape[-1])
            window = tuple(int(x) for x in e.attrs["window"]) if "window" in e.attrs else None
            bf16 = e["q"].attrs.get("dtype", b"") in (b"bfloat16", "bfloat16")
            half = to_bf16 if bf16 else to_half
            if e["q"].dtype == np.float32:
                q, k = to_half(q), to_half(k)  # float32 captures are predicted in float16
            pairs = visible_pairs(q.shape[2], k.shape[2], causal, window)
            got = grp["block_mask"][...]
            present = grp.attrs["heads_present"]
            group = q.shape[1] // k.shape[1]
            for b in range(q.shape[0]):
                for h in range(q.shape[1]):
                    if not present[h]:
                        continue
                    prm = params[h] if isinstance(params, list) else params
                    want, expl, density = fn(q[b, h], k[b, h // group], pairs, bq, bk, causal, prm, scale)
                    # the run's forced blocks: the sink (key block 0) and the diagonal extension
                    if int(grp.attrs.get("sink", 0)):
                        want[:, 0] = True
                    if int(grp.attrs.get("diagonal", 0)):
                        want |= diagonal_blocks(pairs, bq, bk)
                    want &= block_sum(pairs, bq, bk)
                    diff = want != got[b, h].astype(bool)
                    total += diff.size
                    differing += int(diff.sum())
                    bad = diff & ~expl
                    unexplained += int(bad.sum())
                    if bad.any():
                        print(f"{name} b{b} h{h}: {int(bad.sum())} unexplained differing blocks at "
                              f"{[tuple(x) for x in np.argwhere(bad)[:6]]}")
                    rep = report.get((name, b, h))
                    if rep is not None and density is not None:
                        density, slack = density
                        if abs(rep.get("element_density", -1) - density) > slack + 1e-9:
                            density_bad += 1
                            print(f"{name} b{b} h{h}: element density {rep.get('element_density')} "
                                  f"!= {density}")
    frac = differing / max(total, 1)
    print(f"blocks {total}, differing {differing} ({frac:.5%}), not at a near-tie {unexplained}, "
          f"element densities off {density_bad}")
    return 0 if frac <= a.max_diff and unexplained == 0 and density_bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
