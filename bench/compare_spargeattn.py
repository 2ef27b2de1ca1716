#!/usr/bin/env python3
"""Side by side on one GPU, dense-equivalent TOPS of the whole call (prediction + quantization + attention):
ours in exact fp16 and in int8-fp8 (from `sparge bench --json` files), SpargeAttn's top-k API built from source
(spas_sage2_attn_meansim_topk_cuda), torch SDPA (its default backend) and cuDNN's fused attention (from our
bench files). Random N(0, 1) data, the shapes and top-k values of the bench files.

usage: python3 bench/compare_spargeattn.py OURS.json [OURS2.json ...] [--spargeattn DIR] [--repeat 10]
                                            [--pause-ms 0] [--warmup-ms 200] [--json OUT]
--pause-ms: idle time before each timed measurement (as `sparge bench --pause-ms`), so that none inherits the
state a heavy one before it leaves.
--warmup-ms: untimed running before each timed measurement, at least (as `sparge bench --warmup-ms`), so that
every measurement starts in the state sustained load leaves the GPU in.
"""
import argparse
import json
import os
import statistics
import sys
import time

import machine_info


def warm_up(torch, fn, runs, ms):
    """Untimed runs of fn: at least `runs` and at least `ms` milliseconds of them."""
    enough = time.perf_counter() + ms / 1000.0
    w = 0
    while w < runs or time.perf_counter() < enough:
        fn()
        w += 1
        if w >= runs:
            torch.cuda.synchronize()  # the clock then counts GPU time
    torch.cuda.synchronize()


def timed(torch, fn, repeat, warmup_ms, warmup=2):
    """(median, min, max) milliseconds of fn with CUDA events, after its warm-up (warm_up)."""
    warm_up(torch, fn, warmup, warmup_ms)
    times = []
    for _ in range(repeat):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), min(times), max(times)


def alternating_rounds(calls, run, rounds):
    """Each call timed once a round, the order reversed every other round, so that whatever state the GPU is
    left in by the measurement before falls on both sides alike: per call the median over the rounds ("ms")
    and every round's figure."""
    times = {name: [] for name in calls}
    names = list(calls)
    for i in range(rounds):
        for name in names if i % 2 == 0 else names[::-1]:
            times[name].append(run(calls[name]))
    return {name: {"ms": statistics.median(ts), "ms_rounds": ts} for name, ts in times.items()}


def load_ours(paths):
    """{(N, D, causal): {"cudnn": TOPS, "dense": {numerics: TOPS}, "topk": {topk: {numerics: (TOPS, density)}}}}"""
    cells, meta = {}, {}
    for path in paths:
        j = json.load(open(path))
        meta = j
        n = j.get("numerics", "none")
        for r in j["results"]:
            c = cells.setdefault((r["tokens"], r["head_dim"], r["causal"]), {"cudnn": None, "dense": {}, "topk": {}})
            if r.get("cudnn"):
                c["cudnn"] = r["cudnn"]["tops"]
            c["dense"][n] = r["dense"]["tops"]
            for s in r["sparse"]:
                c["topk"].setdefault(s["topk"], {})[n] = (s["dense_equivalent_tops"], s["density"])
    return cells, meta


def spargeattn_call(torch, api, q, k, v, causal, topk, repeat, warmup_ms):
    fn = lambda: api(q, k, v, is_causal=causal, topk=topk, simthreshd1=-0.1, pvthreshd=50)
    _, sparsity = api(q, k, v, is_causal=causal, topk=topk, simthreshd1=-0.1, pvthreshd=50, return_sparsity=True)
    return timed(torch, fn, repeat, warmup_ms), sparsity


