"""The attention entry points that SpargeCapture records and SpargeApply replaces, patched for the duration of a
`with` block: torch's scaled_dot_product_attention, entries of transformers' attention-function registry, and
torch.nn.Module.__call__ (to know which module made a call). Only one patcher can be active at a time, so that
restoring never depends on the order of exits."""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Dict, Optional, Tuple

import torch.nn.functional as F

from . import masks
from .identity import CallTracker

_active_lock = threading.Lock()
_active: Optional[object] = None

# on_sdpa(original, args, kwargs) -> output; on_hf(original, module, q, k, v, attention_mask, args, kwargs)
SdpaHandler = Callable[..., Any]
HfHandler = Callable[..., Any]


class AttentionHooks:
    def __init__(self, owner: object, tracker: CallTracker, hf_implementations: Tuple[str, ...],
                 on_sdpa: SdpaHandler, on_hf: HfHandler) -> None:
        self.owner = owner
        self.tracker = tracker
        self.hf_implementations = tuple(hf_implementations)
        self.on_sdpa = on_sdpa
        self.on_hf = on_hf
        self.orig_sdpa: Optional[Callable] = None
        self._local = threading.local()
        self._hf_registry: Any = None
        self._hf_saved: Dict[str, Tuple[bool, Callable]] = {}

    def claim(self) -> None:
        global _active
        with _active_lock:
            if _active is not None:
                raise RuntimeError(f"another {type(_active).__name__} is already active; only one capture or "
                                   "apply block can patch the attention functions at a time")
            _active = self.owner

    def release(self) -> None:
        global _active
        with _active_lock:
            if _active is self.owner:
                _active = None

    def patch(self) -> None:
        self.tracker.start()
        self.orig_sdpa = F.scaled_dot_product_attention
        F.scaled_dot_product_attention = self._sdpa_wrapper(self.orig_sdpa)
        registry = hf_attention_registry()
        if registry is None:
            return
        self._hf_registry = registry
        for name in self.hf_implementations:
            try:
                original = registry[name]
            except KeyError:
                continue
            local = getattr(registry, "_local_mapping", None)
            had_local = local is not None and name in local
            self._hf_saved[name] = (had_local, local[name] if had_local else original)
            registry[name] = self._hf_wrapper(original)

    def unpatch(self) -> None:
        self.tracker.stop()
        if self.orig_sdpa is not None:
            F.scaled_dot_product_attention = self.orig_sdpa
            self.orig_sdpa = None
        registry = self._hf_registry
        if registry is not None:
            local = getattr(registry, "_local_mapping", None)
            for name, (had_local, fn) in self._hf_saved.items():
                if local is not None and not had_local:
                    local.pop(name, None)  # the original lived in the class-wide mapping: remove our override
                else:
                    registry[name] = fn
        self._hf_registry = None
        self._hf_saved = {}

    def inside_hf(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    def _sdpa_wrapper(self, original: Callable) -> Callable:
        hooks = self

        def scaled_dot_product_attention(*args, **kwargs):
            if hooks.inside_hf():  # the SDPA call made by a registry function already handled
                return original(*args, **kwargs)
            return hooks.on_sdpa(original, args, kwargs)

        scaled_dot_product_attention.__wrapped__ = original  # type: ignore[attr-defined]
        scaled_dot_product_attention.__doc__ = original.__doc__
        return scaled_dot_product_attention

    def _hf_wrapper(self, original: Callable) -> Callable:
        hooks = self

        def counted(*args, **kwargs):
            hooks._local.depth = getattr(hooks._local, "depth", 0) + 1
            try:
                return original(*args, **kwargs)
            finally:
                hooks._local.depth -= 1

        def attention_forward(module, query, key, value, attention_mask, *args, **kwargs):
            return hooks.on_hf(counted, module, query, key, value, attention_mask, args, kwargs)

        attention_forward.__wrapped__ = original  # type: ignore[attr-defined]
        return attention_forward


def hf_attention_registry() -> Any:
    """transformers' global attention-function registry, or None when transformers is absent/old."""
    if sys.modules.get("transformers") is None:
        try:
            import transformers  # noqa: F401
        except Exception:
            return None
    try:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    except Exception:
        return None
    return ALL_ATTENTION_FUNCTIONS


def bind_sdpa(args, kwargs) -> Dict[str, Any]:
    """SDPA's arguments by name."""
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


def bind_hf(args, kwargs) -> Tuple[Any, Any, Optional[bool]]:
    """(dropout, scaling, is_causal) of a transformers attention function's call."""
    dropout = kwargs.get("dropout", args[0] if len(args) > 0 else 0.0)
    scaling = kwargs.get("scaling", args[1] if len(args) > 1 else None)
    is_causal = kwargs.get("is_causal", args[2] if len(args) > 2 else None)
    return dropout, scaling, is_causal


def sdpa_mask_info(bound: Dict[str, Any], nq: int, nkv: int) -> masks.MaskInfo:
    """The mask of an SDPA call: its attn_mask, or its is_causal (top-left aligned, as SDPA's)."""
    info = masks.describe_mask(bound.get("attn_mask"), nq, nkv)
    if bound.get("is_causal", False):
        # With an explicit mask as well SDPA refuses the call.
        info = masks.from_rule(True, None, None) if info.kind == "none" else masks.MaskInfo(
            "other", description="is_causal together with an explicit mask")
    return info


def hf_mask_info(module, attention_mask, nq: int, nkv: int, is_causal: Optional[bool], kwargs) -> masks.MaskInfo:
    """The mask of a transformers attention-function call."""
    info = masks.describe_mask(attention_mask, nq, nkv)
    if kwargs.get("position_bias") is not None:
        info = masks.MaskInfo("other", description="a T5-style position bias added to the scores")
    if info.kind == "none" and attention_mask is None:
        # Mirrors transformers' sdpa_attention_forward: causal when the module says so and more than
        # one query token is processed without an explicit mask.
        causal = getattr(module, "is_causal", True) if is_causal is None else bool(is_causal)
        info = masks.from_rule(bool(causal) and nq > 1, None, None)
    return info
