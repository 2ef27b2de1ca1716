"""The PyTorch op sparge_attn::attention over the C API: tensors in, a plan per problem (cached), the workspace
from the caching allocator, the kernels on the current stream. Registered with torch.library, with a fake
implementation, so that torch.compile traces through it; nothing in it synchronises, so it can be captured
in a CUDA graph once its plan exists (make one call before capturing)."""

import collections
import ctypes
import threading
from typing import List, Tuple

import torch

from . import _capi

_PLANS_KEPT = 64


class _PlanCache:
    """Plans (or what holds them) by key, least recently used dropped beyond `kept`."""

    def __init__(self, kept=_PLANS_KEPT):
        self.kept = kept
        self.lock = threading.Lock()
        self.plans = collections.OrderedDict()

    def get(self, key, make):
        with self.lock:
            plan = self.plans.get(key)
            if plan is not None:
                self.plans.move_to_end(key)
                return plan
        plan = make()
        with self.lock:
            self.plans[key] = plan
            while len(self.plans) > self.kept:
                self.plans.popitem(last=False)
        return plan


_plans = _PlanCache()


def _strides(t):
    s = t.stride()
    return (s[0], s[1], s[2])


def _problem(q, k, v, causal, window_left, window_right, numerics, scale, smooth_k, sink, diagonal, block_q,
             block_k):
    lib = _capi.library()
    p = _capi.Problem()
    _capi.check(lib.sparge_attn_problem_init(ctypes.byref(p)))
    p.batch, p.heads_q, p.tokens_q, p.head_dim = q.shape
    p.heads_kv, p.tokens_kv = k.shape[1], k.shape[2]
    p.dtype = _capi.BFLOAT16 if q.dtype == torch.bfloat16 else _capi.FLOAT16
    p.numerics = _capi.NUMERICS[numerics]
    if q.is_cuda:
        p.backend, p.device = _capi.BACKEND_CUDA, q.device.index if q.device.index is not None else -1
    else:
        p.backend = _capi.BACKEND_CPU
    p.causal = int(causal)
    p.window_left, p.window_right = window_left, window_right
    p.block_q, p.block_k = block_q, block_k
    p.scale = scale
    p.smooth_k, p.attention_sink, p.diagonal = int(smooth_k), int(sink), int(diagonal)
    p.layout = _capi.LAYOUT_STRIDED
    for name, t in (("q", q), ("k", k), ("v", v)):
        setattr(p, name + "_strides", _capi.Strides(*_strides(t)))
    B, Hq, Nq, D = q.shape
    p.o_strides = _capi.Strides(Hq * Nq * D, Nq * D, D)
    return p


def _doubles(values):
    return (ctypes.c_double * len(values))(*values)


def _bytes(values):
    return (ctypes.c_uint8 * len(values))(*(1 if x else 0 for x in values))


def _usable(t):
    """t itself when the C API can read it (D contiguous, 16-byte rows), else a contiguous copy."""
    s = t.stride()
    if s[3] == 1 and s[0] % 8 == 0 and s[1] % 8 == 0 and s[2] % 8 == 0 and t.data_ptr() % 16 == 0:
        return t
    return t.contiguous()