def measure_theirs(torch, F, api, cells, B, H, repeat, warmup_ms, pause_s=0.0):
    theirs = {}
    for (N, D, causal), c in sorted(cells.items()):
        flops = 4.0 * B * H * N * N * D / (2 if causal else 1)
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
        t = {"sdpa": None, "spargeattn": {}}
        time.sleep(pause_s)
        med, _, _ = timed(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), repeat,
                          warmup_ms)
        t["sdpa"] = flops / (med * 1e-3) / 1e12
        for topk in sorted(c["topk"], reverse=True):
            if api is None:
                continue
            try:
                time.sleep(pause_s)
                (med, lo, hi), sparsity = spargeattn_call(torch, api, q, k, v, causal, topk, repeat, warmup_ms)
                t["spargeattn"][topk] = {"tops": flops / (med * 1e-3) / 1e12, "median_ms": med, "min_ms": lo,
                                         "max_ms": hi, "qk_sparsity": sparsity}
            except Exception as e:  # a shape upstream rejects: shown as "-"
                t["spargeattn"][topk] = {"error": str(e).splitlines()[0][:160]}
        theirs[(N, D, causal)] = t
        print(f"measured N {N} D {D} {'causal' if causal else 'full'}: torch SDPA {t['sdpa']:.0f} TOPS, SpargeAttn "
              + ", ".join(f"{k:g}: {v.get('tops', float('nan')):.0f}" for k, v in t["spargeattn"].items()), flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    return theirs


def fmt(x):
    return "-" if x is None else f"{x:.0f}"


def print_tables(cells, theirs):
    header = ["N", "mask", "top-k", "ours fp16", "ours int8-fp8", "SpargeAttn", "int8-fp8/Sparge", "torch SDPA",
              "cuDNN", "our dense fp16", "density ours"]
    for D in sorted({k[1] for k in cells}, reverse=True):
        rows = []
        for (N, d, causal), c in sorted(cells.items(), key=lambda kv: (kv[0][2], kv[0][0])):
            if d != D:
                continue
            t = theirs.get((N, d, causal), {})
            for topk in sorted(c["topk"], reverse=True):
                ours = c["topk"][topk]
                fp16 = ours.get("none", (None, None))[0]
                fp8 = ours.get("int8-fp8", (None, None))[0]
                sp = t.get("spargeattn", {}).get(topk, {}).get("tops")
                ratio = f"{fp8 / sp:.2f}" if fp8 and sp else "-"
                density = next((v[1] for v in ours.values()), None)
                rows.append([f"{N // 1024}K", "causal" if causal else "full", f"{topk:g}", fmt(fp16), fmt(fp8),
                             fmt(sp), ratio, fmt(t.get("sdpa")), fmt(c["cudnn"]), fmt(c["dense"].get("none")),
                             "-" if density is None else f"{density:.3f}"])
        print(f"\nD {D}: dense-equivalent TOPS (4*B*H*N^2*D / t, halved when causal; t = whole call)")
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for r in rows:
            print("  ".join(str(x).rjust(w) for x, w in zip(r, widths)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours", nargs="+", help="JSON files written by `sparge bench --json`")
    ap.add_argument("--spargeattn", help="SpargeAttn source folder with its extension built in place")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--pause-ms", type=int, default=0, help="idle time before each timed measurement")
    ap.add_argument("--warmup-ms", type=int, default=200,
                    help="untimed running before each timed measurement, at least (milliseconds)")
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args()
    if args.pause_ms < 0:
        ap.error("--pause-ms must be 0 or more")
    if args.warmup_ms < 0:
        ap.error("--warmup-ms must be 0 or more")
    import torch
    import torch.nn.functional as F

    cells, meta = load_ours(args.ours)
    B, H = meta["batch"], meta["heads"]
    api, why = None, "no --spargeattn folder given"
    if args.spargeattn:
        sys.path.insert(0, args.spargeattn)
        try:
            from spas_sage_attn import spas_sage2_attn_meansim_topk_cuda as api
        except Exception as e:
            why = f"SpargeAttn not importable: {e}"
    print(f"device: {torch.cuda.get_device_name()} (ours: {meta['device']}), torch {torch.__version__}, "
          f"B={B} H={H}, fp16, repeat {args.repeat} after "
          f"{args.warmup_ms}+ ms of warm-up, pause {args.pause_ms} ms")
    if api is None:
        print(f"SpargeAttn column empty: {why}")
    theirs = measure_theirs(torch, F, api, cells, B, H, args.repeat, args.warmup_ms,
                            args.pause_ms / 1000.0)
    print_tables(cells, theirs)
    for key, t in sorted(theirs.items()):
        for topk, s in t["spargeattn"].items():
            if "error" in s:
                print(f"SpargeAttn failed at N {key[0]} D {key[1]} causal {key[2]} top-k {topk}: {s['error']}")
    if args.json:
        out = [{"tokens": k[0], "head_dim": k[1], "causal": k[2], "ours": cells[k], "theirs": theirs[k]}
               for k in sorted(cells)]
        doc = machine_info.stamp("sparge-compare-spargeattn/1")
        doc.update({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "repeat": args.repeat,
                    "warmup_ms": args.warmup_ms, "pause_ms": args.pause_ms, "results": out})
        tmp = args.json + ".tmp"  # a finished file or none: written beside, then renamed over
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=2, default=str)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
