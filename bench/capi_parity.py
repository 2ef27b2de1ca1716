#!/usr/bin/env python3
"""The sparge_attn op's outputs against SpargeAttn's own on real captures, per head: L1 of each against a float64
reference, the ratio ours / SpargeAttn, and Stage 1's sparsity of both. Each entry runs twice:

* full (non-causal) attention, where both compute the same function: SpargeAttn's spas_sage2_attn_meansim_cuda
  (CDF) and spas_sage2_attn_meansim_topk_cuda against sparge_attn.compat's functions of the same names and
  arguments (GQA entries: SpargeAttn gets K and V repeated per query head, which its Stage 1 needs);
* causal attention, against the exact causal reference: SpargeAttn's sage2 kernels ignore causality inside the
  diagonal blocks (docs/method.md, section 10), ours do not, so here our L1 should be the lower.

usage: python3 bench/capi_parity.py CAPTURE.h5 [...] --spargeattn DIR [--json OUT]
"""
import argparse
import json
import math
import os
import statistics
import sys

import h5py
import numpy as np
import torch

SETTINGS = [  # (label, keyword arguments of both APIs)
    ("cdf θ 0.5 τ 0.95 λ 3", dict(simthreshd1=0.5, cdfthreshd=0.95, pvthreshd=3)),
    ("topk 0.3 θ -0.1 λ 50", dict(simthreshd1=-0.1, topk=0.3, pvthreshd=50)),
]


def load(g, key):
    ds = g[key]
    a = ds[...]
    if ds.attrs.get("dtype", "") == "bfloat16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    t = torch.from_numpy(np.asarray(a, np.float32))
    if g.attrs.get("layout", "HND") in (b"NHD", "NHD"):
        t = t.transpose(1, 2)
    return t.contiguous()


def reference(q, k, v, causal, scale):
    group = q.shape[1] // k.shape[1]
    q = q.double()
    k, v = (t.repeat_interleave(group, 1).double() for t in (k, v))
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def head_l1(o, ref):
    o = o.double()
    return ((o - ref).abs().sum(dim=(0, 2, 3)) / ref.abs().sum(dim=(0, 2, 3))).tolist()


def compare_entry(name, q, k, v, scale, upstream, ours, causal):
    ref = reference(q, k, v, causal, scale)
    qh, kh, vh = (t.half().cuda() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    kr, vr = kh.repeat_interleave(group, 1), vh.repeat_interleave(group, 1)
    rows = []
    for label, kw in SETTINGS:
        fn = "spas_sage2_attn_meansim_topk_cuda" if "topk" in kw else "spas_sage2_attn_meansim_cuda"
        o_up, sp_up = getattr(upstream, fn)(qh, kr, vr, is_causal=causal, scale=scale, return_sparsity=True, **kw)
        o_us, sp_us = getattr(ours, fn)(qh, kh, vh, is_causal=causal, scale=scale, return_sparsity=True, **kw)
        l1_up, l1_us = head_l1(o_up.cpu(), ref), head_l1(o_us.cpu(), ref)
        rows.append({"entry": name, "setting": label, "causal": causal, "l1_spargeattn": l1_up, "l1_ours": l1_us,
                     "ratio": [a / b if b > 0 else math.nan for a, b in zip(l1_us, l1_up)],
                     "sparsity_spargeattn": sp_up, "sparsity_ours": sp_us})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+")
    ap.add_argument("--spargeattn", required=True, help="SpargeAttn's source folder with its extension built")
    ap.add_argument("--json")
    args = ap.parse_args()
    sys.path.insert(0, args.spargeattn)
    import spas_sage_attn as upstream
    from sparge_attn import compat as ours
    rows = []
    for path in args.captures:
        with h5py.File(path, "r") as f:
            for name, g in f["entries"].items():
                q, k, v = load(g, "q"), load(g, "k"), load(g, "v")
                if q.shape[-1] not in (64, 128) or v.shape[-1] != q.shape[-1]:
                    print(f"{path}:{name}: head dim {q.shape[-1]}, skipped (SpargeAttn takes 64 or 128)")
                    continue
                scale = float(g.attrs.get("scale", 1 / math.sqrt(q.shape[-1])))
                for causal in (False, True):
                    rows += compare_entry(f"{os.path.basename(path)}:{name}", q, k, v, scale, upstream, ours, causal)
    summary = {}
    for causal in (False, True):
        for label, _ in SETTINGS:
            sel = [r for r in rows if r["causal"] == causal and r["setting"] == label]
            ratios = [x for r in sel for x in r["ratio"] if not math.isnan(x)]
            key = f"{'causal' if causal else 'full'} / {label}"
            summary[key] = {"heads": len(ratios), "ratio_mean": statistics.fmean(ratios), "ratio_min": min(ratios),
                            "ratio_max": max(ratios),
                            "l1_ours_mean": statistics.fmean(x for r in sel for x in r["l1_ours"]),
                            "l1_spargeattn_mean": statistics.fmean(x for r in sel for x in r["l1_spargeattn"]),
                            "sparsity_equal_entries": sum(abs(r["sparsity_ours"] - r["sparsity_spargeattn"]) < 1e-9
                                                          for r in sel),
                            "entries": len(sel)}
            s = summary[key]
            print(f"{key}: {s['heads']} heads, L1 ours / SpargeAttn mean {s['ratio_mean']:.3f} "
                  f"({s['ratio_min']:.3f}-{s['ratio_max']:.3f}), mean L1 ours {s['l1_ours_mean']:.4f} "
                  f"SpargeAttn {s['l1_spargeattn_mean']:.4f}; Stage-1 sparsity equal on {s['sparsity_equal_entries']}"
                  f" of {s['entries']} entries")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "summary": summary, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
