"""SpargeAttn's arithmetic in PyTorch, step for step as the C++ CPU engine emulates it (docs/numerics.md):
rounding to the input's half type, FP8 e4m3, the INT8 tile quantizer, the FP8 per-channel V quantizer and the
engine's polynomial 2^x. Every function works on float32 tensors on any device."""

from __future__ import annotations

from typing import Optional, Tuple

import torch

LOG2E = 1.4426950408889634
# Upstream's FP8 offset: P = 2^(s - m + 8.807) spans e4m3's [0, 448] before the conversion.
FP8_OFFSET = 8.807
FP8_V_RANGE = 2.25
NUMERICS = ("none", "int8-fp16", "int8-fp8")
INPUT_TYPES = ("float16", "bfloat16", "float32")


def f32(value: float, like: torch.Tensor) -> torch.Tensor:
    """A float32 scalar tensor, so that arithmetic with it rounds exactly as C++ float arithmetic does."""
    return torch.tensor(value, dtype=torch.float32, device=like.device)


def input_type_of(dtype: torch.dtype) -> str:
    names = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
    if dtype not in names:
        raise TypeError(f"attention inputs must be float16, bfloat16 or float32, got {dtype}")
    return names[dtype]


def round_half(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float16).to(torch.float32)


def round_input(x: torch.Tensor, input_type: str) -> torch.Tensor:
    """x as the deployed kernel stores its inputs: bfloat16 for bfloat16 inputs, float16 otherwise (upstream
    casts float32 inputs to float16)."""
    if input_type == "bfloat16":
        return x.to(torch.bfloat16).to(torch.float32)
    return round_half(x)


def round_e4m3(x: torch.Tensor) -> torch.Tensor:
    """cvt.rn.satfinite.e4m3: round to nearest even, |x| >= 448 saturates (inf too), NaN stays NaN."""
    return torch.clamp(x, -448.0, 448.0).to(torch.float8_e4m3fn).to(torch.float32)


_POLY = (1.5403530393381606e-4, 1.3333558146428443e-3, 9.6181291076284772e-3, 5.5504108664821580e-2,
         2.4022650695910071e-1, 6.9314718055994531e-1, 1.0)


def exp2_fast(x: torch.Tensor) -> torch.Tensor:
    """The CPU engine's 2^x (degree-6 polynomial on [-0.5, 0.5], relative error ~2e-7), bit for bit: each
    float32 operation is a separate rounding, as the engine compiles it (no fused multiply-add)."""
    below = x < -126.0
    xc = torch.where(below, f32(-126.0, x), x)
    magic = f32(12582912.0, x)  # 1.5 * 2^23: adding it rounds to the nearest integer
    n = (xc + magic) - magic
    frac = xc - n
    p = f32(_POLY[0], x).expand_as(x)
    for c in _POLY[1:]:
        p = p * frac + f32(c, x)
    n_int = torch.nan_to_num(n, nan=0.0).to(torch.int32)
    scale = torch.bitwise_left_shift(n_int + 127, 23).view(torch.float32)
    return torch.where(below, f32(0.0, x), p * scale)


def key_mean(k: torch.Tensor, input_type: str) -> torch.Tensor:
    """K's token mean per head [..., 1, D] in the input precision (the sum of the rounded values in float64,
    divided, rounded to float32, then to the input type): what smooth_k subtracts."""
    acc = round_input(k, input_type).double().sum(-2, keepdim=True)
    return round_input((acc / k.shape[-2]).float(), input_type)


def pad_rows(x: torch.Tensor, multiple: int) -> torch.Tensor:
    n = x.shape[-2]
    extra = -n % multiple
    if extra == 0:
        return x
    return torch.cat([x, x.new_zeros(*x.shape[:-2], extra, x.shape[-1])], dim=-2)


def quantize_rows_int8(x: torch.Tensor, block_rows: int, mean: Optional[torch.Tensor],
                       input_type: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """INT8 codes [..., nb*block_rows, D] (as float32; padded rows 0) and one scale per block [..., nb] of
    upstream's Triton quantizer: x' = round_T(round_T(x) - mean) for smoothed K, scale = amax/127 + 1e-7,
    code = trunc(x'/scale ± 0.5) clamped to [-128, 127], NaN -> 0."""
    v = round_input(x, input_type)
    if mean is not None:
        v = round_input(v - mean, input_type)
    v = pad_rows(v, block_rows)
    nb = v.shape[-2] // block_rows
    blocks = v.reshape(*v.shape[:-2], nb, block_rows * v.shape[-1])
    amax = torch.nan_to_num(blocks.abs(), nan=0.0).amax(-1)  # NaN is ignored by the scan
    scale = amax / f32(127.0, v) + f32(1e-7, v)
    t = blocks / scale.unsqueeze(-1)
    t = t + torch.where(t >= 0, f32(0.5, v), f32(-0.5, v))
    t = torch.where(torch.isnan(t), f32(0.0, v), torch.trunc(t)).clamp(-128.0, 127.0)
    return t.reshape(v.shape), scale


def quantize_columns_fp8(v: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """V as the FP8 paths use it: cast to fp16, per channel amax over the tokens (NaN ignored),
    scale = amax / 2.25, codes = e4m3(v * (2.25 / amax)); an all-zero channel gets NaN codes, as upstream."""
    vh = round_half(v)
    amax = torch.nan_to_num(vh.abs(), nan=0.0).amax(-2, keepdim=True)
    scales = amax / f32(FP8_V_RANGE, v)
    recip = f32(FP8_V_RANGE, v) / amax
    return round_e4m3(vh * recip), scales
