"""sparge_attn: Sparge Studio's SpargeAttn kernels as a PyTorch op (CUDA tensors) and the same method on the CPU
engine (CPU tensors), over the C API of libsparge_attn. `sparge_attn.attention` is the full interface;
`sparge_attn.compat` has drop-in replacements for SpargeAttn's own functions. Documentation: docs/capi.md."""

import collections
import math
import threading
from dataclasses import dataclass
from typing import Optional

import torch

from ._capi import SpargeAttnError, version
from . import _op
from ._op import attention_op

__version__ = "1.0.0"
__all__ = ["attention", "AttentionStats", "SpargeAttnError", "version", "cuda_device_count"]

_GEOMETRIES = {"128x64": (128, 64), "64x128": (64, 128)}
_NUMERICS = ("int8-fp8", "int8-fp16", "none")


def cuda_device_count():
    """CUDA devices libsparge_attn can use (0 in a CPU-only build)."""
    from ._capi import library
    return int(library().sparge_attn_cuda_device_count())


@dataclass
class AttentionStats:
    """Per (batch, query head) block counts of one call: counts[b, h] = (valid, selected, P·V computed,
    P·V skipped, rows with no key). Ratios sum the counts over every head first (exact denominators: only blocks
    holding a visible (query, key) pair count). Reading a ratio waits for the GPU. With return_mask, `mask` is
    the block mask [B, Hq, nq, nk] (1 = computed) and `geometry` its tiles (block_q, block_k)."""
    counts: torch.Tensor
    mask: Optional[torch.Tensor] = None
    geometry: tuple = (0, 0)

    def _sum(self, i):
        return int(self.counts[..., i].sum().item())

    @property
    def stage1(self) -> float:
        """Stage 1's sparsity: 1 - selected / valid blocks."""
        valid = self._sum(0)
        return 1.0 - self._sum(1) / valid if valid else 0.0

    @property
    def pv_skip_rate(self) -> float:
        """P·V-skipped blocks / selected blocks."""
        selected = self._sum(1)
        return self._sum(3) / selected if selected else 0.0

    @property
    def total(self) -> float:
        """1 - blocks whose P·V was computed / valid blocks."""
        valid = self._sum(0)
        return 1.0 - self._sum(2) / valid if valid else 0.0

    @property
    def empty_rows(self) -> int:
        return self._sum(4)


