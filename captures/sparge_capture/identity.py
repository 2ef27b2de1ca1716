"""Which module made an attention call: its path in the model, layer index, kind (self/cross) and stack
(encoder/decoder), and a readable entry name from them.

While a capture is active, ``torch.nn.Module.__call__`` is wrapped so that each thread keeps the stack of
module calls in progress with their arguments; the path of a module is then found by walking from the
outermost module called inside the ``with`` block down to it.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

# Keyword arguments that carry the other sequence of a cross-attention call (transformers, diffusers).
_CROSS_KWARGS = ("key_value_states", "encoder_hidden_states", "cross_attention_states", "encoder_states")
# Module names (last path component) used for cross-attention.
_CROSS_NAMES = re.compile(r"(^|_)(encoder_attn|crossattention|cross_attn|crossattn|encdecattention|attn2)$", re.I)
_STACK_NAMES = re.compile(r"(encoder|decoder)$", re.I)


@dataclass
class Identity:
    module: Optional[torch.nn.Module] = None
    path: Optional[str] = None  # e.g. "model.decoder.layers.3.encoder_attn"; None outside any module
    layer: Optional[int] = None  # transformers' layer_idx, else the last number in the path
    kind: str = ""  # "self" | "cross" | "" (unknown)
    stack: str = ""  # "encoder" | "decoder" | "" (unknown)
    stack_from_path: bool = False  # the path names the stack (encoder-decoder models)


class CallTracker:
    """The stack of nn.Module calls in progress, per thread, with their arguments."""

    def __init__(self, on_outer_call: Optional[Callable[[], None]] = None) -> None:
        self._local = threading.local()
        self._relative: Dict[Tuple[int, int], Optional[str]] = {}
        self._original: Optional[Callable] = None
        self._on_outer_call = on_outer_call  # called when a module call starts with no other in progress

    def start(self) -> None:
        tracker = self
        original = torch.nn.Module.__call__
        self._original = original

        def __call__(module, *args, **kwargs):
            stack = tracker._stack()
            if not stack and tracker._on_outer_call is not None:
                tracker._on_outer_call()
            stack.append((module, args, kwargs))
            try:
                return original(module, *args, **kwargs)
            finally:
                stack.pop()

        __call__.__wrapped__ = original  # type: ignore[attr-defined]
        torch.nn.Module.__call__ = __call__

    def stop(self) -> None:
        if self._original is not None:
            torch.nn.Module.__call__ = self._original
            self._original = None
        self._relative.clear()

    def _stack(self) -> List[Tuple[torch.nn.Module, tuple, dict]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def identify(self, module: Optional[torch.nn.Module], causal: bool) -> Identity:
        """Identity of `module` (None: the innermost module in progress, for direct SDPA calls)."""
        stack = self._stack()
        index = len(stack) - 1
        if module is not None:
            index = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][0] is module), -1)
        if index < 0:
            return Identity(module=module)
        owner, args, kwargs = stack[index]
        ident = Identity(module=owner, path=self._path(stack, index))
        ident.layer = _layer_of(owner, ident.path)
        ident.kind = _kind_of(owner, ident.path, kwargs)
        ident.stack, ident.stack_from_path = _stack_of(owner, ident.path, causal)
        return ident

    def _path(self, stack, index: int) -> str:
        """Dotted path from the outermost module of the chain that leads to stack[index]."""
        parts: List[str] = []
        child = stack[index][0]
        for i in range(index - 1, -1, -1):
            rel = self._relative_name(stack[i][0], child)
            if rel is None:
                continue  # not an ancestor (a helper module called on the side)
            if rel:
                parts.append(rel)
            child = stack[i][0]
        return ".".join(reversed(parts)) if parts else type(stack[index][0]).__name__

    def _relative_name(self, parent: torch.nn.Module, child: torch.nn.Module) -> Optional[str]:
        key = (id(parent), id(child))
        if key not in self._relative:
            self._relative[key] = None
            for name, m in parent.named_modules():
                if m is child:
                    self._relative[key] = name
                    break
        return self._relative[key]


def _layer_of(module: torch.nn.Module, path: Optional[str]) -> Optional[int]:
    idx = getattr(module, "layer_idx", None)
    if isinstance(idx, int):
        return idx
    numbers = re.findall(r"(?:^|\.)(\d+)(?=\.|$)", path or "")
    return int(numbers[-1]) if numbers else None


def _kind_of(module: torch.nn.Module, path: Optional[str], kwargs: Dict[str, Any]) -> str:
    explicit = getattr(module, "is_cross_attention", None)
    if isinstance(explicit, bool):  # diffusers' Attention, GPT-2 (joint attention is self-attention)
        return "cross" if explicit else "self"
    if any(torch.is_tensor(kwargs.get(k)) for k in _CROSS_KWARGS):
        return "cross"
    last = (path or "").rsplit(".", 1)[-1]
    return "cross" if _CROSS_NAMES.search(last) else "self"


def _stack_of(module: torch.nn.Module, path: Optional[str], causal: bool) -> Tuple[str, bool]:
    """("encoder" | "decoder" | "", whether the path says so)."""
    for part in reversed((path or "").split(".")[:-1]):
        m = _STACK_NAMES.search(part)
        if m:
            return m.group(1).lower(), True
    if hasattr(module, "config"):  # a transformers module: decoder-only models are causal
        return ("decoder" if causal else "encoder"), False
    return "", False


class EntryNames:
    """Readable, unique entry names: [enc_|dec_]l{layer}[_cross]_s{step}, by module path when two modules
    would share a name, and _2, _3 ... when one module is called again within a step."""

    def __init__(self) -> None:
        self._owner: Dict[str, Optional[str]] = {}  # name -> module path that took it

    def name(self, ident: Identity, call_index: int, step: int, taken) -> str:
        prefix = {"encoder": "enc_", "decoder": "dec_"}.get(ident.stack, "") if ident.stack_from_path else ""
        core = f"l{ident.layer:02d}" if ident.layer is not None else f"c{call_index:03d}"
        base = f"{prefix}{core}{'_cross' if ident.kind == 'cross' else ''}_s{step:03d}"
        if base in self._owner and self._owner[base] != ident.path and ident.path:
            base = f"{ident.path}_s{step:03d}"
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        self._owner.setdefault(base, ident.path)
        return name
