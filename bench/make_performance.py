#!/usr/bin/env python3
"""Renders docs/performance.md from the benchmark results committed under bench/results/ (JSON written by
`sparge bench --json` (GPU) and `sparge bench --engine cpu --json`, bench/compare_spargeattn.py,
bench/compare_torch.py and the numerics parity check).
Every table names the GPU, driver, clock, commit and date its file records; nothing is typed in by hand.

usage: python3 bench/make_performance.py [--results bench/results] [--out docs/performance.md] [--check]
--check: exit 1 when the file on disk differs from what the results give (for CI)."""
import argparse
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import machine_info  # noqa: E402  (pure Python: the power-limit rule the bench records with)


def fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


def provenance(doc):
    m = doc.get("machine") or {}
    clock = m.get("sm_clock_mhz") or m.get("max_sm_clock_mhz")
    clock_text = "not recorded" if not clock else f"{clock} MHz" + (" (max)" if not m.get("sm_clock_mhz") else "")
    driver = m.get("driver") or (f"CUDA driver API {m['cuda_driver']}" if m.get("cuda_driver") else "not recorded")
    return (f"GPU {m.get('gpu') or doc.get('device') or 'not recorded'}, driver {driver}, SM clock {clock_text}, "
            f"commit {doc.get('commit') or 'not recorded'}, {doc.get('date') or 'date not recorded'}")


