"""The reference engine: SpargeAttn's method (Stage 1, block-sparse attention with the PV skip, the quantized
numerics) in plain PyTorch, on the CPU or a GPU, following the C++ CPU engine operation for operation so that
its block masks and PV-skip maps equal the engine's bit for bit (docs/method.md, docs/numerics.md)::

    from sparge_capture import reference
    r = reference.attention(q, k, v, simthreshd1=0.3, cdfthreshd=0.95, pvthreshd=8.0, causal=True,
                            numerics="int8-fp8", geometry="128x64", sink=True, measure=True)
    r.output, r.block_mask, r.pv_skipped, r.l1      # [B,Hq,Nq,Dv], [B,Hq,nq,nk] x2, per-head L1 [Hq]

Per-head values (simthreshd1, cdfthreshd / topk, pvthreshd, is_sparse, numerics) are scalars or sequences
indexed by query head. `python -m sparge_capture.reference CAPTURE --entry E ... --masks OUT.h5` runs it on a
capture entry and writes masks v1, as `sparge run --masks` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple, Union

import torch

from .numerics import NUMERICS, input_type_of, key_mean
from .stage1 import BlockStats, Validity, block_stats, block_validity, select_blocks
from .stage2 import block_sparse_attention, dense_reference

__all__ = ["attention", "block_mask", "AttentionResult", "GEOMETRIES", "NUMERICS", "parse_geometry",
           "tail_blocks"]

GEOMETRIES = {"128x64": (128, 64), "64x128": (64, 128)}
PerHead = Union[float, bool, str, Sequence, torch.Tensor]


def parse_geometry(geometry: Union[str, Tuple[int, int]]) -> Tuple[int, int]:
    if isinstance(geometry, str):
        if geometry not in GEOMETRIES:
            raise ValueError(f"geometry {geometry!r}: expected one of {', '.join(GEOMETRIES)}")
        return GEOMETRIES[geometry]
    if tuple(geometry) not in GEOMETRIES.values():
        raise ValueError(f"geometry {tuple(geometry)}: expected (128, 64) or (64, 128)")
    return tuple(geometry)


def tail_blocks(geometry: Tuple[int, int]) -> int:
    return geometry[0] // geometry[1] if geometry[0] > geometry[1] else 1


@dataclass
class AttentionResult:
    output: torch.Tensor  # [B, Hq, Nq, Dv], the inputs' dtype
    block_mask: torch.Tensor  # [B, Hq, nq, nk] bool: Stage 1 selected (computed)
    pv_skipped: torch.Tensor  # [B, Hq, nq, nk] bool: Q·Kᵀ computed, P·V skipped
    validity: Validity
    geometry: Tuple[int, int]
    empty_rows: torch.Tensor  # [B, Hq]
    l1: Optional[torch.Tensor] = None  # [Hq] float64, with measure=True: Σ|O − O_ref| / Σ|O_ref| per head
    abs_diff: Optional[torch.Tensor] = None  # [Hq] float64 Σ|O − O_ref| (to add up over calls)
    abs_ref: Optional[torch.Tensor] = None  # [Hq] float64 Σ|O_ref|
    counts: dict = field(default_factory=dict)  # per head [Hq]: valid, selected, computed_pv blocks

    def __iter__(self):  # out, block_mask, pv_skipped = attention(...)
        return iter((self.output, self.block_mask, self.pv_skipped))

    def sparsity(self) -> dict:
        """Stage-1 sparsity, PV-skip rate and total sparsity over every head (exact denominators)."""
        valid, sel, comp = (float(self.counts[k].sum()) for k in ("valid", "selected", "computed_pv"))
        return {"sparsity_stage1": 1 - sel / valid if valid else 0.0,
                "pv_skip_rate": (sel - comp) / sel if sel else 0.0,
                "sparsity_total": 1 - comp / valid if valid else 0.0}

    def sparsity_with_area(self) -> dict:
        """sparsity() plus the same weighted by each block's visible token pairs (the masks file's figures)."""
        out = self.sparsity()
        valid, sel, comp = (float(self.counts[k].sum()) for k in ("valid_area", "selected_area", "computed_area"))
        out["sparsity_stage1_area"] = 1 - sel / valid if valid else 0.0
        out["sparsity_total_area"] = 1 - comp / valid if valid else 0.0
        return out


def per_head(value: PerHead, heads: int, name: str, dtype=torch.float64) -> torch.Tensor:
    t = torch.as_tensor(value, dtype=dtype).flatten()
    if t.numel() == 1:
        t = t.expand(heads)
    if t.numel() != heads:
        raise ValueError(f"{name}: {t.numel()} values for {heads} query heads (give one, or one per head)")
    return t.clone()


def _per_head_numerics(numerics, heads: int) -> list:
    values = [numerics] * heads if isinstance(numerics, str) else list(numerics)
    if len(values) != heads:
        raise ValueError(f"numerics: {len(values)} values for {heads} query heads")
    for n in values:
        if n not in NUMERICS:
            raise ValueError(f"numerics {n!r}: expected one of {', '.join(NUMERICS)}")
    return values


def _check_shapes(q, k, v) -> None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k, v must be [B, H, N, D] (HND), got {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}")
    if q.shape[0] != k.shape[0] or k.shape[:3] != v.shape[:3] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} do not fit together")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"{q.shape[1]} query heads are not a multiple of {k.shape[1]} key/value heads")
    if min(q.shape[-2], k.shape[-2]) < 1:
        raise ValueError("q and k need at least one token each")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, simthreshd1: PerHead = 0.6,
              cdfthreshd: Optional[PerHead] = None, topk: Optional[PerHead] = None, pvthreshd: PerHead = 50.0,
              is_sparse: PerHead = True, numerics: Union[str, Sequence[str]] = "none",
              geometry: Union[str, Tuple[int, int]] = "128x64", causal: bool = False,
              window: Optional[Tuple[int, int]] = None, scale: Optional[float] = None, smooth_k: bool = True,
              sink: bool = False, diagonal: bool = False, measure: bool = False,
              stats: Optional[BlockStats] = None) -> AttentionResult:
    """Sparse attention of q [B, Hq, Nq, D], k [B, Hkv, Nkv, D], v [B, Hkv, Nkv, Dv] (float16, bfloat16 or
    float32) with SpargeAttn's per-head parameters. cdfthreshd (τ) or topk selects the mode (cdf by default,
    τ 0.98); is_sparse false computes every valid block with no PV skip; numerics "none" is exact arithmetic.
    window = (left, right) as in the capture format. measure=True also computes the exact dense output and the
    per-head L1 against it."""
    _check_shapes(q, k, v)
    if cdfthreshd is not None and topk is not None:
        raise ValueError("give cdfthreshd (cdf mode) or topk (top-k mode), not both")
    heads = q.shape[1]
    input_type = input_type_of(q.dtype)
    geom = parse_geometry(geometry)
    mode = "topk" if topk is not None else "cdf"
    theta = per_head(simthreshd1, heads, "simthreshd1")
    tau = per_head(0.98 if cdfthreshd is None else cdfthreshd, heads, "cdfthreshd")
    frac = per_head(0.5 if topk is None else topk, heads, "topk")
    lam = per_head(pvthreshd, heads, "pvthreshd")
    dense = ~per_head(is_sparse, heads, "is_sparse", torch.bool)
    modes = _per_head_numerics(numerics, heads)
    _check_values(theta, tau, frac, lam, mode)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    dev = q.device
    qf, kf, vf = q.float(), k.float(), v.float()
    mean = key_mean(kf, input_type) if smooth_k else None
    validity = block_validity(q.shape[-2], k.shape[-2], geom[0], geom[1], causal, window, dev)
    if stats is None:
        stats = block_stats(qf, kf, geom[0], geom[1], smooth_k, input_type, mean)
    mask = select_blocks(stats, validity, theta.to(dev), mode, tau.to(dev), frac.to(dev), dense.to(dev), sink,
                         diagonal)
    lam = torch.where(dense, torch.full_like(lam, math.inf), lam).to(dev)  # a dense head never skips
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=torch.float32, device=dev)
    skipped = torch.zeros_like(mask)
    empty = torch.zeros(q.shape[0], heads, dtype=torch.int64, device=dev)
    group = heads // k.shape[1]
    for n in sorted(set(modes)):  # heads sharing numerics run together
        hs = torch.tensor([h for h in range(heads) if modes[h] == n], device=dev)
        kv = torch.arange(k.shape[1], device=dev).repeat_interleave(group)[hs]
        part = block_sparse_attention(qf[:, hs], kf[:, kv], vf[:, kv], mask[:, hs], lam[hs], n, geom, scale,
                                      causal, window, input_type, None if mean is None else mean[:, kv])
        out[:, hs], skipped[:, hs], empty[:, hs] = part.out, part.pv_skipped, part.empty_rows
    result = AttentionResult(out.to(q.dtype), mask, skipped, validity, geom, empty)
    result.counts = _counts(mask, skipped, validity)
    if measure:
        ref = dense_reference(qf, kf, vf, scale, causal, window)
        result.abs_diff = (out.double() - ref.double()).abs().sum((0, 2, 3)).cpu()
        result.abs_ref = ref.double().abs().sum((0, 2, 3)).cpu()
        result.l1 = result.abs_diff / result.abs_ref
    return result


def block_mask(q: torch.Tensor, k: torch.Tensor, *, simthreshd1: PerHead = 0.6, cdfthreshd: Optional[PerHead] = None,
               topk: Optional[PerHead] = None, is_sparse: PerHead = True,
               geometry: Union[str, Tuple[int, int]] = "128x64", causal: bool = False,
               window: Optional[Tuple[int, int]] = None, smooth_k: bool = True, sink: bool = False,
               diagonal: bool = False) -> Tuple[torch.Tensor, Validity]:
    """Stage 1 alone: the block mask [B, Hq, nq, nk] (bool) attention() would compute, and the grid's validity."""
    _check_shapes(q, k, k)
    heads, input_type, geom = q.shape[1], input_type_of(q.dtype), parse_geometry(geometry)
    mode = "topk" if topk is not None else "cdf"
    qf, kf = q.float(), k.float()
    mean = key_mean(kf, input_type) if smooth_k else None
    validity = block_validity(q.shape[-2], k.shape[-2], geom[0], geom[1], causal, window, q.device)
    stats = block_stats(qf, kf, geom[0], geom[1], smooth_k, input_type, mean)
    values = [per_head(x, heads, n).to(q.device) for x, n in ((simthreshd1, "simthreshd1"),
              (0.98 if cdfthreshd is None else cdfthreshd, "cdfthreshd"), (0.5 if topk is None else topk, "topk"))]
    dense = ~per_head(is_sparse, heads, "is_sparse", torch.bool).to(q.device)
    return select_blocks(stats, validity, values[0], mode, values[1], values[2], dense, sink, diagonal), validity