def _extras(q, k, block_q, block_k, want_stats, want_mask):
    """The counters and the block mask, or empty tensors."""
    B, Hq, Nq, _ = q.shape
    nq, nk = -(-Nq // block_q), -(-k.shape[2] // block_k)
    stats = q.new_empty((B, Hq, _capi.STATS) if want_stats else (0,), dtype=torch.int64)
    mask = q.new_empty((B, Hq, nq, nk) if want_mask else (0,), dtype=torch.uint8)
    return stats, mask


def _head_params(theta, select, lam, dense, exact, topk_mode):
    """The C struct of per-head parameters and the arrays it points at (kept together)."""
    hp = _capi.HeadParams()
    hp.struct_size, hp.heads = ctypes.sizeof(hp), len(theta)
    hp.select = _capi.SELECT_TOPK if topk_mode else _capi.SELECT_CDF
    arrays = [_doubles(theta), _doubles(select), _doubles(lam), _bytes(dense), _bytes(exact)]
    hp.simthreshd1, hp.pvthreshd, hp.dense, hp.exact = arrays[0], arrays[2], arrays[3], arrays[4]
    if topk_mode:
        hp.topk = arrays[1]
    else:
        hp.cdfthreshd = arrays[1]
    return hp, arrays


class _Call:
    """What repeated calls of one problem with one set of per-head parameters share: the plan, the parameter
    struct (passed by reference) and the library's entry point."""

    def __init__(self, plan, head_params):
        self.plan = plan
        self.head_params = head_params  # (struct, arrays): the arrays live as long as the struct
        self.hp_ref = ctypes.byref(head_params[0])
        self.run = _capi.library().sparge_attn_run


def _new_plan(q, k, v, problem):
    plan = _capi.Plan(_problem(q, k, v, *problem))
    return plan


def _workspace(plan, device):
    """The workspace of one call, from the caching allocator (a cached block after the first call, like any
    intermediate tensor of an op): the caller holds it until the call is queued, and the allocator's stream
    order keeps its later users behind the kernels. Not kept across calls: torch.compile's CUDA-graph trees run
    their warm-up in the graph's memory pool and reject a tensor of that pool still alive afterwards, and a
    graph captured on a stream must not share its workspace with later eager calls on a stream of the same
    handle."""
    return torch.empty(max(plan.workspace_bytes, 1), dtype=torch.uint8, device=device)


_calls = _PlanCache(256)  # _Call by problem and per-head parameters (their plans shared through _plans)


def _call_for(q, k, v, theta, select, lam, dense, exact, topk_mode, *problem):
    key = (q.device, q.dtype, q.shape, k.shape, q.stride(), k.stride(), v.stride(), theta, select, lam, dense, exact,
           topk_mode) + problem
    call = _calls.plans.get(key)
    if call is not None:
        return call
    plan_key = (q.device, q.dtype, tuple(q.shape), tuple(k.shape), _strides(q), _strides(k), _strides(v)) + problem
    plan = _plans.get(plan_key, lambda: _new_plan(q, k, v, problem))
    return _calls.get(key, lambda: _Call(plan, _head_params(theta, select, lam, dense, exact, topk_mode)))


def _current_stream(device):
    """The raw handle of the current CUDA stream (the direct binding where torch has it: a tenth of the cost)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device.index if device.index is not None else torch.cuda.current_device())
    return torch.cuda.current_stream(device).cuda_stream


def run(q, k, v, theta, select, lam, dense, exact, topk_mode, causal, window_left, window_right, numerics, scale,
        smooth_k, sink, diagonal, block_q, block_k, want_stats, want_mask):
    """The op's implementation (attention_op's arguments and results); sparge_attn.attention calls it directly
    outside torch.compile, which saves the dispatcher's cost on every eager call. Nothing here waits for the
    GPU; a repeated call does no more than allocate O (and the counters) and call the library."""
    q, k, v = _usable(q), _usable(k), _usable(v)
    call = _call_for(q, k, v, tuple(theta), tuple(select), tuple(lam), tuple(dense), tuple(exact), topk_mode,
                     causal, window_left, window_right, numerics, scale, smooth_k, sink, diagonal, block_q, block_k)
    B, Hq, Nq, D = q.shape
    o = torch.empty((B, Hq, Nq, D), dtype=q.dtype, device=q.device)
    stats, mask = _extras(q, k, block_q, block_k, want_stats, want_mask)
    out = None
    if want_stats or want_mask:
        out = _capi.Outputs()
        out.struct_size = ctypes.sizeof(out)
        out.head_stats = stats.data_ptr() if want_stats else None
        out.block_mask = mask.data_ptr() if want_mask else None
        out = ctypes.byref(out)
    workspace, stream = None, None  # the tensor lives until the call is queued
    if q.is_cuda:
        stream = _current_stream(q.device)
        workspace = _workspace(call.plan, q.device)
    _capi.check(call.run(call.plan.handle, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), call.hp_ref, out,
                         workspace.data_ptr() if workspace is not None else None, call.plan.workspace_bytes,
                         stream))
    return o, stats, mask


@torch.library.custom_op("sparge_attn::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, theta: List[float], select: List[float],
                 lam: List[float], dense: List[bool], exact: List[bool], topk_mode: bool, causal: bool,
                 window_left: int, window_right: int, numerics: str, scale: float, smooth_k: bool, sink: bool,
                 diagonal: bool, block_q: int, block_k: int, want_stats: bool,
                 want_mask: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """O [B, Hq, Nq, D] (contiguous, q's dtype); with want_stats the per-head counters [B, Hq, 5] (valid,
    selected, P·V computed, P·V skipped blocks, empty rows), with want_mask the block mask [B, Hq, nq, nk]
    (uint8); each an empty tensor when not wanted. block_q, block_k: the geometry, never 0 here."""
    return run(q, k, v, theta, select, lam, dense, exact, topk_mode, causal, window_left, window_right, numerics,
               scale, smooth_k, sink, diagonal, block_q, block_k, want_stats, want_mask)


@attention_op.register_fake
def _attention_fake(q, k, v, theta, select, lam, dense, exact, topk_mode, causal, window_left, window_right, numerics,
                    scale, smooth_k, sink, diagonal, block_q, block_k, want_stats, want_mask):
    stats, mask = _extras(q, k, block_q, block_k, want_stats, want_mask)
    return q.new_empty(q.shape), stats, mask
