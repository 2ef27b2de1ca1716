"""Stage 2 (docs/method.md section 4, docs/numerics.md) in PyTorch: block-sparse attention with the online
softmax, the tile-wide PV skip (λ), exact element masks and the three numerics, in the C++ CPU engine's order.
Every query tile of every head advances together over the key blocks in ascending order (the LUT order), so a
block's PV-skip decision sees the same running maxima as the engine's."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from .numerics import (FP8_OFFSET, LOG2E, exp2_fast, f32, pad_rows, quantize_columns_fp8, quantize_rows_int8,
                       round_e4m3, round_half, round_input)
from .stage1 import Window, visible_range

LANES = 16  # the engine's row sums keep 16 partial sums whatever the vector width
FP16_STEP = 16  # keys per tensor-core step of the sm80 P·V: the fp16 accumulator is rounded after each


@dataclass
class Stage2Output:
    out: torch.Tensor  # [B, H, Nq, Dv] float32
    pv_skipped: torch.Tensor  # [B, H, nq, nk] bool
    empty_rows: torch.Tensor  # [B, H] int64: rows that saw no key among their computed blocks (output 0)


def _lane_sum(p: torch.Tensor) -> torch.Tensor:
    cols = p.shape[-1]
    full = cols // LANES * LANES
    lanes = torch.zeros(*p.shape[:-1], LANES, dtype=p.dtype, device=p.device)
    for c in range(0, full, LANES):
        lanes = lanes + p[..., c:c + LANES]
    acc = torch.zeros_like(p[..., 0])
    for k in range(LANES):
        acc = acc + lanes[..., k]
    for x in range(full, cols):
        acc = acc + p[..., x]
    return acc


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b rounded once to float32 (the engine's float32 matrix products agree to a few ulps)."""
    return (a.double() @ b.double()).float()


@dataclass
class _Operands:
    scores_q: torch.Tensor  # [B, H, nq, BQ, D]: q · scale · log2e (exact) or INT8 codes
    keys: torch.Tensor  # [B, H, Nkv(padded), D]
    q_scales: Optional[torch.Tensor]  # [B, H, nq] (INT8)
    k_scales: Optional[torch.Tensor]  # [B, H, nk] (INT8)
    factor: Optional[torch.Tensor]  # sm_scale · log2e in float32 (INT8)
    values: torch.Tensor  # [B, H, Nkv, Dv]: fp32, fp16-rounded or e4m3 codes
    v_scales: Optional[torch.Tensor]  # [B, H, 1, Dv] (int8-fp8)