def _check_values(theta, tau, frac, lam, mode) -> None:
    if not bool(torch.isfinite(theta).all()):
        raise ValueError("simthreshd1 must be finite")
    if mode == "cdf" and not bool(((tau >= 0) & (tau <= 1)).all()):
        raise ValueError("cdfthreshd must be in [0, 1]")
    if mode == "topk" and not bool(((frac > 0) & (frac <= 1)).all()):
        raise ValueError("topk must be in (0, 1]")
    if bool((lam < 0).any()) or bool(torch.isnan(lam).any()):
        raise ValueError("pvthreshd must be >= 0 (a negative λ would skip blocks that raise the maximum)")


def _counts(mask, skipped, validity) -> dict:
    """Per query head (summed over the batch): valid, selected and P·V-computed blocks, and their areas."""
    valid, area, batch = validity.valid, validity.area, mask.shape[0]
    selected, computed = mask & valid, mask & ~skipped & valid
    return {"valid": torch.full((mask.shape[1],), int(valid.sum()) * batch),
            "selected": selected.sum((0, 2, 3)).cpu(), "computed_pv": computed.sum((0, 2, 3)).cpu(),
            "valid_area": torch.full((mask.shape[1],), float(area.sum()) * batch, dtype=torch.float64),
            "selected_area": (selected * area).sum((0, 2, 3)).cpu(),
            "computed_area": (computed * area).sum((0, 2, 3)).cpu()}
