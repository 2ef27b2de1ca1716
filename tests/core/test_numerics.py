"""The CPU engine's quantized numerics against numpy oracles written here from the semantics in
docs/numerics.md (never from the engine's code): e4m3, fp16, bf16 and INT8 rounding (ties, saturation,
NaN/Inf, subnormals), the per-tile INT8 and per-channel FP8 quantizers (all-zero blocks, tails, K smoothing),
and whole runs of `sparge run --quant ...` (deployed, sparse-alone and quantization-alone L1) on small random
captures with tails, GQA, bf16 and float32 inputs and both tile geometries.

Environment: QUANT_PROBE (tests/core/probe/quant_probe) and SPARGE (the CLI).
"""

import json
import os
import subprocess

import h5py
import numpy as np
import pytest

PROBE = os.environ.get("QUANT_PROBE", "quant_probe")
SPARGE = os.environ.get("SPARGE", "sparge")
LOG2E = np.float32(1.4426950408889634)


def probe(args, values):
    data = np.ascontiguousarray(values, dtype=np.float32).tobytes()
    out = subprocess.run([PROBE, *map(str, args)], input=data, capture_output=True, check=True).stdout
    return np.frombuffer(out, dtype=np.float32)


# ---------------------------------------------------------------- scalar oracles
def e4m3_table():
    """Every non-negative finite e4m3 value with its mantissa bits (exponent bias 7, no infinity)."""
    vals = []
    for e in range(16):
        for m in range(8):
            if e == 15 and m == 7:
                continue  # the NaN code
            v = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
            vals.append((v, m))
    return vals


E4M3 = e4m3_table()
E4M3_VALUES = np.array([v for v, _ in E4M3])
E4M3_ODD = np.array([m & 1 for _, m in E4M3])


def e4m3_oracle(x):
    """Nearest e4m3 value, ties to the even mantissa, |x| > 448 saturates to 448, NaN stays NaN."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    for i, xv in np.ndenumerate(x):
        if np.isnan(xv):
            out[i] = np.nan
            continue
        a = min(abs(xv), 448.0)
        d = np.abs(E4M3_VALUES - a)
        best = np.flatnonzero(d == d.min())
        if best.size > 1:
            best = best[E4M3_ODD[best] == 0]
        out[i] = np.copysign(E4M3_VALUES[best[0]], xv)
    return out.astype(np.float32)


def bf16_oracle(x):
    """Nearest bfloat16: compare the two neighbours (truncated and one unit up) in float64, ties to even."""
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    lo = ((u >> 16) << 16).astype(np.uint32).view(np.float32)
    hi = (((u >> 16) + 1) << 16).astype(np.uint32).view(np.float32)
    # One unit above the largest finite value is 2^128 (it rounds to infinity when it is the nearer one).
    hi64 = np.where(np.isinf(hi), np.copysign(2.0 ** 128, x.astype(np.float64)), hi.astype(np.float64))
    with np.errstate(invalid="ignore"):
        dl, dh = np.abs(x.astype(np.float64) - lo), np.abs(hi64 - x)
    lo_even = ((u >> 16) & 1) == 0
    pick_lo = (dl < dh) | ((dl == dh) & lo_even)
    out = np.where(pick_lo, lo, hi)
    return np.where(np.isnan(x), np.nan, np.where(np.isinf(x), x, out)).astype(np.float32)


def half(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def int8_oracle(x, scale):
    """Upstream's Triton quantizer: t = x / scale (fp32), + 0.5 away from zero, truncate; the GPU's
    conversion clamps to [-128, 127] and maps NaN to 0."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        t = np.float32(x) / np.float32(scale)
        t = t + np.where(t >= 0, np.float32(0.5), np.float32(-0.5)).astype(np.float32)
        t = np.trunc(t)
    return np.where(np.isnan(t), 0.0, np.clip(t, -128, 127)).astype(np.float32)


def int8_scale(amax):
    return np.float32(np.float32(amax) / np.float32(127)) + np.float32(1e-7)


