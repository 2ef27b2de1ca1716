#!/usr/bin/env python3
"""Host time of one call through the Python package: how long `sparge_attn.attention`, the registered op
(torch.ops.sparge_attn.attention) and SpargeApply's "sparge" engine take to issue a call that repeats the
shapes and per-head parameters of the call before it (a model's layer, token after token).

On CUDA tensors (--device cuda) the library really runs: the figure is the issue time (calls back to back,
no synchronisation; the GPU's own time is printed beside it). On the CPU (--device cpu, the default without a
GPU) the library's run entry point is replaced by a C function that returns at once (--stub, the default
there), so the figure is the wrapper's own cost: checks, caches, allocations and the ctypes call.

    python3 bench/host_path_bench.py [--device cpu|cuda] [--calls 2000] [--no-stub] [--root CHECKOUT]

Needs torch and sparge_attn importable (PYTHONPATH=python) and libsparge_attn (SPARGE_ATTN_LIBRARY).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# --root DIR: bench the packages of another checkout (DIR/python, DIR/captures), e.g. an earlier version.
ROOT = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "captures"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import sparge_attn  # noqa: E402
from sparge_attn import _capi  # noqa: E402


class _StubbedLibrary:
    """libsparge_attn with sparge_attn_run replaced by a C function of no work that returns 0 (success)."""

    def __init__(self, lib):
        self._lib = lib
        run = lib.sparge_attn_run
        proto = ctypes.PYFUNCTYPE(run.restype, *run.argtypes)  # PyErr_Occurred needs the GIL held
        self.sparge_attn_run = proto(ctypes.cast(ctypes.pythonapi.PyErr_Occurred, ctypes.c_void_p).value)

    def __getattr__(self, name):
        return getattr(self._lib, name)


def per_call_ms(fn, calls, cuda):
    """(host ms per call issuing `calls` calls back to back, GPU ms per call or None)."""
    for _ in range(20):
        fn()
    if cuda:
        torch.cuda.synchronize()
    host = float("inf")
    for _ in range(5):  # the best of five rounds: a shared host's other work only ever adds
        t0 = time.perf_counter()
        for _ in range(calls // 5):
            fn()
        host = min(host, (time.perf_counter() - t0) / (calls // 5) * 1e3)
    gpu = None
    if cuda:
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(calls):
            fn()
        e1.record()
        torch.cuda.synchronize()
        gpu = e0.elapsed_time(e1) / calls
    return host, gpu


def engine_call(q, k, v, theta, tau, lam, numerics, geometry):
    """SpargeApply's sparge engine with per-head parameters as a parameter file gives them."""
    from sparge_capture.engines import Call, SpargeEngine
    from sparge_capture.params import HeadParams, ParamsFile
    heads = q.shape[1]
    column = lambda x: torch.full((heads,), x, dtype=torch.float64)  # noqa: E731
    hp = HeadParams("cdf", column(theta), column(tau), column(1.0), column(lam), torch.ones(heads, dtype=torch.bool),
                    [numerics] * heads, [])
    pf = ParamsFile("bench", True, "", "cdf", 0.05, 0.06, geometry, numerics, True, True, False, "", [])
    engine = SpargeEngine()
    call = Call(q, k, v, True, None, None)
    return lambda: engine.run(call, hp, pf, False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--tokens", type=int, default=None, help="default: 8192 on CUDA, 256 on the CPU")
    ap.add_argument("--no-stub", action="store_true", help="on the CPU: run the CPU engine for real")
    ap.add_argument("--root", help="the checkout whose python/ and captures/ to bench (default: this one)")
    a = ap.parse_args()
    cuda = a.device == "cuda"
    tokens = a.tokens or (8192 if cuda else 256)
    if not cuda and not a.no_stub:
        _capi._lib = _StubbedLibrary(_capi.library())
    numerics, geometry = ("int8-fp8", "64x128") if cuda else ("int8-fp16", "128x64")
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 9, tokens, 64, generator=g).half().to(a.device)  # SmolLM2-135M's layer: 9 / 3 heads, D 64
    k = torch.randn(1, 3, tokens, 64, generator=g).half().to(a.device)
    v = torch.randn(1, 3, tokens, 64, generator=g).half().to(a.device)
    theta, tau, lam = [-1.0] * 9, [0.9] * 9, [20.0] * 9
    kw = dict(simthreshd1=theta, cdfthreshd=tau, pvthreshd=lam, is_causal=True, attention_sink=True,
              numerics=numerics, geometry=geometry)
    bq, bk = map(int, geometry.split("x"))
    op_args = (q, k, v, theta, tau, lam, [False] * 9, [False] * 9, False, True, -1, -1, numerics, 0.0, True, True,
               False, bq, bk, True, False)
    runs = [("attention, with the counters", lambda: sparge_attn.attention(q, k, v, return_sparsity=True, **kw)),
            ("attention, without them", lambda: sparge_attn.attention(q, k, v, **kw)),
            ("attention, per-head tensors", lambda: sparge_attn.attention(
                q, k, v, simthreshd1=th_t, cdfthreshd=tau_t, pvthreshd=lam_t, is_causal=True, attention_sink=True,
                numerics=numerics, geometry=geometry, return_sparsity=True)),
            ("torch.ops.sparge_attn.attention", lambda: torch.ops.sparge_attn.attention(*op_args)),
            ("SpargeApply's sparge engine", engine_call(q, k, v, -1.0, 0.9, 20.0, numerics, geometry))]
    th_t, tau_t, lam_t = torch.tensor(theta), torch.tensor(tau), torch.tensor(lam)
    where = f"{torch.cuda.get_device_name()} (library running)" if cuda else \
        ("CPU, library call stubbed" if not a.no_stub else "CPU engine running")
    print(f"host path per call: B 1, 9 / 3 heads, {tokens} tokens, D 64, causal, {numerics} {geometry}; {where}; "
          f"torch {torch.__version__}; best of 5 rounds of {a.calls // 5} calls; package {sparge_attn.__file__}")
    for name, fn in runs:
        host, gpu = per_call_ms(fn, a.calls, cuda)
        print(f"  {name:34s} host {host:.4f} ms/call" + (f"   GPU {gpu:.4f} ms/call" if gpu is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
