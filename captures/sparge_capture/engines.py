"""The engines SpargeApply routes matched attention calls through:

* reference — this package's PyTorch implementation of the method (CPU or GPU), the C++ CPU engine's numerics;
* spargeattn — SpargeAttn's own Python API (spas_sage_attn), what a user deploys;
* sparge — this project's CUDA kernels, through the Python package sparge_attn once it exists.

Each engine's run(call, hp, params, measure, counts) returns an EngineRun; counts=False lets an engine leave the
per-head counts out where leaving them out makes the call faster (the sparge engine; the others count anyway).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

from . import reference
from .params import HeadParams, ParamsFile
from .reference.stage2 import dense_reference


class EngineUnavailable(RuntimeError):
    """The engine cannot run here (package missing, no CUDA device, parameters it cannot run)."""


@dataclass
class Call:
    """One attention call in the capture format's terms: q [B, Hq, Nq, D], k/v [B, Hkv, Nkv, D/Dv] (KV heads)."""
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    causal: bool
    window: Optional[tuple]
    scale: Optional[float]


@dataclass
class EngineRun:
    output: torch.Tensor  # [B, Hq, Nq, Dv] in q's dtype, on q's device
    counts: Optional[torch.Tensor]  # [Hq, K >= 3]: valid, selected and P·V-computed blocks first, per query head
    abs_diff: Optional[torch.Tensor] = None  # [Hq] Σ|O − O_ref| against the exact dense output (measure=True)
    abs_ref: Optional[torch.Tensor] = None


def _selection(hp: HeadParams) -> dict:
    return {"topk": hp.topk} if hp.mode == "topk" else {"cdfthreshd": hp.tau}


class ReferenceEngine:
    name = "reference"

    def __init__(self, device=None) -> None:
        self.device = device

    def configure(self, params: ParamsFile) -> None:
        pass

    def unsupported(self, call: Call) -> Optional[str]:
        return None

    def run(self, call: Call, hp: HeadParams, pf: ParamsFile, measure: bool, counts: bool = True) -> EngineRun:
        dev = self.device or call.q.device
        r = reference.attention(call.q.to(dev), call.k.to(dev), call.v.to(dev), simthreshd1=hp.theta,
                                pvthreshd=hp.lam, is_sparse=hp.sparse, numerics=hp.numerics, geometry=pf.geometry,
                                causal=call.causal, window=call.window, scale=call.scale, smooth_k=pf.smooth_k,
                                sink=pf.sink, diagonal=pf.diagonal, measure=measure, **_selection(hp))
        return EngineRun(r.output.to(call.q.device), _stack_counts(r.counts), r.abs_diff, r.abs_ref)


def _stack_counts(counts: dict) -> torch.Tensor:
    """Per-head valid, selected and P·V-computed block counts ([Hq] each, as reference.attention gives them)
    side by side: EngineRun's one form."""
    return torch.stack([counts["valid"], counts["selected"], counts["computed_pv"]], 1)


def _measure(call: Call, out: torch.Tensor, scale: float):
    ref = dense_reference(call.q.float(), call.k.float(), call.v.float(), scale, call.causal, call.window)
    return ((out.double() - ref.double()).abs().sum((0, 2, 3)).cpu(), ref.double().abs().sum((0, 2, 3)).cpu())


def _predicted_counts(call: Call, hp: HeadParams, pf: ParamsFile) -> torch.Tensor:
    """Per-head block counts of the Stage-1 mask the reference predicts for these inputs (SpargeAttn returns
    one overall figure only); PV skips are not known, so computed_pv counts every selected block."""
    mask, validity = reference.block_mask(call.q, call.k, simthreshd1=hp.theta, is_sparse=hp.sparse,
                                          geometry=pf.geometry, causal=call.causal, window=call.window,
                                          smooth_k=pf.smooth_k, sink=pf.sink, **_selection(hp))
    sel = (mask & validity.valid).sum((0, 2, 3)).cpu()
    valid = torch.full_like(sel, int(validity.valid.sum()) * mask.shape[0])
    return _stack_counts({"valid": valid, "selected": sel, "computed_pv": sel})