def _operands(q, k, v, numerics, block_q, block_k, scale, input_type, kv_mean) -> _Operands:
    group = q.shape[1] // k.shape[1]
    nq = -(-q.shape[-2] // block_q)
    if numerics == "none":
        qs = pad_rows(q * torch.tensor(scale * LOG2E, dtype=torch.float32, device=q.device), block_q)
        ops = _Operands(qs, k, None, None, None, v, None)
    else:
        q8, q_scales = quantize_rows_int8(q, block_q, None, input_type)
        k8, k_scales = quantize_rows_int8(k, block_k, kv_mean, input_type)
        factor = f32(scale, q) * f32(LOG2E, q)
        ops = _Operands(q8, k8, q_scales, k_scales.repeat_interleave(group, 1), factor, v, None)
        if numerics == "int8-fp16":
            ops.values = round_half(v)
        else:
            ops.values, ops.v_scales = quantize_columns_fp8(v)
            ops.v_scales = ops.v_scales.repeat_interleave(group, 1)
    ops.scores_q = ops.scores_q.reshape(*q.shape[:2], nq, block_q, q.shape[-1])
    ops.keys = ops.keys.repeat_interleave(group, 1)
    ops.values = ops.values.repeat_interleave(group, 1)
    return ops


def _scores(ops: _Operands, numerics: str, k0: int, cols: int, j: int) -> torch.Tensor:
    keys = ops.keys[..., None, k0:k0 + cols, :].transpose(-1, -2)
    if numerics == "none":
        return _product(ops.scores_q, keys)
    exact = ops.scores_q @ keys  # INT8 codes: every product and sum is exact in float32 up to D = 1040
    return exact * (ops.factor * (ops.q_scales * ops.k_scales[..., j:j + 1]))[..., None, None]


def _block_product(p: torch.Tensor, values: torch.Tensor, numerics: str) -> torch.Tensor:
    if numerics != "int8-fp16":
        return _product(p, values)
    g = torch.zeros(*p.shape[:-1], values.shape[-1], dtype=torch.float32, device=p.device)
    for c0 in range(0, p.shape[-1], FP16_STEP):  # fp16 accumulation, rounded after every 16-key step
        g = round_half(g + _product(p[..., c0:c0 + FP16_STEP], values[..., c0:c0 + FP16_STEP, :]))
    return g


def block_sparse_attention(q, k, v, mask: torch.Tensor, lam: torch.Tensor, numerics: str,
                           geometry: Tuple[int, int], scale: float, causal: bool, window: Window,
                           input_type: str, kv_mean: Optional[torch.Tensor]) -> Stage2Output:
    """q [B, H, Nq, D], k/v [B, Hkv, Nkv, D/Dv] (float32 holding the inputs' values); mask [B, H, nq, nk] bool;
    lam [H] float64 (inf: never skip); kv_mean [B, Hkv, 1, D] for smooth_k (None: off)."""
    block_q, block_k = geometry
    b, h, n_q = q.shape[0], q.shape[1], q.shape[-2]
    n_kv, dv = k.shape[-2], v.shape[-1]
    nq, nk = mask.shape[-2], mask.shape[-1]
    quantized = numerics != "none"
    tail = block_q // block_k if block_q > block_k else 1
    ops = _operands(q, k, v, numerics, block_q, block_k, scale, input_type, kv_mean)
    first, last = visible_range(nq * block_q, n_kv, causal, window, q.device)
    real_row = torch.arange(nq * block_q, device=q.device) < n_q
    first, last = first.reshape(nq, block_q), torch.where(real_row, last, -1).reshape(nq, block_q)
    partial_tile = torch.zeros(nq, dtype=torch.bool, device=q.device)
    partial_tile[-1] = n_q % block_q != 0
    visits = mask.sum(-1)
    position = mask.long().cumsum(-1) - 1
    neg_inf = torch.tensor(-math.inf, device=q.device)
    m = torch.full((b, h, nq, block_q), -math.inf, device=q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(b, h, nq, block_q, dv, device=q.device)
    skipped = torch.zeros_like(mask)
    for j in range(nk):
        visit = mask[..., j]
        if not bool(visit.any()):
            continue
        k0 = j * block_k
        cols = min(block_k, n_kv - k0)
        key = torch.arange(k0, k0 + cols, device=q.device)
        visible = (key >= first[..., None]) & (key <= last[..., None])  # [nq, BQ, cols]
        s = torch.where(visible, _scores(ops, numerics, k0, cols, j), neg_inf)
        row_max = s.amax(-1)
        # PV skip: one decision per tile from the largest rise of any row's running max; the first visited
        # block and the tail blocks are never skipped.
        t = position[..., j]
        eligible = visit & (t > 0) & (t < visits - tail)
        rise = torch.where(m == -math.inf, torch.full_like(m, math.inf), row_max - m)
        delta = torch.where(row_max == -math.inf, neg_inf, rise).amax(-1)
        if quantized:  # the zero rows padding a partial last tile vote too: their maxima rise by exactly 0
            delta = torch.where(partial_tile, torch.clamp(delta, min=0.0), delta)
        skip = eligible & (delta.double() + lam[:, None] <= 0)
        skipped[..., j] = skip
        m_new = torch.maximum(m, row_max)
        seen = m_new != -math.inf
        go = visit & ~skip & seen.any(-1)
        alpha = torch.where(seen, exp2_fast(m - m_new), torch.ones_like(m))
        offset = -m_new + f32(FP8_OFFSET, m) if numerics == "int8-fp8" else -m_new
        p = exp2_fast(s + torch.where(seen, offset, neg_inf)[..., None])
        if numerics == "int8-fp16":
            p = round_half(p)
        row_sum = _lane_sum(p)
        if numerics == "int8-fp8":
            p = round_e4m3(p)
        g = _block_product(p, ops.values[..., None, k0:k0 + cols, :], numerics)
        upd = go[..., None]
        l = torch.where(upd & seen, l * alpha + row_sum, l)
        acc = torch.where(upd[..., None], acc * alpha[..., None] + g, acc)
        m = torch.where(upd, m_new, m)
    return _finish(acc, l, ops, numerics, input_type, real_row, skipped, n_q)


def _finish(acc, l, ops, numerics, input_type, real_row, skipped, n_q) -> Stage2Output:
    b, h, nq, block_q, dv = acc.shape
    ok = l > 0
    o = acc * (f32(1.0, l) / l)[..., None]
    if numerics == "int8-fp8":
        o = o * ops.v_scales[..., None, :, :]
    if numerics != "none":
        o = round_input(o, input_type)  # the deployed kernel writes O in the input's half type
    o = torch.where(ok[..., None], o, torch.zeros_like(o))  # no visible key among the computed blocks: 0
    empty = (~ok & real_row.reshape(nq, block_q)).sum((-1, -2))
    return Stage2Output(o.reshape(b, h, nq * block_q, dv)[..., :n_q, :], skipped, empty)


def dense_reference(q, k, v, scale: float, causal: bool, window: Window, chunk_rows: int = 512) -> torch.Tensor:
    """Exact attention over every visible key (float64 arithmetic, float32 result; 0 for rows that see no
    key): what per-head L1 is measured against."""
    group = q.shape[1] // k.shape[1]
    k, v = k.double().repeat_interleave(group, 1), v.double().repeat_interleave(group, 1)
    n_q, n_kv = q.shape[-2], k.shape[-2]
    first, last = visible_range(n_q, n_kv, causal, window, q.device)
    key = torch.arange(n_kv, device=q.device)
    out = []
    for r0 in range(0, n_q, chunk_rows):
        r1 = min(n_q, r0 + chunk_rows)
        s = (q[..., r0:r1, :].double() @ k.transpose(-1, -2)) * scale
        visible = (key >= first[r0:r1, None]) & (key <= last[r0:r1, None])
        s = torch.where(visible, s, torch.tensor(-math.inf, dtype=s.dtype, device=s.device))
        mx = s.amax(-1, keepdim=True)
        e = torch.exp(s - torch.where(torch.isinf(mx), torch.zeros_like(mx), mx))
        den = e.sum(-1, keepdim=True)
        o = (e @ v) / torch.where(den > 0, den, torch.ones_like(den))
        out.append(o.float())
    return torch.cat(out, -2)
