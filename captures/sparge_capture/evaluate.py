"""The model's own quality with tuned parameters: the model runs dense and with SpargeApply on the inputs a user
names, and the two are compared (causal LMs: perplexity, next-token top-1 agreement, logit KL; speech
encoder–decoders: WER of the transcript and token agreement; diffusers pipelines: PSNR and SSIM with the same
seed), together with each head's sparsity and L1 on those inputs. The result is eval.json (sparge_eval_version 1)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Dict, List, Optional, Sequence, Union

import torch

from . import metrics
from .apply import SpargeApply
from .params import ParamsFile, read_params

EVAL_VERSION = 1


def default_output(params_path: str) -> str:
    """<params stem>.eval.json beside the parameter file."""
    stem, _ = os.path.splitext(params_path)
    return stem + ".eval.json"


def detect_kind(model) -> str:
    if not isinstance(model, torch.nn.Module) and callable(model):
        return "diffusion"
    cfg = getattr(model, "config", None)
    if getattr(cfg, "is_encoder_decoder", False):
        return "speech-seq2seq"
    return "causal-lm"


def _named(inputs: Sequence) -> List[dict]:
    out = []
    for i, x in enumerate(inputs):
        item = dict(x) if isinstance(x, dict) else {"value": x}
        item.setdefault("name", f"input {i}")
        out.append(item)
    return out


class _HeadTable:
    """Per (live entry, head): block counts and L1 sums over the inputs, the largest per-input L1."""

    def __init__(self) -> None:
        self.rows: Dict[str, dict] = {}

    def add(self, stats: Dict[str, object]) -> None:
        for name, s in stats.items():
            r = self.rows.setdefault(name, {"module": s.module, "layer": s.layer, "numerics": s.numerics,
                                            "dense_heads": s.dense_heads, "valid": 0, "selected": 0, "computed": 0,
                                            "diff": 0, "ref": 0, "l1_max": None, "inputs": 0})
            st = s.stats
            r["valid"] = r["valid"] + st.valid
            r["selected"] = r["selected"] + st.selected
            r["computed"] = r["computed"] + st.computed
            r["inputs"] += 1
            if st.abs_diff is not None:
                l1 = st.abs_diff / st.abs_ref
                r["diff"] = r["diff"] + st.abs_diff
                r["ref"] = r["ref"] + st.abs_ref
                r["l1_max"] = l1 if r["l1_max"] is None else torch.maximum(r["l1_max"], l1)

    def heads(self, budget: float) -> List[dict]:
        out = []
        for name, r in self.rows.items():
            for h in range(len(r["valid"])):
                valid = int(r["valid"][h])
                row = {"entry": name, "module": r["module"], "layer": r["layer"], "head": h,
                       "numerics": r["numerics"][h] if r["numerics"] else None,
                       "sparsity": 1 - int(r["computed"][h]) / valid if valid else 0.0,
                       "sparsity_stage1": 1 - int(r["selected"][h]) / valid if valid else 0.0,
                       "dense": h in r["dense_heads"], "budget_l1": budget, "inputs": r["inputs"]}
                if r["l1_max"] is not None:
                    row.update(l1=float(r["diff"][h] / r["ref"][h]), l1_max=float(r["l1_max"][h]))
                    row["over_budget"] = row["l1_max"] > budget
                out.append(row)
        return out


def _causal_lm(model, tokenizer, items, sa, table, max_tokens, device) -> tuple:
    results, tot = [], {"positions": 0, "nll_dense": 0.0, "nll_sparse": 0.0, "top1_agree": 0, "kl": 0.0}
    for item in items:
        value = item.get("ids", item.get("text", item.get("value")))
        ids = value if torch.is_tensor(value) else torch.tensor(
            value if isinstance(value, list) else tokenizer(value).input_ids)
        ids = ids.flatten()[:max_tokens] if max_tokens else ids.flatten()
        x = ids[None].to(device)
        with torch.no_grad():
            dense = model(x).logits[0]
            with sa:
                sparse = model(x).logits[0]
        table.add(sa.take_stats())
        s = metrics.next_token_stats(dense, sparse, ids)
        for k in tot:
            tot[k] += s[k]
        n = s["positions"]
        results.append({"name": item["name"], "tokens": int(ids.numel()), "metrics": {
            "perplexity_dense": math.exp(s["nll_dense"] / n), "perplexity_sparse": math.exp(s["nll_sparse"] / n),
            "top1_agreement": s["top1_agree"] / n, "mean_kl": s["kl"] / n}})
    n = tot["positions"]
    dense_ppl, sparse_ppl = math.exp(tot["nll_dense"] / n), math.exp(tot["nll_sparse"] / n)
    summary = {"metric": "perplexity", "dense": dense_ppl, "sparse": sparse_ppl,
               "relative_change": sparse_ppl / dense_ppl - 1, "top1_agreement": tot["top1_agree"] / n,
               "mean_kl": tot["kl"] / n, "positions": n}
    summary["line"] = (f"perplexity {dense_ppl:.2f} → {sparse_ppl:.2f} ({100 * summary['relative_change']:+.1f} %), "
                       f"top-1 agreement {100 * summary['top1_agreement']:.1f} %, mean KL {summary['mean_kl']:.4f}")
    return results, summary


def greedy_decode(model, features, prompt: List[int], max_new: int, eos: Optional[int]) -> List[int]:
    """Greedy transcript of an encoder–decoder (KV cache: after the prompt every decoder call has one query)."""
    with torch.no_grad():
        out = model(input_features=features, decoder_input_ids=torch.tensor([prompt], device=features.device),
                    use_cache=True)
        enc, tokens = out.encoder_last_hidden_state, []
        for _ in range(max_new):
            nxt = int(out.logits[0, -1].argmax())
            if nxt == eos:
                break
            tokens.append(nxt)
            out = model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([[nxt]], device=features.device),
                        past_key_values=out.past_key_values, use_cache=True)
    return tokens


def _speech(model, processor, items, sa, table, options, device) -> tuple:
    extractor, decoder = processor
    prompt = options.get("prompt") or [model.config.decoder_start_token_id]
    eos, max_new = options.get("eos", model.config.eos_token_id), options.get("max_new_tokens", 200)
    results, edits, words, agree, compared, ref_edits = [], 0, 0, 0, 0, {"dense": 0, "sparse": 0, "words": 0}
    for item in items:
        audio = item.get("audio", item.get("value"))
        feats = extractor(audio, sampling_rate=16000, return_tensors="pt").input_features.to(device)
        dense = greedy_decode(model, feats, prompt, max_new, eos)
        with sa:
            sparse = greedy_decode(model, feats, prompt, max_new, eos)
            sa.take_stats()  # the statistics come from the teacher-forced pass below (one encoder run)
            with torch.no_grad():
                forced = torch.tensor([prompt + dense], device=device)
                sparse_next = model(input_features=feats, decoder_input_ids=forced).logits[0].argmax(-1)
        with torch.no_grad():
            dense_next = model(input_features=feats, decoder_input_ids=forced).logits[0].argmax(-1)
        table.add(sa.take_stats())
        text_d, text_s = decoder.decode(dense), decoder.decode(sparse)
        e, w = metrics.word_errors(text_d, text_s)
        a, n = int((sparse_next == dense_next).sum()), int(dense_next.numel())
        edits, words, agree, compared = edits + e, words + w, agree + a, compared + n
        m = {"wer_vs_dense": e / max(w, 1), "token_agreement": a / n, "transcript_dense": text_d,
             "transcript_sparse": text_s}
        if item.get("text"):
            for run, text in (("dense", text_d), ("sparse", text_s)):
                re_, rw = metrics.word_errors(item["text"], text)
                m[f"wer_{run}"] = re_ / max(rw, 1)
                ref_edits[run] += re_
            ref_edits["words"] += metrics.word_errors(item["text"], "")[1]
        results.append({"name": item["name"], "tokens": len(dense), "metrics": m})
    return results, _speech_summary(edits, words, agree, compared, ref_edits)


def _speech_summary(edits, words, agree, compared, ref_edits) -> dict:
    wer = edits / max(words, 1)
    s = {"metric": "wer", "wer_vs_dense": wer, "token_agreement": agree / max(compared, 1)}
    if ref_edits["words"]:
        d, sp = ref_edits["dense"] / ref_edits["words"], ref_edits["sparse"] / ref_edits["words"]
        s.update(dense=d, sparse=sp, relative_change=(sp / d - 1) if d > 0 else None)
        head = f"WER {100 * d:.1f} % → {100 * sp:.1f} % against the reference texts, "
    else:  # the dense transcript is the reference: its own WER is 0
        s.update(dense=0.0, sparse=wer, relative_change=None)
        head = ""
    s["line"] = (head + f"WER against the dense transcript {100 * wer:.1f} %, token agreement "
                 f"{100 * s['token_agreement']:.1f} %")
    return s


def _diffusion(pipe, items, sa, table, options, device) -> tuple:
    seed, kwargs = options.get("seed", 0), dict(options.get("pipeline_kwargs", {}))
    results, psnrs, ssims = [], [], []

    def step(*args, **kw):
        sa.next_step()
        return args[-1] if args and isinstance(args[-1], dict) else kw.get("callback_kwargs", {})

    for item in items:
        prompt = item.get("prompt", item.get("value"))
        images = []
        for sparse in (False, True):
            gen = torch.Generator(device=device).manual_seed(seed)
            sa.step = 0
            if sparse:
                with sa:
                    out = pipe(prompt, generator=gen, output_type="np", callback_on_step_end=step, **kwargs)
            else:
                out = pipe(prompt, generator=gen, output_type="np", **kwargs)
            images.append(torch.as_tensor(out.images[0] if hasattr(out, "images") else out[0]))
        table.add(sa.take_stats())
        p, s = metrics.psnr(images[0], images[1]), metrics.ssim(images[0], images[1])
        psnrs.append(p)
        ssims.append(s)
        results.append({"name": item["name"], "tokens": None,
                        "metrics": {"psnr": p if math.isfinite(p) else None, "ssim": s}})
    finite = [p for p in psnrs if math.isfinite(p)]
    mean_psnr = sum(finite) / len(finite) if finite else None  # None: every image identical to the dense one
    text = f"PSNR {mean_psnr:.1f} dB" if finite else "identical images"
    if finite and len(finite) < len(psnrs):
        text += f" ({len(psnrs) - len(finite)} identical)"
    summary = {"metric": "psnr", "dense": None, "sparse": mean_psnr, "relative_change": None,
               "ssim": sum(ssims) / len(ssims),
               "line": f"{text}, SSIM {sum(ssims) / len(ssims):.3f} against the dense output (same seed {seed})"}
    return results, summary


def evaluate(model, tokenizer, params: Union[str, ParamsFile], inputs: Sequence, *, engine: str = "reference",
             kind: Optional[str] = None, device=None, out: Optional[str] = None, name: Optional[str] = None,
             max_tokens: Optional[int] = None, allow_incomplete: bool = False, measure: bool = True,
             steps: str = "nearest", **options) -> dict:
    """Runs `model` dense and with the parameters on `inputs` and returns (and writes, unless out="") eval.json.

    kind: "causal-lm" (inputs: texts, token lists or dicts {"name", "text"}; tokenizer: a callable giving
    .input_ids), "speech-seq2seq" (inputs: 16 kHz float arrays or dicts {"name", "audio", "text"?}; tokenizer: a
    pair (feature extractor, decoder with .decode(ids)); options prompt=[...], eos=, max_new_tokens=) or
    "diffusion" (model: a diffusers pipeline; inputs: prompts; options seed=, pipeline_kwargs=); default: detected.
    """
    pf = params if isinstance(params, ParamsFile) else read_params(params)
    kind = kind or detect_kind(model)
    if kind not in ("causal-lm", "speech-seq2seq", "diffusion"):
        raise ValueError(f"kind {kind!r}: expected causal-lm, speech-seq2seq or diffusion")
    items = _named(inputs)
    if not items:
        raise ValueError("evaluate: no inputs given")
    if device is None:
        device = next(model.parameters()).device if isinstance(model, torch.nn.Module) else "cpu"
    sa = SpargeApply(model, pf, engine, allow_incomplete=allow_incomplete, measure=measure, steps=steps)
    table = _HeadTable()
    if kind == "causal-lm":
        results, summary = _causal_lm(model, tokenizer, items, sa, table, max_tokens, device)
    elif kind == "speech-seq2seq":
        results, summary = _speech(model, tokenizer, items, sa, table, options, device)
    else:
        results, summary = _diffusion(model, items, sa, table, options, device)
    heads = table.heads(pf.l2)
    summary["inputs"] = len(items)
    summary["line"] += f", {len(items)} held-out input{'s' if len(items) != 1 else ''}"
    report = {"sparge_eval_version": EVAL_VERSION, "generator": "sparge-eval", "params": pf.path,
              "engine": sa.engine.name, "numerics": pf.numerics, "geometry": pf.geometry, "device": str(device),
              "budget": {"l1": pf.l1, "l2": pf.l2},
              "model": {"name": name or _model_name(model), "kind": kind}, "inputs": results, "summary": summary,
              "heads": heads, "heads_over_budget": sum(1 for h in heads if h.get("over_budget")),
              "calls": sa.summary.as_dict(), "apply_summary": sa.summary.text()}
    if out != "":
        write_json_atomically(out or default_output(pf.path), report)
    return report


def _model_name(model) -> str:
    cfg = getattr(model, "config", None)
    return getattr(cfg, "_name_or_path", "") or type(model).__name__


def write_json_atomically(path: str, obj) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".eval-", suffix=".json.tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, ensure_ascii=False, allow_nan=False, default=_jsonable)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _jsonable(x):
    if torch.is_tensor(x):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")