class SpargeAttnEngine:
    """SpargeAttn's Python API. int8-fp16 parameters (tuned with --target sm80) run through
    spas_sage_attn_meansim[_topk]_cuda (INT8 Q·Kᵀ, fp16 P·V, 128x64 tiles on every GPU, causal masked inside
    blocks); int8-fp8 parameters through spas_sage2_attn_meansim[_topk]_cuda (FP8 P·V on sm89/sm90, whose tiles
    are 64x128 on sm90 and 128x64 elsewhere). Heads that must run in exact numerics run dense through torch's
    SDPA in float32: SpargeAttn's kernels are always quantized."""
    name = "spargeattn"

    def __init__(self, device=None, allow_unmasked_causal: bool = False) -> None:
        try:
            import spas_sage_attn
        except ImportError as e:
            raise EngineUnavailable(
                "engine 'spargeattn' needs SpargeAttn's package spas_sage_attn (built from its source with the "
                f"CUDA extension), which cannot be imported here ({e}); use engine='reference'") from None
        if not torch.cuda.is_available():
            raise EngineUnavailable("engine 'spargeattn' needs a CUDA GPU, and torch sees none; use "
                                    "engine='reference' (CPU or GPU)")
        self.api = spas_sage_attn
        self.device = torch.device(device or "cuda")
        self.allow_unmasked_causal = allow_unmasked_causal
        self.fn = None

    def configure(self, pf: ParamsFile) -> None:
        major, minor = torch.cuda.get_device_capability(self.device)
        arch = f"sm{major}{minor}"
        if pf.diagonal:
            raise EngineUnavailable("the parameter file keeps diagonal blocks on (Sparge Studio's --diagonal "
                                    "extension); SpargeAttn has no such option: re-tune without --diagonal")
        if pf.numerics == "none":
            raise EngineUnavailable("the parameter file was tuned in exact numerics; SpargeAttn's kernels are always "
                                    "quantized: re-tune with --target sm80 | sm89 | sm90")
        if pf.numerics == "int8-fp16":
            self.sage = 1
            geometry = "128x64"
        else:
            if arch in ("sm80", "sm86", "sm87"):
                raise EngineUnavailable(f"int8-fp8 parameters on {arch}: SpargeAttn runs int8-fp16 there; re-tune "
                                        "with --target sm80")
            self.sage = 2
            geometry = "64x128" if arch == "sm90" else "128x64"
        if pf.geometry != geometry:
            raise EngineUnavailable(f"the parameters were tuned with {pf.geometry} tiles, but SpargeAttn's "
                                    f"{pf.numerics} kernels use {geometry} on this GPU ({arch}); re-tune with "
                                    f"--block {geometry}")
        name = ("spas_sage_attn_meansim" if self.sage == 1 else "spas_sage2_attn_meansim") + \
            ("_topk_cuda" if pf.mode == "topk" else "_cuda")
        self.fn = getattr(self.api, name)

    def unsupported(self, call: Call) -> Optional[str]:
        if call.q.shape[-1] not in (64, 128) or call.v.shape[-1] != call.q.shape[-1]:
            return f"head dim {call.q.shape[-1]}: SpargeAttn's kernels take 64 or 128 (pad and pass the scale)"
        if call.window is not None:
            return "a local window: SpargeAttn has no window support"
        return None

    def run(self, call: Call, hp: HeadParams, pf: ParamsFile, measure: bool, counts: bool = True) -> EngineRun:
        if call.causal and self.sage == 2 and not self.allow_unmasked_causal:
            # Upstream's sage2 API always runs its kernel with the causal flag off, and its kernel with that flag
            # on (an argument the API never sets) stalled inside a real model's layer on an H200.
            raise EngineUnavailable(
                "a causal call with int8-fp8 parameters: SpargeAttn's sage2 API runs its kernel without the "
                "causal mask inside the diagonal blocks (queries see up to 127 future keys; docs/method.md "
                "section 10). Tune with --target sm80 (its sage1 API masks), or pass allow_unmasked_causal=True")
        dev, heads = self.device, call.q.shape[1]
        group = heads // call.k.shape[1]
        q = call.q.to(dev)
        k, v = (t.to(dev).repeat_interleave(group, 1) for t in (call.k, call.v))  # upstream's Stage 1 has no GQA
        dense = ~hp.sparse
        col = lambda t, dense_value: torch.where(dense, torch.full_like(t, dense_value), t).float().to(dev)  # noqa
        sel = {"topk": col(hp.topk, 1.0)} if hp.mode == "topk" else {"cdfthreshd": col(hp.tau, 1.0)}
        scale = call.scale if call.scale is not None else 1.0 / math.sqrt(q.shape[-1])
        out = self.fn(q, k, v, is_causal=call.causal, scale=scale, smooth_k=pf.smooth_k,
                      simthreshd1=col(hp.theta, 1.0), pvthreshd=col(hp.lam.clamp(max=1e30), 1e30),
                      attention_sink=pf.sink, tensor_layout="HND", **sel)
        out = out.to(q.dtype)
        exact = [h for h in range(heads) if hp.numerics[h] == "none"]
        if exact:
            idx = torch.tensor(exact, device=dev)
            out[:, idx] = F.scaled_dot_product_attention(q[:, idx].float(), k[:, idx].float(), v[:, idx].float(),
                                                         is_causal=call.causal, scale=scale).to(q.dtype)
        # SpargeAttn reports no per-head counts: they come from the reference's Stage 1 on the same inputs, a
        # PyTorch pass that costs more than the kernels, so only when measuring.
        run = EngineRun(out.to(call.q.device), _predicted_counts(call, hp, pf) if measure else None)
        if measure:
            run.abs_diff, run.abs_ref = _measure(Call(q, k, v, call.causal, None, scale), out, scale)
        return run


