"""What an attention mask means in the capture format: no mask, causal, a local window, or something else.

The format describes masks by two entry attributes: ``causal`` and ``window = [left, right]`` in
FlashAttention's convention (query i sees keys i-left ... i+right, -1 = unbounded, top-left aligned,
causal is right = 0). A mask is recorded only when it is exactly one of those; otherwise it is
described in words so that the caller can warn precisely.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch

# Additive masks use 0 for "keep" and a very negative number (or -inf) for "drop".
_DROP_BELOW = -1e4


@dataclass(frozen=True)
class MaskInfo:
    kind: str  # "none" | "causal" | "window" | "other"
    causal: bool = False
    window: Optional[Tuple[int, int]] = None  # (left, right); None = no window
    description: str = ""  # for "other": what the mask is, in words

    @property
    def expressible(self) -> bool:
        return self.kind != "other"


NO_MASK = MaskInfo("none")


def from_rule(causal: bool, left: Optional[int], right: Optional[int]) -> MaskInfo:
    """The MaskInfo of a visibility rule; left/right None = unbounded on that side."""
    if right == 0:
        causal = True
    if causal:
        right = None  # causal already bounds the right side
    if left is None and right is None:
        return MaskInfo("causal", True) if causal else NO_MASK
    window = (-1 if left is None else int(left), 0 if causal else (-1 if right is None else int(right)))
    return MaskInfo("window", causal, window)


def window_of_module(sliding_window: Optional[int], causal: bool) -> Optional[Tuple[int, int]]:
    """transformers' `sliding_window` W lets query i see keys with i - key < W (and, non-causal, |i - key| < W)."""
    if sliding_window is None or int(sliding_window) <= 0:
        return None
    w = int(sliding_window) - 1
    return (w, 0) if causal else (w, w)


def describe_mask(mask: Optional[torch.Tensor], nq: int, nkv: int) -> MaskInfo:
    """Classifies an SDPA-style mask (bool: True = keep; float: additive) for queries [nq] x keys [nkv]."""
    if mask is None:
        return NO_MASK
    if not torch.is_tensor(mask):
        return MaskInfo("other", description=f"a mask of type {type(mask).__name__}")
    with torch.no_grad():
        m = mask.detach()
        shape = tuple(m.shape)
        if m.dtype == torch.bool:
            allowed = m
        else:
            allowed = m == 0
            dropped = m[~allowed]
            if dropped.numel() and not bool((dropped < _DROP_BELOW).all()):
                bias = dropped[dropped >= _DROP_BELOW]
                return MaskInfo("other", description=(
                    f"an additive float mask {shape} holding a bias (values from {float(bias.min()):.3g} to "
                    f"{float(bias.max()):.3g}, e.g. ALiBi or a relative position bias), which the format "
                    "does not store"))
        if allowed.dim() < 2 or allowed.shape[-1] != nkv or allowed.shape[-2] not in (1, nq):
            return MaskInfo("other", description=f"a mask of shape {shape} for {nq} queries x {nkv} keys")
        flat = allowed.reshape(-1, allowed.shape[-2], nkv)
        if not bool((flat == flat[:1]).all()):
            return MaskInfo("other", description=(
                f"a mask {shape} that differs between batch items or heads (padding?); the format has one "
                "mask per entry"))
        allowed = flat[0]
        if bool(allowed.all()):
            return NO_MASK
        if allowed.shape[0] == 1:
            dropped = int((~allowed).sum())
            return MaskInfo("other", description=(
                f"a key padding mask {shape} ({dropped} of {nkv} keys masked for every query)"))
        return _band(allowed, nq, nkv, shape)


def _band(allowed: torch.Tensor, nq: int, nkv: int, shape: tuple) -> MaskInfo:
    """Fits [left, right] to a 2-D keep-mask and checks the fit element by element."""
    dev = allowed.device
    counts = allowed.sum(dim=1)
    rows = torch.arange(nq, device=dev)
    nonempty = counts > 0
    first = allowed.int().argmax(dim=1)
    last = nkv - 1 - allowed.flip(1).int().argmax(dim=1)
    if not bool((counts[nonempty] == (last - first + 1)[nonempty]).all()):
        return MaskInfo("other", description=f"a mask {shape} whose rows are not contiguous key ranges")
    right = _single(last - rows, nonempty & (last < nkv - 1))
    left = _single(rows - first, nonempty & (first > 0))
    if right == "many" or left == "many":
        return MaskInfo("other", description=_not_a_band(allowed, nq, nkv, shape))
    if (right is not None and right < 0) or (left is not None and left < 0):
        return MaskInfo("other", description=(
            f"a mask {shape} in which queries do not see their own position (window offsets {left}, {right})"))
    q = rows[:, None]
    k = torch.arange(nkv, device=dev)[None, :]
    expected = torch.ones(nq, nkv, dtype=torch.bool, device=dev)
    if right is not None:
        expected &= k <= q + right
    if left is not None:
        expected &= k >= q - left
    if not bool((expected == allowed).all()):
        return MaskInfo("other", description=_not_a_band(allowed, nq, nkv, shape))
    return from_rule(False, left, right)


def _single(values: torch.Tensor, where: torch.Tensor):
    """The one value `values` takes where `where` holds: None when nowhere, "many" when it varies."""
    picked = values[where]
    if picked.numel() == 0:
        return None
    lo, hi = int(picked.min()), int(picked.max())
    return lo if lo == hi else "many"


def _not_a_band(allowed: torch.Tensor, nq: int, nkv: int, shape: tuple) -> str:
    kept = int(allowed.sum())
    return (f"a mask {shape} keeping {kept} of {nq * nkv} (query, key) pairs that is neither causal nor a "
            "window [left, right] around the diagonal (a bottom-right causal mask, as when decoding with a "
            "KV cache, is such a window)")
