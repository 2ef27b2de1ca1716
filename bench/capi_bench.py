#!/usr/bin/env python3
"""The sparge_attn op as a user calls it from PyTorch, timed against SpargeAttn's whole call
(spas_sage2_attn_meansim_topk_cuda), our exact dense walk, torch SDPA and FlashAttention-3 (when importable),
over N x D x causal x top-k; then a CUDA-graph replay and a torch.compile'd call of the op, each checked
against the eager call. Random N(0, 1) fp16 data, B 1, H 32, simthreshd1 -0.1, pvthreshd 50 (as
bench/compare_spargeattn.py). Times: median of --repeat CUDA-event measurements after --warmup-ms of untimed
running; per top-k the op and SpargeAttn's call take --rounds such measurements each, in turns whose order
flips every round, and the median over the rounds is the cell's figure (each round's is in the JSON). While
each is timed, nvidia-smi samples the SM clock and power every 20 ms (machine_info.ClockSampler): under a
sustained load a board may sit at its power limit, and the clock each call ran at is recorded beside its time.

usage: python3 bench/capi_bench.py [--spargeattn DIR] [--json OUT] [--quick] [--repeat 10] [--warmup-ms 200]
                                   [--rounds 3]
Needs the sparge_attn package importable and libsparge_attn.so (SPARGE_ATTN_LIBRARY or the package's lib/).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import machine_info  # noqa: E402
from compare_spargeattn import alternating_rounds, timed  # noqa: E402  (the engine comparison's timing)


def load_fa3():
    """FlashAttention-3's forward on NHD tensors, or None: the flash_attn_interface module, or
    fa3_fwd_interface (the PyPI wheel fa3_fwd)."""
    for name in ("flash_attn_interface", "fa3_fwd_interface", "fa3_fwd"):
        try:
            mod = __import__(name)
        except Exception:
            continue
        fn = getattr(mod, "flash_attn_func", None) or getattr(mod, "fwd", None)
        if callable(fn):
            def call(q, k, v, causal, descale=None, fn=fn):
                extra = {} if descale is None else dict(zip(("q_descale", "k_descale", "v_descale"), descale))
                out = fn(q, k, v, causal=causal, **extra)
                return out[0] if isinstance(out, tuple) else out
            return name, call
    return None, None


def cell(torch, api, fa3, N, D, causal, topks, args):
    import sparge_attn
    B, H = 1, 32
    g = torch.Generator(device="cuda").manual_seed(N + D + causal)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
    flops = 4.0 * B * H * N * N * D / (2 if causal else 1)
    r = {"tokens": N, "head_dim": D, "causal": causal, "ours": {}, "spargeattn": {}}
    run = lambda fn: timed(torch, fn, args.repeat, args.warmup_ms)[0]  # noqa: E731
    r["dense_exact_ms"] = run(lambda: sparge_attn.attention(q, k, v, simthreshd1=-0.1, topk=1.0, numerics="none",
                                                            is_sparse=False, is_causal=causal))
    r["dense_int8fp8_ms"] = run(lambda: sparge_attn.attention(q, k, v, simthreshd1=-0.1, topk=1.0, is_sparse=False,
                                                              is_causal=causal))
    r["sdpa_ms"] = run(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
    if fa3:
        # bfloat16 copies: the fa3_fwd wheel is built for bf16 and FP8 only; on Hopper bf16 and fp16 tensor-core
        # attention run at the same rate, so its time is the dense baseline for these fp16 shapes.
        qn, kn, vn = (t.transpose(1, 2).to(torch.bfloat16).contiguous() for t in (q, k, v))
        try:
            r["fa3_ms"] = run(lambda: fa3(qn, kn, vn, causal))
            r["fa3_dtype"] = "bfloat16"
        except RuntimeError as e:
            r["fa3_error"] = str(e).splitlines()[0][:160]
        # Its FP8 forward (e4m3 Q, K, V, unit descales: N(0, 1) data lies well inside e4m3's range), timed on
        # tensors already in e4m3: the kernel alone, without the quantization a caller would add, so the
        # fastest dense figure at numerics comparable to int8-fp8.
        q8, k8, v8 = (t.to(torch.float8_e4m3fn) for t in (qn, kn, vn))
        ones = torch.ones(B, H, device="cuda", dtype=torch.float32)
        try:
            r["fa3_fp8_ms"] = run(lambda: fa3(q8, k8, v8, causal, descale=(ones, ones, ones)))
        except (RuntimeError, TypeError) as e:
            r["fa3_fp8_error"] = str(e).splitlines()[0][:160]
        del qn, kn, vn, q8, k8, v8
    for t in topks:
        fn = lambda: sparge_attn.attention(q, k, v, simthreshd1=-0.1, topk=t, pvthreshd=50, is_causal=causal)  # noqa
        _, stats = sparge_attn.attention(q, k, v, simthreshd1=-0.1, topk=t, pvthreshd=50, is_causal=causal,
                                         return_sparsity=True)
        calls = {"ours": fn}
        spans = {"ours": [], "spargeattn": []}
        if api is not None:
            call = lambda: api(q, k, v, is_causal=causal, topk=t, simthreshd1=-0.1, pvthreshd=50)  # noqa
            try:
                call()
                calls["spargeattn"] = call
            except Exception as e:  # a shape upstream rejects
                r["spargeattn"][t] = {"error": str(e).splitlines()[0][:160]}

        def run_watched(name):
            start = time.perf_counter()
            ms = run(calls[name])
            spans[name].append((start, time.perf_counter()))
            return ms

        rounds = alternating_rounds({name: name for name in calls}, run_watched, args.rounds)
        r["ours"][t] = {**rounds["ours"], "stage1_sparsity": stats.stage1, "pv_skip_rate": stats.pv_skip_rate,
                        "gpu": args.sampler.during(spans["ours"])}
        if "spargeattn" in rounds:
            r["spargeattn"][t] = {**rounds["spargeattn"], "gpu": args.sampler.during(spans["spargeattn"])}
    for t, x in r["ours"].items():
        x["tops"] = flops / (x["ms"] * 1e-3) / 1e12
        theirs = r["spargeattn"].get(t, {}).get("ms")
        x["speedup_vs_spargeattn"] = theirs / x["ms"] if theirs else None
        x["of_dense_exact"] = x["ms"] / r["dense_exact_ms"]
        x["speedup_vs_best_dense"] = best_dense_ms(r) / x["ms"]
    del q, k, v
    torch.cuda.empty_cache()
    return r


DENSE_KEYS = ("dense_exact_ms", "dense_int8fp8_ms", "sdpa_ms", "fa3_ms", "fa3_fp8_ms")


def best_dense_ms(r):
    """The fastest dense call measured in the cell, whatever its numerics."""
    return min(r[k] for k in DENSE_KEYS if r.get(k))


def graph_and_compile(torch):
    """A CUDA-graph replay and a torch.compile'd call of the op against the eager call (bit for bit), with the
    replay's time next to the eager call's."""
    import sparge_attn
    q, k, v = (torch.randn(1, 32, 8192, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    kw = dict(simthreshd1=-0.1, topk=0.2, is_causal=True)
    eager = sparge_attn.attention(q, k, v, **kw)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graph's documentation asks
        sparge_attn.attention(q, k, v, **kw)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = sparge_attn.attention(q, k, v, **kw)
    graph.replay()
    torch.cuda.synchronize()
    out = {"graph_equal": bool(torch.equal(static_out, eager))}
    out["graph_replay_ms"] = timed(torch, graph.replay, 10, 200)[0]
    out["eager_ms"] = timed(torch, lambda: sparge_attn.attention(q, k, v, **kw), 10, 200)[0]
    f = torch.compile(lambda q, k, v: sparge_attn.attention(q, k, v, **kw) * 1.0, fullgraph=True)
    out["compile_equal"] = bool(torch.equal(f(q, k, v), eager))
    g = torch.compile(lambda q, k, v: sparge_attn.attention(q, k, v, **kw) * 1.0, mode="reduce-overhead",
                      fullgraph=True)
    for _ in range(3):
        got = g(q, k, v)
    out["compile_cudagraphs_equal"] = bool(torch.equal(got, eager))
    return out


def kernel_profile(torch, N=32768, D=128, topk=0.1):
    """CUDA time per kernel of one op call (torch.profiler), largest first: where the whole call goes."""
    import sparge_attn
    q, k, v = (torch.randn(1, 32, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    fn = lambda: sparge_attn.attention(q, k, v, simthreshd1=-0.1, topk=topk, pvthreshd=50)  # noqa: E731
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t > 0:
            rows[e.key] = t / 5 / 1000.0  # ms per call
    return dict(sorted(rows.items(), key=lambda kv: -kv[1]))


def summary(cells, fa3_name):
    ratios = [x["speedup_vs_spargeattn"] for c in cells for x in c["ours"].values() if x["speedup_vs_spargeattn"]]
    s = {"cells": len(ratios), "min_speedup": min(ratios) if ratios else None,
         "median_speedup": statistics.median(ratios) if ratios else None,
         "cells_at_1_3_or_more": sum(r >= 1.3 for r in ratios), "fa3": fa3_name}
    gpus = [x["gpu"] for c in cells for side in ("ours", "spargeattn")
            for x in c[side].values() if x.get("gpu", {}).get("power_limited_share") is not None]
    # Timings (the op's or SpargeAttn's, one a cell and top-k) with clock samples, and those at which the board
    # held the clock down for power in most samples.
    s["timings_with_clock_samples"] = len(gpus)
    s["timings_power_limited"] = sum(machine_info.mostly_power_limited(g) for g in gpus) if gpus else None
    for c in cells:
        if c["tokens"] == 32768 and c["head_dim"] == 128 and not c["causal"] and 0.1 in c["ours"]:
            s["32k_d128_topk0.1_of_dense_exact"] = c["ours"][0.1]["of_dense_exact"]
            s["32k_d128_topk0.1_of_dense_int8fp8"] = c["ours"][0.1]["ms"] / c["dense_int8fp8_ms"]
            s["32k_d128_topk0.1_speedup_vs_best_dense"] = c["ours"][0.1]["speedup_vs_best_dense"]
            s["32k_d128_best_dense"] = min(DENSE_KEYS, key=lambda k: c.get(k) or float("inf"))
    return s


def clock_mhz(timing):
    """The median SM clock a call was timed at, in MHz, or "-" where nothing was sampled."""
    mhz = timing.get("gpu", {}).get("sm_clock_mhz")
    return "-" if mhz is None else f"{mhz:.0f}"


def clocks(ours, theirs):
    """The median SM clocks the two calls were timed at: "ours/theirs" in MHz."""
    return f"{clock_mhz(ours)}/{clock_mhz(theirs)}"


def print_table(cells):
    print("N      D    mask    top-k  ours ms  SpargeAttn ms  speedup  of dense  dense fp16 ms  FA3 ms  "
          "FA3 fp8 ms  SDPA ms  MHz ours/SA")
    for c in cells:
        for t, x in c["ours"].items():
            sa = c["spargeattn"].get(t, {}).get("ms")
            print(f"{c['tokens']:<6} {c['head_dim']:<4} {'causal' if c['causal'] else 'full':<7} {t:<6g} "
                  f"{x['ms']:8.3f}  {sa if sa is None else round(sa, 3)!s:>13}  "
                  f"{x['speedup_vs_spargeattn'] and round(x['speedup_vs_spargeattn'], 2)!s:>7}  "
                  f"{x['of_dense_exact']:8.3f}  {c['dense_exact_ms']:13.3f}  "
                  f"{c.get('fa3_ms', float('nan')):6.3f}  {c.get('fa3_fp8_ms', float('nan')):10.3f}  "
                  f"{c['sdpa_ms']:7.3f}  {clocks(x, c['spargeattn'].get(t, {}))}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spargeattn", help="SpargeAttn's source folder with its extension built in place")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--quick", action="store_true", help="8K, D 128, non-causal, top-k 1.0 and 0.2 only")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--warmup-ms", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of the op against SpargeAttn per cell, in alternating order (median over them)")
    ap.add_argument("--profile", action="store_true", help="also the CUDA time per kernel at 32K, D 128, top-k 0.1")
    args = ap.parse_args()
    api = None
    if args.spargeattn:
        sys.path.insert(0, args.spargeattn)
        try:
            from spas_sage_attn import spas_sage2_attn_meansim_topk_cuda as api
        except Exception as e:
            print(f"SpargeAttn not importable: {e}")
    fa3_name, fa3 = load_fa3()
    args.sampler = machine_info.ClockSampler()
    import sparge_attn
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, sparge_attn {sparge_attn.version()}, "
          f"FlashAttention-3: {fa3_name or 'not importable'}, repeat {args.repeat} after {args.warmup_ms}+ ms")
    grid = [(8192, 128, False)] if args.quick else [(n, d, c) for c in (False, True) for d in (128, 64)
                                                      for n in (8192, 16384, 32768)]
    topks = [1.0, 0.2] if args.quick else [1.0, 0.5, 0.2, 0.1]
    t0 = time.time()
    cells = [cell(torch, api, fa3, n, d, c, topks, args) for n, d, c in grid]
    args.sampler.close()
    print_table(cells)
    extra = graph_and_compile(torch)
    if args.profile:
        extra["kernels_32k_d128_topk0.1_ms"] = kernel_profile(torch)
        for name, ms in extra["kernels_32k_d128_topk0.1_ms"].items():
            print(f"{ms:8.3f} ms  {name[:110]}")
    doc = {**machine_info.stamp("sparge-capi-bench/1"), "device": torch.cuda.get_device_name(), "torch": torch.__version__, "sparge_attn": sparge_attn.version(),
           "repeat": args.repeat, "warmup_ms": args.warmup_ms, "rounds": args.rounds, "seconds": time.time() - t0,
           "summary": summary(cells, fa3_name), "graph_and_compile": extra, "cells": cells}
    print(json.dumps({"summary": doc["summary"], "graph_and_compile": extra}, indent=1))
    if args.json:
        machine_info.write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