class SpargeEngine:
    """This project's kernels through its package sparge_attn (the C API behind a PyTorch op; CUDA, or the CPU
    engine without a GPU), with the same per-head values as the reference engine."""
    name = "sparge"

    def __init__(self, device=None) -> None:
        try:
            import sparge_attn
        except ImportError:
            raise EngineUnavailable(
                "engine 'sparge' runs Sparge Studio's kernels through the Python package sparge_attn, which is not "
                "installed (pip install ./python); use engine='reference' (the same method in PyTorch) or "
                "engine='spargeattn'") from None
        self.api = sparge_attn
        self.device = device
        self._kept: dict = {}

    def configure(self, pf: ParamsFile) -> None:
        pass

    def unsupported(self, call: Call) -> Optional[str]:
        return None

    def _arguments(self, hp: HeadParams, pf: ParamsFile) -> dict:
        """sparge_attn.attention's per-head keyword arguments for `hp`, converted once: plain tuples, which the
        package keys its cache of checked arguments on, so that a repeated call reads no tensor on the host."""
        kept = self._kept.get(id(hp))
        if kept is not None and kept[0] is hp and kept[1] is pf:
            return kept[2]
        values = lambda t: tuple(t.float().tolist())  # float32 values, as the kernels read them  # noqa: E731
        sel = {"topk": values(hp.topk)} if hp.mode == "topk" else {"cdfthreshd": values(hp.tau)}
        args = dict(simthreshd1=values(hp.theta), pvthreshd=values(hp.lam.clamp(max=1e30)),
                    is_sparse=tuple(bool(x) for x in hp.sparse.tolist()), numerics=tuple(hp.numerics),
                    geometry=pf.geometry, smooth_k=pf.smooth_k, attention_sink=pf.sink, diagonal=pf.diagonal,
                    **sel)
        self._kept[id(hp)] = (hp, pf, args)  # hp and pf kept alive, so their ids stay theirs
        return args

    def run(self, call: Call, hp: HeadParams, pf: ParamsFile, measure: bool, counts: bool = True) -> EngineRun:
        """counts=False asks the kernels for no counters, so that they leave out what only the counters need (the
        P·V-skip vote of heads with λ >= 40, Stage 1 of top-k 1 heads): the fastest call, with no counts."""
        r = self.api.attention(call.q, call.k, call.v, is_causal=call.causal, window=call.window, scale=call.scale,
                               return_sparsity=counts, **self._arguments(hp, pf))
        out, stats = r if counts else (r, None)
        # The kernels' own counters (valid, selected, P·V computed per batch item and head), summed over the batch.
        # One [Hq, 5] tensor (its first columns those counts), which SpargeApply adds up in one operation.
        c = None
        if stats is not None:
            c = stats.counts[0] if stats.counts.shape[0] == 1 else stats.counts.sum(0)
        run = EngineRun(out if out.dtype == call.q.dtype else out.to(call.q.dtype), c)
        if measure:
            scale = call.scale if call.scale is not None else 1.0 / math.sqrt(call.q.shape[-1])
            run.abs_diff, run.abs_ref = _measure(call, out, scale)
        return run


ENGINES = {"reference": ReferenceEngine, "spargeattn": SpargeAttnEngine, "sparge": SpargeEngine}


def make_engine(name: str, device=None):
    if name not in ENGINES:
        raise ValueError(f"engine {name!r}: expected one of {', '.join(ENGINES)}")
    return ENGINES[name](device=device)
