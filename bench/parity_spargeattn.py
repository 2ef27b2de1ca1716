#!/usr/bin/env python3
"""Per-head L1 of SpargeAttn's own kernel next to what `sparge run` reports, on the same block masks.

Runs on a GPU machine with SpargeAttn (thu-ml/SpargeAttn@bfd980b) built in place and importable. For every
run of the manifest it reads the capture, the masks that `sparge run ... --masks` exported and that run's
JSON report, calls SpargeAttn's block_sparse_sage2_attn_cuda with exactly those masks and the report's
per-head λ (so Stage 1 cannot differ), and compares its per-head L1 against an fp64 reference with the
report's `l1` (and, for dense runs, `l1_quant`). It also checks SpargeAttn's own Stage 1 (mean-sim CDF API)
against the report's stage-1 sparsity, and measures upstream's causal handling: the sage2 APIs call their
kernel with is_causal=0, so inside diagonal blocks queries see future keys.

    python3 bench/parity_spargeattn.py --manifest manifest.json --out parity.json
    python3 bench/parity_spargeattn.py --manifest manifest.json --upstream parity.json --out again.json  # no GPU
    python3 bench/parity_spargeattn.py --manifest manifest.json --upstream parity.json --reports CUDA_DIR ...

manifest.json: {"runs": [{"label", "capture", "masks", "report", "key": "l1" | "l1_quant"}],
                 "causal": [{"label", "capture", "report"}]}   (report optional for causal entries)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import h5py
import numpy as np
import torch


def load_entry(f: h5py.File, name: str):
    g = f["entries"][name]

    def tensor(key):
        ds = g[key]
        a = ds[...]
        if ds.attrs.get("dtype", "") == "bfloat16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        t = torch.from_numpy(np.ascontiguousarray(a))
        if g.attrs.get("layout", "HND") == "NHD":
            t = t.transpose(1, 2)
        return t.contiguous()

    q, k, v = tensor("q"), tensor("k"), tensor("v")
    causal = bool(int(g.attrs.get("causal", 0)))
    scale = float(g.attrs["scale"]) if "scale" in g.attrs else 1.0 / math.sqrt(q.shape[-1])
    return q, k, v, causal, scale


def reference(q, k, v, scale, causal):
    """Exact attention in fp64 per head: [B, H, N, D]; K/V heads repeated for GQA."""
    g = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(g, dim=1).double()
    v = v.repeat_interleave(g, dim=1).double()
    s = torch.matmul(q.double(), k.transpose(-1, -2)) * scale
    if causal:
        nq, nk = s.shape[-2:]
        s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def head_l1(o, ref):
    """Σ|O - ref| / Σ|ref| per (batch, head) over tokens and channels."""
    d = (o.double() - ref).abs().sum(dim=(-1, -2))
    return (d / ref.abs().sum(dim=(-1, -2))).flatten().tolist()


def summary(ratios):
    r = np.array([x for x in ratios if np.isfinite(x)])
    if r.size == 0:
        return {"heads": 0}
    return {"heads": int(r.size), "within_15pct": float(np.mean(np.abs(r - 1) <= 0.15)),
            "mean_ratio": float(r.mean()), "median_ratio": float(np.median(r)),
            "min_ratio": float(r.min()), "max_ratio": float(r.max())}


def parity_run(run, api):
    rep = json.load(open(run["report"]))
    key = run.get("key", "l1")
    rows = []
    with h5py.File(run["capture"], "r") as cf, h5py.File(run["masks"], "r") as mf:
        for e in rep["entries"]:
            name = e["name"]
            q, k, v, causal, scale = load_entry(cf, name)
            q, k, v = (t.cuda().half() for t in (q, k, v))
            mask = torch.from_numpy(mf["entries"][name]["block_mask"][...].astype(bool)).cuda().contiguous()
            heads = sorted(e["heads"], key=lambda h: (h["batch"], h["head"]))
            lam = torch.tensor([h["params"]["pvthreshd"] if h["params"]["pvthreshd"] is not None else 1e30
                                for h in heads if h["batch"] == 0], dtype=torch.float32, device="cuda")
            o = api.block_sparse_sage2_attn_cuda(q, k, v, mask_id=mask, scale=scale, pvthreshd=lam,
                                                 tensor_layout="HND")
            up = head_l1(o, reference(q, k, v, scale, causal))
            for h, u in zip(heads, up):
                ours = h[key]
                rows.append({"entry": name, "batch": h["batch"], "head": h["head"], "ours": ours,
                             "spargeattn": u, "ratio": ours / u if u > 0 else float("nan"),
                             "stage1": h["sparsity_stage1"], "pv_skip": h["pv_skip_rate"]})
    return {"label": run["label"], "key": key, "geometry": rep["entries"][0].get("geometry"),
            "numerics": rep["entries"][0].get("numerics"), "rows": rows,
            "summary": summary([r["ratio"] for r in rows])}


def recompare_run(run, previous, reports=None):
    """The report's figures against SpargeAttn's per-head L1 from an earlier device run on the same masks
    (`--upstream`): for re-checking the CPU engine after a change, or the CUDA engine's reports (`--reports`,
    whose masks must equal the manifest's), without building SpargeAttn again."""
    path = os.path.join(reports, os.path.basename(run["report"])) if reports else run["report"]
    if reports:
        theirs = os.path.join(reports, os.path.basename(run["masks"]))
        with h5py.File(run["masks"], "r") as a, h5py.File(theirs, "r") as b:
            same = all(np.array_equal(a["entries"][n]["block_mask"][...], b["entries"][n]["block_mask"][...])
                       for n in a["entries"])
        print(f"\n{run['label']}: block masks of {theirs} {'equal' if same else 'DIFFER FROM'} the manifest's")
    rep = json.load(open(path))
    key = run.get("key", "l1")
    ours = {(e["name"], h["batch"], h["head"]): h for e in rep["entries"] for h in e["heads"]}
    if reports:  # the other engine against the manifest's (CPU) report, head by head
        cpu = {(e["name"], h["batch"], h["head"]): h[key] for e in json.load(open(run["report"]))["entries"]
               for h in e["heads"]}
        r = np.array([ours[k][key] / v for k, v in cpu.items() if k in ours and v > 0])
        print(f"  against the manifest's report: {int(np.sum(np.abs(r - 1) <= 0.02))} of {r.size} heads within "
              f"2 %, ratio mean {r.mean():.4f} (min {r.min():.4f}, max {r.max():.4f})")
    rows = []
    for x in previous["rows"]:
        h = ours[(x["entry"], x["batch"], x["head"])]
        u = x["spargeattn"]
        rows.append({**x, "ours": h[key], "ratio": h[key] / u if u > 0 else float("nan"),
                     "stage1": h["sparsity_stage1"], "pv_skip": h["pv_skip_rate"]})
    return {**previous, "rows": rows, "summary": summary([r["ratio"] for r in rows])}