def rows_oracle(x, block, mean=None, cast=half):
    n, d = x.shape
    nb = -(-n // block)
    codes = np.zeros((nb * block, d), np.float32)
    scales = np.zeros(nb, np.float32)
    xs = cast(x)
    if mean is not None:
        xs = cast(xs - cast(mean)[None, :])
    for b in range(nb):
        blk = xs[b * block:(b + 1) * block]
        with np.errstate(invalid="ignore"):
            amax = np.nanmax(np.abs(blk)) if np.any(~np.isnan(blk)) else np.float32(0)
        scales[b] = int8_scale(amax)
        codes[b * block:b * block + len(blk)] = int8_oracle(blk, scales[b])
    return codes, scales


def cols_oracle(v):
    vh = half(v)
    with np.errstate(invalid="ignore", divide="ignore"):
        amax = np.nanmax(np.abs(vh), axis=0).astype(np.float32)
        scale = (amax / np.float32(2.25)).astype(np.float32)
        recip = (np.float32(2.25) / amax).astype(np.float32)
        codes = e4m3_oracle(vh * recip[None, :])
    return codes, scale


def same(a, b):
    """Bitwise-equal floats (NaN equals NaN)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


# ---------------------------------------------------------------- rounding
def test_e4m3_rounding_ties_saturation_subnormals_and_nan():
    rng = np.random.default_rng(1)
    mids = (E4M3_VALUES[1:] + E4M3_VALUES[:-1]) / 2  # exact ties between neighbours
    x = np.concatenate([
        rng.normal(0, 1, 2000) * 10.0 ** rng.uniform(-4, 3, 2000),
        mids, -mids, E4M3_VALUES, np.nextafter(mids.astype(np.float32), np.float32(0)),
        [0.0, -0.0, 2 ** -10, 2 ** -10 * 1.0001, 2 ** -9, 3 * 2 ** -10, 447.0, 448.0, 449.0, 464.0, 465.0,
         480.0, 1e6, -1e6, np.inf, -np.inf, np.nan]]).astype(np.float32)
    got = probe(["e4m3"], x)
    want = e4m3_oracle(x)
    bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    assert not bad.any(), list(zip(x[bad][:5], got[bad][:5], want[bad][:5]))
    assert got[-5:-1].tolist() == [448, -448, 448, -448]  # 1e6, -1e6, inf, -inf saturate


def test_half_and_bf16_rounding():
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.normal(0, 1, 3000) * 10.0 ** rng.uniform(-9, 6, 3000),
                        [65504, 65519.99, 65520, 1e5, 2 ** -24, 2 ** -25, 3 * 2 ** -26, 2 ** -14, np.inf, -np.inf,
                         np.nan, 0.0, -0.0, 3.4e38]]).astype(np.float32)
    with np.errstate(over="ignore"):
        assert same(probe(["half"], x), half(x))
    assert same(probe(["bf16"], x), bf16_oracle(x))


def test_int8_codes_ties_saturation_and_nan():
    x = np.array([0, 0.49, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.4, 126.5, 127.49, 130, -127.6, -200, 1e9,
                  np.inf, -np.inf, np.nan], np.float32)
    assert same(probe(["int8", 1.0], x), int8_oracle(x, 1.0))
    assert probe(["int8", 1.0], x)[[2, 3, 6, 7]].tolist() == [1, -1, 3, -3]  # half away from zero
    rng = np.random.default_rng(3)
    y = rng.normal(0, 3, 5000).astype(np.float32)
    s = int8_scale(np.abs(y).max())
    assert same(probe(["int8", repr(float(s))], y), int8_oracle(y, s))


# ---------------------------------------------------------------- operand quantizers
@pytest.mark.parametrize("n,block,smooth", [(300, 128, False), (300, 64, True), (128, 64, False)])
def test_int8_rows_per_tile_with_tails_and_smoothing(n, block, smooth):
    rng = np.random.default_rng(n + block)
    d = 32
    x = rng.normal(0, 2, (n, d)).astype(np.float32)
    x[:block] = 0.0  # an all-zero tile: scale 1e-7, codes 0
    mean = half(x.mean(axis=0)) if smooth else None
    args = ["int8rows", n, d, block] + (["mean"] if smooth else [])
    got = probe(args, np.concatenate([x.ravel(), mean]) if smooth else x)
    codes, scales = rows_oracle(x, block, mean)
    assert same(got[:codes.size].reshape(codes.shape), codes)
    assert same(got[codes.size:], scales)
    if not smooth:
        assert scales[0] == np.float32(1e-7) and not codes[:block].any()


def test_fp8_columns_per_channel_with_a_zero_channel():
    rng = np.random.default_rng(5)
    v = rng.normal(0, 1, (200, 16)).astype(np.float32) * rng.uniform(0.01, 50, 16).astype(np.float32)
    v[:, 3] = 0.0  # upstream's scale is 0 there and its codes 0 * inf = NaN
    got = probe(["fp8cols", 200, 16], v)
    codes, scale = cols_oracle(v)
    assert same(got[:v.size].reshape(v.shape), codes)
    assert same(got[v.size:], scale)
    assert np.isnan(codes[:, 3]).all() and not np.isnan(np.delete(codes, 3, axis=1)).any()


# ---------------------------------------------------------------- whole runs
def attention_emulation(q, k, v, mask, bq, bk, scale, causal, numerics, dtype):
    """One head of SpargeAttn's Stage 2 in the chosen numerics, visiting `mask`'s blocks in order.
    "int8-qk": INT8 Q·Kᵀ as the quantized numerics compute it, P·V and O exact (the l1_quant_qk part)."""
    nq_tok, d = q.shape
    nkv = k.shape[0]
    cast = bf16_oracle if dtype == "bfloat16" else half
    if numerics == "none":
        s = (q.astype(np.float64) @ k.astype(np.float64).T) * scale
    else:
        qc, qs = rows_oracle(q, bq, None, cast)
        kc, ks = rows_oracle(k, bk, cast(k).astype(np.float64).mean(axis=0).astype(np.float32), cast)
        c = np.float32(np.float32(scale) * LOG2E)
    if numerics == "int8-fp8":
        vq, vscale = cols_oracle(v)
    elif numerics == "int8-fp16":
        vq = half(v)
    out = np.zeros((nq_tok, v.shape[1]), np.float64)
    keys = np.arange(nkv)
    for i in range(mask.shape[0]):
        r0, r1 = i * bq, min(nq_tok, (i + 1) * bq)
        cols = [j for j in range(mask.shape[1]) if mask[i, j]]
        if numerics == "none":
            allowed = np.zeros((r1 - r0, nkv), bool)
            for j in cols:
                allowed[:, j * bk:(j + 1) * bk] = True
            if causal:
                allowed &= keys[None, :] <= np.arange(r0, r1)[:, None]
            lg = np.where(allowed, s[r0:r1], -np.inf)
            mx = lg.max(axis=1, keepdims=True)
            w = np.where(allowed, np.exp(lg - np.where(np.isfinite(mx), mx, 0)), 0)
            den = w.sum(axis=1, keepdims=True)
            out[r0:r1] = np.where(den > 0, (w @ v.astype(np.float64)) / np.where(den > 0, den, 1), 0)
            continue
        m = np.full(r1 - r0, -np.inf)
        exact_pv = numerics == "int8-qk"
        l = np.zeros(r1 - r0, np.float64 if exact_pv else np.float32)
        acc = np.zeros((r1 - r0, v.shape[1]), np.float64 if exact_pv else np.float32)
        for j in cols:
            k0, k1 = j * bk, min(nkv, (j + 1) * bk)
            sint = qc[r0:r1].astype(np.float64) @ kc[k0:k1].astype(np.float64).T  # exact integers
            dq = np.float32(qs[i] * ks[j])
            lg = (sint.astype(np.float32) * np.float32(c * dq)).astype(np.float32)
            if causal:
                lg = np.where(keys[None, k0:k1] <= np.arange(r0, r1)[:, None], lg, -np.inf)
            m_new = np.maximum(m, lg.max(axis=1))
            off = 8.807 if numerics == "int8-fp8" else 0.0
            with np.errstate(invalid="ignore"):  # rows that have seen no visible key yet: -inf - -inf
                alpha = np.where(np.isfinite(m_new), np.exp2(m - m_new), 1.0).astype(np.float32)
                p = np.where(np.isfinite(m_new)[:, None], np.exp2(lg - m_new[:, None] + off), 0).astype(np.float32)
            if numerics == "int8-qk":
                l = l * alpha + p.sum(axis=1, dtype=np.float64)
                g = p.astype(np.float64) @ v[k0:k1].astype(np.float64)
            elif numerics == "int8-fp8":
                l = l * alpha + p.sum(axis=1, dtype=np.float64).astype(np.float32)
                g = (e4m3_oracle(p).astype(np.float64) @ vq[k0:k1].astype(np.float64)).astype(np.float32)
            else:
                ph = half(p)
                l = l * alpha + ph.sum(axis=1, dtype=np.float64).astype(np.float32)
                g = np.zeros_like(acc)
                for c0 in range(0, k1 - k0, 16):  # one fp16 rounding per 16-key tensor-core step
                    step = ph[:, c0:c0 + 16].astype(np.float64) @ vq[k0 + c0:k0 + c0 + 16].astype(np.float64)
                    g = half(g.astype(np.float64) + step)
            acc = acc * alpha[:, None] + g
            m = m_new
        o = np.where(l[:, None] > 0, acc / np.where(l > 0, l, 1)[:, None], 0)
        if numerics == "int8-fp8":
            o = o * vscale[None, :]
        out[r0:r1] = o if exact_pv else cast(o.astype(np.float32))
    return out


def l1(o, ref):
    return float(np.abs(o - ref).sum() / np.abs(ref).sum())


def write_capture(path, q, k, v, dtype, causal):
    with h5py.File(path, "w") as f:
        f.attrs["sparge_capture_version"] = 1
        g = f.create_group("entries/e0")
        for name, t in (("q", q), ("k", k), ("v", v)):
            if dtype == "bfloat16":
                ds = g.create_dataset(name, data=(t.view(np.uint32) >> 16).astype(np.uint16))
                ds.attrs["dtype"] = "bfloat16"
            else:
                g.create_dataset(name, data=t.astype(dtype))
        g.attrs["causal"] = np.int64(causal)


CASES = [  # numerics, geometry, dtype, heads q/kv, tokens, D, causal
    ("int8-fp8", "64x128", "float16", (4, 4), 333, 64, False),
    ("int8-fp8", "128x64", "bfloat16", (4, 2), 300, 32, True),
    ("int8-fp16", "128x64", "float16", (2, 2), 290, 64, False),
    ("int8-fp16", "64x128", "float32", (4, 2), 257, 32, True),
]


@pytest.mark.parametrize("numerics,geometry,dtype,heads,n,d,causal", CASES)
def test_engine_matches_numpy_emulation(tmp_path, numerics, geometry, dtype, heads, n, d, causal):
    rng = np.random.default_rng(n * d + heads[0])
    hq, hkv = heads
    q = rng.normal(0, 1, (1, hq, n, d)).astype(np.float32) * 1.5
    k = rng.normal(0, 1, (1, hkv, n, d)).astype(np.float32) + 0.3  # a K mean for smoothing to remove
    v = rng.normal(0, 1, (1, hkv, n, d)).astype(np.float32)
    q[0, 0, :64] = 0.0  # an all-zero query tile (INT8 scale 1e-7)
    cast = bf16_oracle if dtype == "bfloat16" else half
    q, k, v = (cast(t) if dtype != "float32" else t for t in (q, k, v))
    cap = tmp_path / "c.h5"
    write_capture(cap, q, k, v, dtype, causal)
    subprocess.run([SPARGE, "run", str(cap), "--engine", "cpu", "--quant", numerics, "--block", geometry,
                    "--theta=-0.1", "--tau", "0.9", "--lambda", "50", "--masks", str(tmp_path / "m.h5"),
                    "--report", str(tmp_path / "r.json")], check=True, capture_output=True)
    report = json.load(open(tmp_path / "r.json"))["entries"][0]
    assert report["numerics"] == numerics and report["geometry"] == geometry
    with h5py.File(tmp_path / "m.h5") as f:
        mask = f["entries/e0/block_mask"][0].astype(bool)
        assert not f["entries/e0/pv_skipped"][...].any()  # λ 50: nothing skipped
    bq, bk = map(int, geometry.split("x"))
    scale = 1 / np.sqrt(d)
    # Quantized runs cast float32 inputs to fp16 first, as upstream does.
    qi, ki, vi = (t if dtype != "float32" else half(t) for t in (q, k, v))
    nq, nk = mask.shape[1:]
    valid = np.ones((nq, nk), bool)
    if causal:
        valid = np.array([[j * bk <= min(n, (i + 1) * bq) - 1 for j in range(nk)] for i in range(nq)])
    for h in report["heads"]:
        hh, kv = h["head"], h["head"] // (hq // hkv)
        ref = attention_emulation(q[0, hh], k[0, kv], v[0, kv], valid, bq, bk, scale, causal, "none", dtype)
        want = {
            "l1": l1(attention_emulation(qi[0, hh], ki[0, kv], vi[0, kv], mask[hh], bq, bk, scale, causal,
                                         numerics, dtype), ref),
            "l1_sparse": l1(attention_emulation(q[0, hh], k[0, kv], v[0, kv], mask[hh], bq, bk, scale, causal,
                                                "none", dtype), ref),
            "l1_quant": l1(attention_emulation(qi[0, hh], ki[0, kv], vi[0, kv], valid, bq, bk, scale, causal,
                                               numerics, dtype), ref),
            # INT8 Q·Kᵀ alone: P·V exact, on the values as stored.
            "l1_quant_qk": l1(attention_emulation(qi[0, hh], ki[0, kv], v[0, kv], valid, bq, bk, scale, causal,
                                                  "int8-qk", dtype), ref),
        }
        for key, w in want.items():
            assert abs(h[key] - w) <= 2e-3 * w + 1e-6, (hh, key, h[key], w)
        assert h["l1_quant"] > 1e-4  # the quantization error is really there
