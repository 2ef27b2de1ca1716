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
    return out


def render_compare(doc, name):
    """bench/compare_spargeattn.py: ours against SpargeAttn (and torch) on the same shapes."""
    out = [f"### Against SpargeAttn ({name})", "", provenance(doc) + ".", "",
           "| N | D | causal | figures |", "| --- | --- | --- | --- |"]
    for r in doc.get("results", []):
        out.append(f"| {r['tokens']} | {r['head_dim']} | {'yes' if r['causal'] else 'no'} | "
                   f"{json.dumps(r.get('theirs', {}), sort_keys=True)[:200]} |")
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


RENDERERS = {"sparge-bench/1": render_bench, "sparge-compare-spargeattn/1": render_compare,
             "sparge-parity/1": render_parity, "sparge-cpu-bench/1": render_cpu_bench}

AWAITING = """## Awaiting a GPU run in this form

These figures are still quoted in README.md and kernels/NOTES.md from runs made before results were kept as
JSON; each comes here once its command (docs/DEVELOPING.md, "GPU testing") writes its file into bench/results/:
- the whole call against SpargeAttn, torch SDPA and cuDNN (`tools/gpu/engine_check.sh`, its `sparge bench
  --json` files and `bench/compare_spargeattn.py --json`);
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