def print_run(r):
    s = r["summary"]
    print(f"\n{r['label']} ({r['geometry']}, {r['numerics']}, ours = report '{r['key']}'):")
    print(f"{'entry':10} {'head':>4} {'stage1':>7} {'pv-skip':>7} {'ours':>9} {'SpargeAttn':>10} {'ratio':>6}")
    for x in r["rows"]:
        print(f"{x['entry']:10} {x['head']:4d} {x['stage1']:7.3f} {x['pv_skip']:7.3f} {x['ours']:9.5f} "
              f"{x['spargeattn']:10.5f} {x['ratio']:6.3f}")
    print(f"  {s.get('heads')} heads: {100 * s.get('within_15pct', 0):.0f} % within 15 %, mean ratio "
          f"{s.get('mean_ratio', float('nan')):.3f} (min {s.get('min_ratio', float('nan')):.3f}, max "
          f"{s.get('max_ratio', float('nan')):.3f})", flush=True)


def stage1_check(run, api, theta, tau, lam):
    """SpargeAttn's own mean-sim CDF prediction: its stage-1 sparsity per entry next to the report's."""
    rep = json.load(open(run["report"]))
    out = []
    with h5py.File(run["capture"], "r") as cf:
        for e in rep["entries"]:
            q, k, v, causal, scale = load_entry(cf, e["name"])
            q, k, v = (t.cuda().half() for t in (q, k, v))
            _, sp = api.spas_sage2_attn_meansim_cuda(q, k, v, is_causal=causal, scale=scale, simthreshd1=theta,
                                                     cdfthreshd=tau, pvthreshd=lam, return_sparsity=True)
            out.append({"entry": e["name"], "spargeattn": sp, "ours": e["totals"]["sparsity_stage1"]})
    return out