def _default_geometry(device):
    """SpargeAttn's tiles on `device`: 64x128 on Hopper (sm_90), 128x64 elsewhere and on the CPU."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device) == (9, 0):
        return 64, 128
    return 128, 64


def _per_head(x, heads, name):
    """x as `heads` floats: a number, a 0-d tensor, a 1-D tensor or sequence of `heads` values. Tensors are read
    on the host (a CUDA tensor waits for the GPU: give numbers under CUDA-graph capture)."""
    if isinstance(x, torch.Tensor):
        if x.dim() == 0:
            values = [float(x.item())] * heads
        elif x.dim() == 1:
            values = [float(y) for y in x.detach().to("cpu", torch.float64).tolist()]
        else:
            raise ValueError(f"{name}: a tensor of per-head values must be 0-d or 1-D; got shape {tuple(x.shape)}")
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        values = [float(x)] * heads
    else:
        try:
            values = [float(y) for y in x]
        except TypeError:
            raise TypeError(f"{name} must be a number, a tensor or a sequence of numbers; got {type(x).__name__}")
    if len(values) != heads:
        raise ValueError(f"{name} has {len(values)} values; give one per query head ({heads}) or a single number")
    for h, y in enumerate(values):
        if math.isnan(y):
            raise ValueError(f"{name} is NaN for head {h}")
    return values


def _per_head_flags(x, heads, name):
    if x is None:
        return [False] * heads
    if isinstance(x, bool):
        return [x] * heads
    values = x.detach().to("cpu").tolist() if isinstance(x, torch.Tensor) else list(x)
    if len(values) != heads:
        raise ValueError(f"{name} has {len(values)} values; give one per query head ({heads})")
    return [bool(y) for y in values]


def _numerics(numerics, heads):
    """(the call's numerics, per-head exact flags) from a name or one name per query head."""
    if isinstance(numerics, str):
        names = [numerics] * heads
    else:
        names = list(numerics)
        if len(names) != heads:
            raise ValueError(f"numerics has {len(names)} entries; give one name or one per query head ({heads})")
    for n in names:
        if n not in _NUMERICS:
            raise ValueError(f"numerics {n!r}: expected one of {', '.join(_NUMERICS)}")
    quantized = sorted({n for n in names if n != "none"})
    if len(quantized) > 1:
        raise ValueError(f"numerics mixes {' and '.join(quantized)}: one quantized numerics per call (heads may "
                         "also be 'none')")
    family = quantized[0] if quantized else "none"
    return family, [n == "none" for n in names]


def _check_tensors(q, k, v, tensor_layout):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{name} must be a 4-D tensor ({tensor_layout}); got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if tensor_layout not in ("HND", "NHD"):
        raise ValueError(f"tensor_layout must be 'HND' or 'NHD'; got {tensor_layout!r}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device; got {q.device}, {k.device}, {v.device}")
    if q.device.type not in ("cpu", "cuda"):
        raise ValueError(f"tensors on {q.device.type} are not supported: use CUDA or CPU tensors")
    dtypes = {q.dtype, k.dtype, v.dtype}
    if len(dtypes) != 1 or q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"q, k and v must share one dtype of float16, bfloat16 or float32; got {q.dtype}, "
                        f"{k.dtype}, {v.dtype}")
    if tensor_layout == "NHD":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    if q.dtype == torch.float32:  # as SpargeAttn: float32 runs as float16
        q, k, v = (t.to(torch.float16) for t in (q, k, v))
    B, Hq, Nq, D = q.shape
    if k.shape != v.shape or k.shape[0] != B or k.shape[3] != D:
        raise ValueError(f"shapes do not fit ({tensor_layout}): q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)} (as [B, H, N, D]); k and v must match, and share B and D with q")
    if Hq % k.shape[1] != 0:
        raise ValueError(f"q has {Hq} heads, k and v {k.shape[1]}: the query heads must be a multiple of the KV "
                         "heads")
    if min(Nq, k.shape[2]) < 1:
        raise ValueError("empty sequence")
    if D not in (64, 128, 256):
        raise ValueError(f"head dim {D} is not supported: 64, 128 or 256 (pad and pass the scale)")
    return q, k, v


_PREPARED_KEPT = 256
_prepared = collections.OrderedDict()  # call signature -> the checked, converted arguments of the op
_prepared_lock = threading.Lock()
_UNCACHED = object()
_PLAIN = (bool, int, float, str)
_PLAIN_SET = frozenset(_PLAIN)


def _value_key(x):
    """A hashable stand-in for one argument of attention(), or _UNCACHED where its value cannot be keyed cheaply.
    A tensor is keyed by identity and version counter (an in-place change makes a new key); the cache entry
    keeps it alive, so its id is not reused while the entry exists."""
    if x is None or type(x) in _PLAIN:
        return (type(x), x)
    if isinstance(x, torch.Tensor):
        return (torch.Tensor, id(x), x._version)
    if type(x) in (list, tuple) and _PLAIN_SET.issuperset(map(type, x)):
        return (tuple, tuple(x))
    return _UNCACHED


