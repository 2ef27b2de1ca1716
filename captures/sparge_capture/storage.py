"""Storage dtypes: which one an entry gets, the conversion to numpy, and the error a narrower dtype adds."""

from __future__ import annotations

import math
import warnings
from typing import Dict, Optional, Tuple

import numpy as np
import torch

DTYPES = ("auto", "float16", "bfloat16", "float32")
# Relative errors above this (of q, k, v or of the attention output) get a warning.
ERROR_WARN = 1e-3


def storage_dtype(requested: str, source: torch.dtype) -> str:
    """"auto" keeps the model's compute dtype (float16, bfloat16, float32; anything else as float32)."""
    if requested != "auto":
        return requested
    return {torch.float16: "float16", torch.bfloat16: "bfloat16"}.get(source, "float32")


def narrows(store: str, source: torch.dtype) -> bool:
    """True when storing changes the values (a narrower or differently rounded dtype than the source)."""
    return store != "float32" and storage_dtype("auto", source) != store


def rounded(t: torch.Tensor, store: str) -> torch.Tensor:
    return t.to(getattr(torch, store))


def to_numpy(t: torch.Tensor, store: str) -> np.ndarray:
    t = t.detach().to("cpu")
    if store == "bfloat16":
        return t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().view(np.uint16)
    return t.to(getattr(torch, store)).contiguous().numpy()


def overflows_float16(*tensors: torch.Tensor) -> bool:
    """True when a finite value becomes infinite in float16."""
    return any(bool(torch.isinf(t.to(torch.float16)).any()) and not bool(torch.isinf(t).any()) for t in tensors)


def relative_error(stored: torch.Tensor, source: torch.Tensor) -> float:
    """||stored - source|| / ||source|| (Frobenius, float64)."""
    a, b = stored.double(), source.double()
    den = float(b.norm())
    return float((a - b).norm()) / den if den > 0 else 0.0


def output_error(q, k, v, store: str, causal: bool, window: Optional[Tuple[int, int]], scale: Optional[float],
                 sdpa) -> float:
    """Relative change of the attention output when q, k, v are rounded to `store` (computed in float32)."""
    def attend(q_, k_, v_):
        q_, k_, v_ = (x.float() for x in (q_, k_, v_))
        group = q_.shape[1] // k_.shape[1]
        if group > 1:
            k_, v_ = k_.repeat_interleave(group, 1), v_.repeat_interleave(group, 1)
        mask = _window_mask(q_.shape[2], k_.shape[2], causal, window, q_.device)
        return sdpa(q_, k_, v_, attn_mask=mask, is_causal=causal and mask is None, scale=scale)

    with torch.no_grad():
        ref = attend(q, k, v)
        got = attend(*(rounded(x, store) for x in (q, k, v)))
        ok = torch.isfinite(ref) & torch.isfinite(got)  # rows that see no key are NaN in both
        return relative_error(got[ok], ref[ok])


def _window_mask(nq: int, nkv: int, causal: bool, window, device) -> Optional[torch.Tensor]:
    if window is None:
        return None
    left, right = window
    q = torch.arange(nq, device=device)[:, None]
    k = torch.arange(nkv, device=device)[None, :]
    keep = torch.ones(nq, nkv, dtype=torch.bool, device=device)
    if causal or right >= 0:
        keep &= k <= q + (0 if causal else right)
    if left >= 0:
        keep &= k >= q - left
    return keep


def precision_report(q, k, v, store: str, causal: bool, window, scale, sdpa) -> Dict[str, float]:
    """Relative errors of storing q, k, v as `store`: per tensor and of the attention output."""
    errs = {f"rel_error_{n}": relative_error(rounded(t, store), t) for n, t in (("q", q), ("k", k), ("v", v))}
    errs["rel_error_out"] = output_error(q, k, v, store, causal, window, scale, sdpa)
    return errs


def warn_precision(name: str, where: str, source: torch.dtype, store: str, errs: Dict[str, float],
                   k: torch.Tensor) -> None:
    worst = max(errs.values())
    if not math.isfinite(worst) or worst <= ERROR_WARN:
        return
    src = str(source).replace("torch.", "")
    warnings.warn(
        f"SpargeCapture: {name} ({where}): storing {src} as {store} changes the attention output by "
        f"{errs['rel_error_out']:.1e} (relative; q {errs['rel_error_q']:.1e}, k {errs['rel_error_k']:.1e}, "
        f"v {errs['rel_error_v']:.1e}; largest |k| = {float(k.abs().max()):.3g}), above {ERROR_WARN:g}. "
        f"Pass dtype=\"auto\" (keeps {src}) for a faithful capture; the errors are stored as rel_error_* "
        "attributes", RuntimeWarning)