def causal_run(run, api):
    """Fully dense causal attention through SpargeAttn: the sage2 top-k API with topk = 1 (every causally valid
    block; its kernel gets is_causal=0) and the sage1 API (its kernel masks inside diagonal blocks)."""
    rows = []
    with h5py.File(run["capture"], "r") as cf:
        for name in sorted(cf["entries"]):
            q, k, v, causal, scale = load_entry(cf, name)
            if not causal or q.shape[2] < 128 or q.shape[-1] not in (64, 128):
                continue
            g = q.shape[1] // k.shape[1]
            q = q.cuda().half()
            k = k.repeat_interleave(g, dim=1).cuda().half().contiguous()  # the mean-sim APIs lack GQA
            v = v.repeat_interleave(g, dim=1).cuda().half().contiguous()
            ref = reference(q, k, v, scale, True)
            args = dict(is_causal=True, scale=scale, simthreshd1=-0.1, topk=1.0, pvthreshd=50)
            sage2 = api.spas_sage2_attn_meansim_topk_cuda(q, k, v, **args)
            sage1 = api.spas_sage_attn_meansim_topk_cuda(q, k, v, **args)
            for h, (a, b) in enumerate(zip(head_l1(sage2, ref), head_l1(sage1, ref))):
                rows.append({"entry": name, "head": h, "sage2_dense_l1": a, "sage1_dense_l1": b})
    agg = lambda key: float(np.mean([r[key] for r in rows])) if rows else float("nan")  # noqa: E731
    return {"label": run["label"], "rows": rows,
            "summary": {"heads": len(rows), "sage2_mean_l1": agg("sage2_dense_l1"),
                        "sage1_mean_l1": agg("sage1_dense_l1"),
                        "sage2_range": [min((r["sage2_dense_l1"] for r in rows), default=float("nan")),
                                        max((r["sage2_dense_l1"] for r in rows), default=float("nan"))]}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--upstream", help="an earlier --out file: compare the manifest's reports with its SpargeAttn "
                                       "figures (same masks), without a GPU")
    ap.add_argument("--reports", help="with --upstream: a folder holding the manifest's reports and masks by file "
                                      "name (for example a CUDA engine run's), compared instead of the manifest's")
    args = ap.parse_args()
    previous = json.load(open(args.upstream)) if args.upstream else None
    api = None
    if not previous:
        import spas_sage_attn as api

    man = json.load(open(args.manifest))
    result = {"device": previous["device"] if previous else torch.cuda.get_device_name(),
              "torch": torch.__version__, "cuda": torch.version.cuda,
              "spargeattn": "thu-ml/SpargeAttn@bfd980b (block_sparse_sage2_attn_cuda)", "runs": [], "causal": [],
              "stage1": previous["stage1"] if previous else []}
    torch.backends.cuda.matmul.allow_tf32 = False
    for i, run in enumerate(man.get("runs", [])):
        try:
            if args.reports and not os.path.exists(os.path.join(args.reports, os.path.basename(run["report"]))):
                continue
            r = recompare_run(run, previous["runs"][i], args.reports) if previous else parity_run(run, api)
            result["runs"].append(r)
            print_run(r)
            if run.get("stage1") and not previous:
                chk = stage1_check(run, api, *run["stage1"])
                result["stage1"].append({"label": run["label"], "entries": chk})
                for c in chk:
                    print(f"  stage 1 {c['entry']}: SpargeAttn {c['spargeattn']:.4f}  ours {c['ours']:.4f}")
        except Exception as exc:  # keep going: one failing run must not cost the others
            print(f"{run['label']}: FAILED: {exc!r}", flush=True)
            result["runs"].append({"label": run["label"], "error": repr(exc)})
    for run in [] if previous else man.get("causal", []):
        try:
            r = causal_run(run, api)
            result["causal"].append(r)
            s = r["summary"]
            print(f"\ncausal, fully dense, {r['label']}: {s['heads']} heads; sage2 APIs (kernel without causal "
                  f"mask) mean L1 {s['sage2_mean_l1']:.4f} (range {s['sage2_range'][0]:.4f}-{s['sage2_range'][1]:.4f});"
                  f" sage1 API (causal mask) {s['sage1_mean_l1']:.4f}", flush=True)
        except Exception as exc:
            print(f"{run['label']}: FAILED: {exc!r}", flush=True)
            result["causal"].append({"label": run["label"], "error": repr(exc)})
    if previous:
        result["causal"] = previous["causal"]
    json.dump(result, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
