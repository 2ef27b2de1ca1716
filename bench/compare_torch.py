#!/usr/bin/env python3
"""Times torch SDPA (flash, cuDNN, efficient backends, where available) on the shapes of a
`sparge bench --json` file, on the same GPU, and prints our time / their time per configuration.

usage: python3 bench/compare_torch.py OURS.json [--repeat 10] [--json OUT]
"""
import argparse
import json
import sys

import machine_info
from compare_spargeattn import timed


def time_backend(torch, fn, repeat, warmup=2):
    """(median, min, max) milliseconds with CUDA events (shared with compare_spargeattn.py)."""
    return timed(torch, fn, repeat, warmup)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours", help="JSON written by `sparge bench --json`")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json", help="write the comparison here")
    args = ap.parse_args()

    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"compare_torch: PyTorch with torch.nn.attention is needed ({e})", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("compare_torch: no CUDA device", file=sys.stderr)
        return 1

    ours = json.load(open(args.ours))
    dtype = torch.bfloat16 if ours.get("dtype", "float16") in ("bfloat16", "bf16") else torch.float16
    H, B = ours["heads"], ours["batch"]
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", getattr(SDPBackend, "CUDNN_ATTENTION", None)),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    dev = torch.cuda.get_device_name()
    print(f"device: {dev} (ours: {ours['device']}), torch {torch.__version__}, {dtype}, B={B} H={H}")
    rows, out = [], []
    for r in ours["results"]:
        N, D, causal = r["tokens"], r["head_dim"], r["causal"]
        flops = r["dense_flops"]
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(B, H, N, D, device="cuda", dtype=dtype, generator=g)
        k = torch.randn(B, H, N, D, device="cuda", dtype=dtype, generator=g)
        v = torch.randn(B, H, N, D, device="cuda", dtype=dtype, generator=g)
        theirs = {}
        for name, be in backends:
            if be is None:
                continue
            try:
                with sdpa_kernel([be]):
                    med, lo, hi = time_backend(
                        torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), args.repeat)
                theirs[name] = {"median_ms": med, "min_ms": lo, "max_ms": hi, "tops": flops / (med * 1e-3) / 1e12}
            except RuntimeError as e:
                theirs[name] = {"error": str(e).splitlines()[0][:120]}
        del q, k, v
        torch.cuda.empty_cache()
        ok = {k_: v_ for k_, v_ in theirs.items() if "median_ms" in v_}
        best = min(ok.items(), key=lambda kv: kv[1]["median_ms"]) if ok else (None, None)
        dense_ms = r["dense"]["median_ms"]
        entry = {"tokens": N, "head_dim": D, "causal": causal, "torch": theirs, "ours_dense_ms": dense_ms,
                 "best_backend": best[0]}
        if best[1]:
            entry["dense_over_best"] = dense_ms / best[1]["median_ms"]
            entry["dense_fraction_of_best_speed"] = best[1]["median_ms"] / dense_ms
            entry["sparse_over_best"] = {str(s["topk"]): s["stage2"]["median_ms"] / best[1]["median_ms"]
                                         for s in r["sparse"]}
        out.append(entry)
        cells = [str(N), str(D), "yes" if causal else "no", f"{dense_ms:.3f}"]
        for name, _ in backends:
            t = theirs.get(name, {})
            cells.append(f"{t['median_ms']:.3f}" if "median_ms" in t else "-")
        if best[1]:
            cells += [best[0], f"{dense_ms / best[1]['median_ms']:.2f}",
                      f"{flops / (dense_ms * 1e-3) / 1e12:.0f}", f"{best[1]['tops']:.0f}"]
            for s in r["sparse"]:
                cells.append(f"{s['stage2']['median_ms'] / best[1]['median_ms']:.2f}")
        rows.append(cells)
    topks = [str(s["topk"]) for s in ours["results"][0]["sparse"]] if ours["results"] else []
    header = ["N", "D", "causal", "ours dense ms", "flash ms", "cudnn ms", "effic ms", "best", "dense/best",
              "our TOPS", "best TOPS"] + [f"s2@{t}/best" for t in topks]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *[r + [""] * (len(header) - len(r)) for r in rows])]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    print("(ratios are time ratios: ours / theirs; < 1 means we are faster)")
    if args.json:
        doc = machine_info.stamp("sparge-compare-torch/1")
        doc.update({"device": dev, "torch": torch.__version__, "results": out})
        json.dump(doc, open(args.json, "w"), indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
