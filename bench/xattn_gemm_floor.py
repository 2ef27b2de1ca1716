#!/usr/bin/env python3
"""XAttention's strided products at the vendor BLAS's rate: a floor under its Stage 1 on this GPU.

At stride S XAttention scores a head with one GEMM, [N/S, S·D] by [S·D, N/S] (docs/methods.md), 2·N²·D/S
flops: 1/(2S) of the dense walk's 4·N²·D. This script times that GEMM for 32 heads with torch.bmm (cuBLAS,
fp16 inputs and fp32 accumulation; fp16 and fp32 outputs) and, given the JSON of `sparge bench --method
xattention --xattn-stride S` runs of the same GPU, sets it beside each run's dense walk and Stage 1: the
floor share is what the scores alone would cost at cuBLAS's rate (a causal entry computes the strided tiles
some row sees, n(n + 1) / 2 of n² with n = N/S), and the floor with the selection adds the run's cached
Stage 1 (the selection and the shared finish, which a fresh Stage 1 runs too; the block sums are left out, so
the floor stays a floor). Each timing is the median of --repeat CUDA-event measurements after five untimed
calls, with min and max.

usage: python3 bench/xattn_gemm_floor.py --json OUT [--stage1 BENCH.json ...]
Needs torch with a CUDA device.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_info import stamp, write_json  # noqa: E402

HEADS, TOKENS, DIM = 32, 32768, 128


def timed(fn, repeat):
    """{min_ms, median_ms, max_ms} of `repeat` CUDA-event timings of fn after five untimed calls."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeat)]
    for start, end in marks:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in marks)
    return {"min_ms": ms[0], "median_ms": ms[len(ms) // 2], "max_ms": ms[-1]}


def strided_gemm(stride, repeat):
    """cuBLAS's time for one XAttention score GEMM per head at `stride`, fp16 and fp32 outputs."""
    n = TOKENS // stride
    a = torch.randn(HEADS, n, stride * DIM, device="cuda", dtype=torch.float16)
    b = torch.randn(HEADS, stride * DIM, n, device="cuda", dtype=torch.float16)
    c16 = torch.empty(HEADS, n, n, device="cuda", dtype=torch.float16)
    c32 = torch.empty(HEADS, n, n, device="cuda", dtype=torch.float32)
    flops = 2.0 * HEADS * n * n * stride * DIM
    row = {"stride": stride, "flops": flops}
    for name, fn in (("fp16_out", lambda: torch.bmm(a, b, out=c16)),
                     ("fp32_out", lambda: torch.bmm(a, b, out_dtype=torch.float32, out=c32))):
        try:
            t = timed(fn, repeat)
        except (RuntimeError, TypeError) as err:  # an older torch without out_dtype
            row[name] = {"error": str(err).splitlines()[0]}
            continue
        row[name] = dict(t, tflops=flops / t["median_ms"] / 1e9)
    return row


def seen_fraction(stride, causal):
    n = TOKENS // stride
    return (n * (n + 1) / 2) / (n * n) if causal else 1.0


def floors(gemms, bench_paths):
    """Per `sparge bench` run and XAttention stride in it: dense walk, Stage 1 and the GEMM floor's share."""
    by_stride = {g["stride"]: g for g in gemms}
    rows = []
    for path in bench_paths:
        doc = json.load(open(path))
        for r in doc.get("results", []):
            for m in r.get("methods", []):
                g = by_stride.get(m.get("stride"))
                timed_here = g is not None and "median_ms" in g["fp16_out"]
                same_shape = r["tokens"] == TOKENS and r["head_dim"] == DIM
                if m.get("method") != "xattention" or not timed_here or not same_shape:
                    continue
                gemm = g["fp16_out"]["median_ms"] * seen_fraction(g["stride"], r["causal"])
                dense, select = r["dense"]["median_ms"], m["stage1_select"]["median_ms"]
                rows.append({"geometry": doc.get("geometry"), "causal": r["causal"], "stride": g["stride"],
                             "tokens": r["tokens"], "head_dim": r["head_dim"], "dense_ms": dense,
                             "stage1_ms": m["stage1"]["median_ms"], "stage1_share": m["stage1"]["median_ms"] / dense,
                             "cublas_gemm_ms": gemm, "gemm_floor_share": gemm / dense, "selection_ms": select,
                             "floor_with_selection_share": (gemm + select) / dense})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True, help="write the results here")
    ap.add_argument("--stage1", nargs="*", default=[], help="`sparge bench --method xattention --json` files")
    ap.add_argument("--strides", default="8,16")
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("xattn_gemm_floor: needs a CUDA device", file=sys.stderr)
        return 1
    gemms = [strided_gemm(int(s), a.repeat) for s in a.strides.split(",")]
    for g in gemms:
        for name in ("fp16_out", "fp32_out"):
            t = g[name]
            print(f"S={g['stride']} {name}: " + (t["error"] if "error" in t else
                  f"{t['median_ms']:.3f} ms [{t['min_ms']:.3f}-{t['max_ms']:.3f}], {t['tflops']:.0f} TFLOP/s"))
    rows = floors(gemms, a.stage1)
    for r in rows:
        print(f"{r['geometry']} {'causal' if r['causal'] else 'non-causal'} S={r['stride']}: dense {r['dense_ms']:.2f} ms,"
              f" Stage 1 {r['stage1_ms']:.3f} ({100 * r['stage1_share']:.1f} %), cuBLAS scores alone "
              f"{r['cublas_gemm_ms']:.3f} ({100 * r['gemm_floor_share']:.1f} %), with the selection "
              f"{100 * r['floor_with_selection_share']:.1f} %")
    doc = stamp("sparge-xattn-gemm-floor/1")
    doc.update({"torch": torch.__version__, "heads": HEADS, "tokens": TOKENS, "head_dim": DIM,
                "repeat": a.repeat, "gemms": gemms, "runs": rows})
    write_json(a.json, doc)
    print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