def attention(q, k, v, *, simthreshd1, cdfthreshd=None, topk=None, pvthreshd=50, is_causal=False, window=None,
              numerics="int8-fp8", tensor_layout="HND", scale=None, smooth_k=True, attention_sink=False,
              return_sparsity=False, geometry=None, is_sparse=None, diagonal=False, return_mask=False):
    """SpargeAttn's whole call: Stage 1 (θ = simthreshd1 and τ = cdfthreshd, or the top-k fraction topk),
    quantization per `numerics` ("int8-fp8", "int8-fp16", "none", or one of "none" and one quantized name per
    query head) and Stage 2 with the PV skip (λ = pvthreshd). Per-head values are numbers, 0-d/1-D tensors or
    sequences of Hq values. q [B, Hq, Nq, D], k and v [B, Hkv, Nkv, D] (HND; "NHD": [B, N, H, D]), float16 or
    bfloat16 (float32 runs as float16), on CUDA (the kernels) or the CPU (the CPU engine). is_causal is exact
    in every block; window = (left, right) keys around each query (-1 unbounded); geometry "128x64" / "64x128"
    (default: 64x128 on Hopper, else 128x64); is_sparse (per head, False = dense); diagonal keeps the blocks
    holding key == query on. Returns O in q's layout and dtype, or (O, AttentionStats) with return_sparsity or
    return_mask. Repeated calls with the same shapes and arguments reuse the checked, converted arguments (the
    per-head values of a tensor are read once, until it changes in place)."""
    values = (simthreshd1, cdfthreshd, topk, pvthreshd, is_causal, window, numerics, tensor_layout, scale, smooth_k,
              attention_sink, return_sparsity, geometry, is_sparse, diagonal, return_mask)
    compiling = torch.compiler.is_compiling()
    prepared = _prepare(q, k, v, *values) if compiling else _prepared_for(q, k, v, values)
    if tensor_layout == "NHD":
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if q.dtype == torch.float32:  # as SpargeAttn: float32 runs as float16
        q, k, v = q.to(torch.float16), k.to(torch.float16), v.to(torch.float16)
    # The registered op where torch.compile traces; its implementation straight away in eager calls.
    o, counts, mask = attention_op(q, k, v, *prepared) if compiling else _op.run(q, k, v, *prepared)
    if tensor_layout == "NHD":
        o = o.transpose(1, 2)
    if return_sparsity or return_mask:
        block_q, block_k = prepared[-4], prepared[-3]
        return o, AttentionStats(counts, mask if return_mask else None, (block_q, block_k))
    return o


def _prepared_for(q, k, v, values):
    """_prepare's result for this call, from the cache where an earlier call had the same key."""
    key = _call_key(q, k, v, values)
    hit = None if key is None else _prepared.get(key)
    if hit is not None:
        return hit[0]
    prepared = _prepare(q, k, v, *values)
    if key is not None:
        with _prepared_lock:
            _prepared[key] = (prepared, values)  # the values keep keyed tensors alive
            while len(_prepared) > _PREPARED_KEPT:
                _prepared.popitem(last=False)
    return prepared


def _call_key(q, k, v, values):
    """The cache key of one call: the tensors' shapes, dtypes and devices and every other argument's value; None
    when a tensor or an argument cannot be keyed (such calls are checked and converted each time)."""
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)):
        return None
    keys = tuple(_value_key(x) for x in values)
    if _UNCACHED in keys:
        return None
    return (q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype, q.device, k.device, v.device) + keys


def _prepare(q, k, v, simthreshd1, cdfthreshd, topk, pvthreshd, is_causal, window, numerics, tensor_layout, scale,
             smooth_k, attention_sink, return_sparsity, geometry, is_sparse, diagonal, return_mask):
    """Every check of attention()'s arguments, and the op's arguments after q, k and v (per-head values as
    tuples)."""
    q, k, v = _check_tensors(q, k, v, tensor_layout)
    heads = q.shape[1]
    if (cdfthreshd is None) == (topk is None):
        raise ValueError("give exactly one of cdfthreshd (τ, CDF selection) and topk (top-k selection)")
    theta = _per_head(simthreshd1, heads, "simthreshd1")
    select = _per_head(topk if topk is not None else cdfthreshd, heads, "topk" if topk is not None else "cdfthreshd")
    lam = _per_head(pvthreshd, heads, "pvthreshd")
    dense = [not s for s in _per_head_flags(is_sparse, heads, "is_sparse")] if is_sparse is not None else [False] * heads
    family, exact = _numerics(numerics, heads)
    left, right = (-1, -1) if window is None else (int(window[0]), int(window[1]))
    if left < -1 or right < -1:
        raise ValueError(f"window {window}: each side must be >= 0, or -1 for unbounded")
    if geometry is None:
        block_q, block_k = _default_geometry(q.device)
    elif geometry in _GEOMETRIES:
        block_q, block_k = _GEOMETRIES[geometry]
    else:
        raise ValueError(f"geometry {geometry!r}: expected '128x64', '64x128' or None")
    if scale is None:
        scale = 0.0
    elif not (float(scale) > 0 and math.isfinite(float(scale))):
        raise ValueError(f"scale must be a finite number > 0; got {scale}")
    return (tuple(theta), tuple(select), tuple(lam), tuple(dense), tuple(exact), topk is not None, bool(is_causal),
            left, right, family, float(scale), bool(smooth_k), bool(attention_sink), bool(diagonal), block_q, block_k,
            bool(return_sparsity or return_mask), bool(return_mask))