def render_bench(doc, name):
    """`sparge bench --json`: the whole call per shape and top-k against our dense walk and cuDNN."""
    out = [f"### Whole call ({name})", "", provenance(doc) + ".",
           f"Geometry {doc.get('geometry')}, {doc.get('dtype')}, numerics {doc.get('numerics')}, "
           f"B={doc.get('batch')} H={doc.get('heads')}, repeat {doc.get('repeat')}, CUDA events, median ms.", "",
           "| N | D | causal | kernel | top-k | density | call | Stage 1 | attention | dense | cuDNN | vs best dense |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc.get("results", []):
        cudnn = (r.get("cudnn") or {}).get("median_ms")
        for s in r.get("sparse", []):
            out.append(f"| {r['tokens']} | {r['head_dim']} | {'yes' if r['causal'] else 'no'} | "
                       f"{r.get('attention_kernel', '')} | {s['topk']:g} | {100 * s['density']:.1f} % | "
                       f"{fmt(s['call']['median_ms'])} | {fmt(r['stage1']['median_ms'])} | "
                       f"{fmt(s['stage2']['median_ms'])} | {fmt(r['dense']['median_ms'])} | {fmt(cudnn)} | "
                       f"{s['speedup_over_best_dense']:.2f}x {r.get('best_dense', '')} |")
    return out + render_methods(doc)


def span(stats):
    return f"{fmt(stats['median_ms'])} [{fmt(stats['min_ms'])}-{fmt(stats['max_ms'])}]"


def render_methods(doc):
    """`sparge bench --method`: each block predictor's Stage 1 against the dense walk of the same run."""
    rows = [(r, m) for r in doc.get("results", []) for m in r.get("methods", [])]
    if not rows:
        return []
    out = ["", f"Stage 1 of the block predictors (geometry {doc.get('geometry')}, {doc.get('dtype')}, default "
           "parameters; fresh: statistics computed again, cached: the selection alone; median [min-max] ms; "
           "share: fresh Stage 1 / the dense walk of the same run).", "",
           "| N | D | causal | method | Stage 1 fresh | cached | dense walk | share | density |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc.get("results", []):
        out.append(f"| {r['tokens']} | {r['head_dim']} | {'yes' if r['causal'] else 'no'} | spargeattn | "
                   f"{span(r['stage1'])} | {span(r['stage1_select'])} | {fmt(r['dense']['median_ms'])} | "
                   f"{100 * r['stage1_over_dense']:.1f} % | - |")
        for m in r.get("methods", []):
            label = m["method"] + (f" (S={m['stride']})" if "stride" in m else "")
            out.append(f"| {r['tokens']} | {r['head_dim']} | {'yes' if r['causal'] else 'no'} | {label} | "
                       f"{span(m['stage1'])} | {span(m['stage1_select'])} | {fmt(r['dense']['median_ms'])} | "
                       f"{100 * m['stage1_over_dense']:.1f} % | {100 * m['density']:.1f} % |")
    return out


def render_compare(doc, name):
    """bench/compare_spargeattn.py: ours against SpargeAttn (and torch) on the same shapes, whole call."""
    out = [f"### Against SpargeAttn, whole call ({name})", "", provenance(doc) + ".",
           f"torch {doc.get('torch')}; B=1 H=32 fp16 random N(0, 1) data; dense-equivalent TOPS "
           "(4·B·H·N²·D / t, halved when causal; t = median of the whole call: Stage 1, quantization, attention).",
           "", "| N | D | causal | top-k | ours int8-fp8 | ours fp16 | SpargeAttn | ours int8-fp8 / SpargeAttn | "
           "torch SDPA | cuDNN | our dense fp16 |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc.get("results", []):
        ours, theirs = r.get("ours", {}), r.get("theirs", {})
        for topk, figs in ours.get("topk", {}).items():
            q8 = (figs.get("int8-fp8") or [None])[0]
            f16 = (figs.get("none") or [None])[0]
            sa = (theirs.get("spargeattn", {}).get(topk) or {}).get("tops")
            ratio = q8 / sa if q8 and sa else None
            out.append(f"| {r['tokens']} | {r['head_dim']} | {'yes' if r['causal'] else 'no'} | {topk} | "
                       f"{fmt(q8, 0)} | {fmt(f16, 0)} | {fmt(sa, 0)} | {fmt(ratio, 2)} | "
                       f"{fmt(theirs.get('sdpa'), 0)} | {fmt(ours.get('cudnn'), 0)} | "
                       f"{fmt((ours.get('dense') or {}).get('none'), 0)} |")
    return out


def rounds_note(doc):
    """How the op and SpargeAttn's call shared the GPU, where the bench ran them in rounds."""
    if not doc.get("rounds"):
        return ""
    return (f"; per top-k {doc['rounds']} rounds of ours and SpargeAttn's call in turns (the order flipped each "
            "round), the median over the rounds; the speedup's range is over the rounds' ratios")


def speedup_cell(ours, theirs):
    """SpargeAttn's time over ours, with the range of the rounds' ratios where the bench ran rounds."""
    if not theirs.get("ms"):
        return fmt(None)
    text = fmt(theirs["ms"] / ours["ms"], 2)
    a, b = ours.get("ms_rounds"), theirs.get("ms_rounds")
    if a and b and len(a) == len(b) and len(a) > 1:
        ratios = [y / x for x, y in zip(a, b)]
        text += f" ({fmt(min(ratios), 2)}–{fmt(max(ratios), 2)})"
    return text


def render_capi_bench(doc, name):
    """bench/capi_bench.py: the sparge_attn op as PyTorch calls it, against SpargeAttn and the dense kernels."""
    s = doc.get("summary", {})
    g = doc.get("graph_and_compile", {})
    clocked = bool(s.get("timings_with_clock_samples"))
    out = [f"### The sparge_attn op from PyTorch ({name})", "", provenance(doc) + ".",
           f"torch {doc.get('torch')}; sparge_attn {doc.get('sparge_attn')}; B=1 H=32 fp16 random data, int8-fp8, "
           "θ -0.1, λ 50, no counters asked for (so ours leaves out the P·V-skip vote, which cannot change the "
           f"output at λ >= 40, and walks top-k 1 dense: docs/capi.md); median of {doc.get('repeat')} after "
           f"warm-up, ms{rounds_note(doc)}. FlashAttention-3: {s.get('fa3')} "
           "(bfloat16 copies of the same data; FP8: e4m3 copies, unit descales, the kernel alone without the "
           "quantization a caller would add). Best dense: the fastest dense call of the cell (ours exact or "
           "int8-fp8, SDPA, FA3 bf16 or FP8).",
           f"Speedup over SpargeAttn's whole call: min {fmt(s.get('min_speedup'), 2)}, median "
           f"{fmt(s.get('median_speedup'), 2)}, {s.get('cells_at_1_3_or_more')} of {s.get('cells')} cells at 1.3 or "
           f"more. CUDA graph replay equal to eager: {g.get('graph_equal')}; torch.compile equal: "
           f"{g.get('compile_equal')} (with CUDA graphs: {g.get('compile_cudagraphs_equal')})."
           + (f" SM clock: nvidia-smi's median over the samples (every 20 ms) taken while each call was timed; * where "
              f"the board held the clock down for power (its power limit) in most of them: "
              f"{s.get('timings_power_limited')} of {s.get('timings_with_clock_samples')} timings." if clocked else ""),
           "",
           "| N | D | causal | top-k | ours | SpargeAttn | speedup | of our dense | our dense fp16 | FA3 | "
           "FA3 FP8 | ours vs best dense | SDPA |" + (" SM MHz ours / SpargeAttn |" if clocked else ""),
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if clocked else "")]
    for c in doc.get("cells", []):
        for topk, o in c.get("ours", {}).items():
            theirs = c.get("spargeattn", {}).get(topk) or {}
            sa = theirs.get("ms")
            out.append(f"| {c['tokens']} | {c['head_dim']} | {'yes' if c['causal'] else 'no'} | {topk} | "
                       f"{fmt(o['ms'])} | {fmt(sa)} | {speedup_cell(o, theirs)} | "
                       f"{fmt(o['ms'] / c['dense_exact_ms'])} | {fmt(c['dense_exact_ms'])} | "
                       f"{fmt(c.get('fa3_ms'))} | {fmt(c.get('fa3_fp8_ms'))} | "
                       f"{fmt(o.get('speedup_vs_best_dense'), 2)} | {fmt(c.get('sdpa_ms'))} |"
                       + (f" {clock_cell(o)} / {clock_cell(theirs)} |" if clocked else ""))
    return out


def clock_cell(timing):
    """The median SM clock a call was timed at (MHz), with a star where the board held the clock down for
    power in most of the samples."""
    gpu = timing.get("gpu") or {}
    if gpu.get("sm_clock_mhz") is None:
        return fmt(None)
    return f"{gpu['sm_clock_mhz']:.0f}" + ("*" if machine_info.mostly_power_limited(gpu) else "")


def render_apply_parity(doc, name):
    """bench/apply_parity_capture.py: per-head L1 of SpargeApply's engines on a real capture."""
    heads = doc.get("heads", [])
    out = [f"### Apply engines on a real capture ({name})", "", provenance(doc) + ".",
           f"{doc.get('capture')}. torch {doc.get('torch')}; geometry {doc.get('geometry')}, numerics "
           f"{doc.get('numerics')}. Per-head L1 against the float32 dense output; ratio to SpargeAttn's kernel's.", "",
           "| engine | heads | within 15 % of SpargeAttn | ratio min | ratio median | ratio max |",
           "| --- | --- | --- | --- | --- | --- |"]
    for engine in ("reference", "sparge"):
        ratios = [h[f"l1_{engine}"] / h["l1_spargeattn"] for h in heads
                  if h.get(f"l1_{engine}") is not None and h.get("l1_spargeattn")]
        if not ratios:
            continue
        within = sum(abs(r - 1) <= 0.15 for r in ratios)
        out.append(f"| {engine} | {len(ratios)} | {within} | {min(ratios):.4f} | {statistics.median(ratios):.4f} | "
                   f"{max(ratios):.4f} |")
    return out


def render_parity(doc, name):
    """The numerics parity check: per run, our per-head L1 over SpargeAttn's kernel's."""
    out = [f"### Numerics parity with SpargeAttn ({name})", "", provenance(doc) + ".",
           f"SpargeAttn: {doc.get('spargeattn')}; torch {doc.get('torch')}; CUDA {doc.get('cuda')}. "
           "Ratio = our per-head L1 against the dense reference over SpargeAttn's (1.00: the same error).", "",
           "| run | geometry | numerics | heads | ratio median | ratio range |", "| --- | --- | --- | --- | --- | --- |"]
    for run in doc.get("runs", []):
        ratios = [row["ratio"] for row in run.get("rows", []) if row.get("ratio") is not None]
        if not ratios:
            continue
        out.append(f"| {run['label']} | {run['geometry']} | {run['numerics']} | {len(ratios)} | "
                   f"{statistics.median(ratios):.4f} | {min(ratios):.4f}-{max(ratios):.4f} |")
    if doc.get("note"):
        out += ["", doc["note"]]
    return out


def render_cpu_bench(doc, name):
    """`sparge bench --engine cpu --json`: the CPU engine per case, instruction-set variant and numerics."""
    m = doc.get("machine") or {}
    load = doc.get("load_average") or [None, None]
    span = lambda s: f"{fmt(s['median_ms'], 1)} ({fmt(s['min_ms'], 1)}-{fmt(s['max_ms'], 1)})"
    out = [f"### CPU engine ({name})", "",
           f"CPU {m.get('cpu') or 'not recorded'}, {m.get('logical_cores')} logical cores (variants it runs: "
           f"{', '.join(m.get('variants') or [])}), engine threads {doc.get('threads')}, load average "
           f"{fmt(load[0], 2)} before and {fmt(load[1], 2)} after, commit {doc.get('commit') or 'not recorded'}, "
           f"{doc.get('date') or 'date not recorded'}. Wall clock, ms, median (min-max).",
           f"`changes`: parameter changes on a {doc.get('changes_entry')} entry (θ -0.1, τ stepped over 0.900-0.987, "
           "dense outputs cached), as the GUI's slider makes them: *shown* when the deployed figures are out, "
           "*complete* with the error split's exact sparse pass; the engine keeps the query tiles whose mask rows a "
           "change leaves as they were, and *every tile* runs all of them (its raw speed). `first-run`: a fresh "
           "engine on a "
           f"{doc.get('first_run_entry')} entry (defaults θ 0.6, τ 0.98, λ 50) with the dense reference and every "
           "error figure, as `sparge run` computes them (without loading the file). Stages are medians.", "",
           "| case | entry | variant | numerics | runs | shown | complete | Stage 1 | quantize | Stage 2 | metrics |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc.get("rows", []):
        out.append(f"| {r['case']} | {r['entry']} | {r['isa']} | {r['numerics']} | {r['runs']} | {span(r['shown'])} | "
                   f"{span(r['complete'])} | {fmt(r['predict']['median_ms'], 1)} | "
                   f"{fmt(r['quantize']['median_ms'], 1)} | {fmt(r['sparse']['median_ms'], 1)} | "
                   f"{fmt(r['metrics']['median_ms'], 1)} |")
    return out


def _forward_rows(runs, tokens=None):
    """One table row per run of a model-forward result (dense first, then the sparse engines)."""
    rows = []
    order = ["dense", "spargeattn", "sparge"]
    for run in sorted(runs, key=lambda r: order.index(r) if r in order else len(order)):
        r, lead = runs[run], "" if tokens is None else f"{tokens} | "
        t = r["time"]
        ppl = fmt(r["perplexity"])
        if "perplexity_trained_context" in r:
            ppl += f" ({fmt(r['perplexity_trained_context'])})"
        rows.append(f"| {lead}{run} | {fmt(t['median_ms'], 2)} | {fmt(t['min_ms'], 2)}-{fmt(t['max_ms'], 2)} | "
                    f"{ppl} | {fmt(r['top1_agreement'], 4)} | {fmt(r['kl_mean'], 4)} | {fmt(r['logits_rel_l1'], 4)} |")
    return rows


def render_model_forward(doc, name):
    """bench/model_forward_gpu.py, one length (schema 1): dense and through both sparse engines."""
    out = [f"### A real model's forward pass ({name})", "", provenance(doc) + ".",
           f"{doc.get('model')}, {doc.get('tokens')} tokens of held-out text, torch {doc.get('torch')}; parameters: "
           f"`sparge {doc.get('tune')}` on another text (mean tuned sparsity {fmt(doc.get('tuned_sparsity_mean'))}); "
           "both sparse engines run the same parameters through SpargeApply. Wall time of the whole forward pass "
           "(median, min-max); metrics of the next-token distributions against the dense run.", "",
           "| run | forward ms | min-max | perplexity | top-1 agreement | KL | logits rel. L1 |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    out += _forward_rows(doc.get("runs", {}))
    if doc.get("note"):
        out += ["", doc["note"] + "."]
    return out


def render_model_forward_lengths(doc, name):
    """bench/model_forward_gpu.py, several lengths (schema 2): per length its tuning, then dense and both
    sparse engines."""
    out = [f"### A real model's forward pass ({name})", "", provenance(doc) + ".",
           f"{doc.get('model')}, torch {doc.get('torch')}; parameters tuned per length on another text with "
           f"`--target {doc.get('target')}` ({doc.get('numerics')}); every sparse engine runs the same parameters "
           "through SpargeApply. Wall time of the whole forward pass (median, min-max); metrics of the next-token "
           "distributions against the dense run of the same length. " + doc.get("context_note", "") + ".", ""]
    for length in doc.get("lengths", []):
        if "error" in length:
            out.append(f"- {length['tokens']} tokens: not measured ({length['error']})")
        else:
            out.append(f"- {length['tokens']} tokens: `sparge {length['tune']}`, mean tuned sparsity "
                       f"{fmt(length.get('tuned_sparsity_mean'))}, {length.get('tuned_exact_heads', 0)} heads exact, "
                       f"tuned in {fmt(length.get('tune_seconds'), 1)} s")
    out += ["", "| tokens | run | forward ms | min-max | perplexity (its first 8192 positions) | top-1 agreement "
            "| KL | logits rel. L1 |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for length in doc.get("lengths", []):
        out += _forward_rows(length.get("runs", {}), length["tokens"])
    if doc.get("note"):
        out += ["", doc["note"] + "."]
    return out


def render_xattn_floor(doc, name):
    """bench/xattn_gemm_floor.py: XAttention's strided score GEMM at cuBLAS's rate beside the engine's Stage 1."""
    out = [f"### XAttention's score GEMM at cuBLAS's rate ({name})", "", provenance(doc) + ".",
           f"torch {doc.get('torch')}; {doc.get('heads')} heads, {doc.get('tokens')} tokens, D {doc.get('head_dim')}, "
           "fp16 inputs, one [N/S, S·D] by [S·D, N/S] GEMM a head (torch.bmm), median [min-max] ms of "
           f"{doc.get('repeat')}.", "",
           "| stride | TFLOP | fp16 out | TFLOP/s | fp32 out | TFLOP/s |", "| --- | --- | --- | --- | --- | --- |"]
    for g in doc.get("gemms", []):
        cells = []
        for key in ("fp16_out", "fp32_out"):
            t = g[key]
            cells += ["-", "-"] if "error" in t else [span(t), f"{t['tflops']:.0f}"]
        out.append(f"| {g['stride']} | {g['flops'] / 1e12:.3f} | " + " | ".join(cells) + " |")
    out += ["", "Against `sparge bench --method xattention` runs of the same call (a causal entry's scores: the "
            "strided tiles some row sees; with the selection: plus the run's cached Stage 1):", "",
            "| geometry | causal | stride | dense walk | Stage 1 | cuBLAS scores | with the selection |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc.get("runs", []):
        out.append(f"| {r['geometry']} | {'yes' if r['causal'] else 'no'} | {r['stride']} | {fmt(r['dense_ms'])} | "
                   f"{fmt(r['stage1_ms'])} ({100 * r['stage1_share']:.1f} %) | {fmt(r['cublas_gemm_ms'])} "
                   f"({100 * r['gemm_floor_share']:.1f} %) | {100 * r['floor_with_selection_share']:.1f} % |")
    return out


RENDERERS = {"sparge-bench/1": render_bench, "sparge-compare-spargeattn/1": render_compare,
             "sparge-parity/1": render_parity, "sparge-cpu-bench/1": render_cpu_bench,
             "sparge-capi-bench/1": render_capi_bench, "sparge-apply-parity/1": render_apply_parity,
             "sparge-model-forward/1": render_model_forward,
             "sparge-model-forward/2": render_model_forward_lengths,
             "sparge-xattn-gemm-floor/1": render_xattn_floor}

AWAITING = """## Awaiting a GPU run in this form

These figures are quoted in docs/cuda-engine.md, docs/gui.md, docs/scaleout.md and kernels/NOTES.md from runs
made before results were kept as JSON; each comes here once its command (docs/DEVELOPING.md, "GPU testing") writes its file into bench/results/:
- the kernel benchmark and the TMA streaming floor (`tools/gpu/kernel_check.sh`);
- the tuner on one GPU (`tools/gpu/tuner_bench.sh`) and over 1, 2 and 4 GPUs (`tools/gpu/mpi_scaling.sh`);
- the GUI's slider latency and frame times (`tools/gpu/session.sh gui,frame`);
- the CUDA engine's half of the numerics parity with a current build (`tools/gpu/parity_cuda.sh`)."""


def render(results):
    lines = ["# Performance", "",
             "Generated by `bench/make_performance.py` from the JSON files in `bench/results/`; do not edit by",
             "hand. Figures are comparable only between files of the same GPU, driver and clock.", ""]
    files = sorted(glob.glob(os.path.join(results, "*.json")))
    shown = 0
    for path in files:
        doc = json.load(open(path))
        fn = RENDERERS.get(doc.get("schema"))
        if fn is None:
            continue
        lines += fn(doc, os.path.relpath(path, ROOT)) + [""]
        shown += 1
    if not shown:
        lines += ["No result files yet.", ""]
    lines += [AWAITING, ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "performance.md"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    text = render(a.results)
    if a.check:
        same = os.path.exists(a.out) and open(a.out).read() == text
        print("docs/performance.md is up to date" if same else "docs/performance.md differs: run make_performance.py")
        return 0 if same else 1
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, a.out)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
