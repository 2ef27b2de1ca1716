"""Capture attention Q/K/V from PyTorch models into Sparge Studio's capture format v1 (HDF5).

Usage::

    from sparge_capture import SpargeCapture

    with SpargeCapture("out.h5", layers=[0, 15, 29], dtype="float16") as cap:
        model(input_ids)                     # LLM: one forward pass

    with SpargeCapture("dit.h5", steps=[0, 10, 49]) as cap:
        for t in timesteps:                  # diffusion transformer: one step per denoising step
            latents = pipe_step(latents, t)
            cap.next_step()

What is recorded is exactly what the attention kernel receives (after rotary embeddings, after any
per-head normalisation), because the hook sits at the kernel call:

* ``torch.nn.functional.scaled_dot_product_attention`` is replaced by a wrapper for the duration of
  the ``with`` block (diffusers, timm, hand-written models).
* Hugging Face transformers' attention-function registry (``ALL_ATTENTION_FUNCTIONS``) gets its
  ``"sdpa"`` entry wrapped, so models loaded with ``attn_implementation="sdpa"`` are recorded once
  with their real layer index and with K/V still holding the KV heads (before ``repeat_kv``). The
  inner SDPA call made by that function is not recorded a second time.

The wrappers call the original function with the original arguments and return its result
untouched: capturing never changes the model's output. A failure while writing is reported as a
warning (and counted in ``cap.errors``) instead of breaking the model run, unless ``strict=True``.

Models run with ``attn_implementation="eager"`` do not call either function and are not captured.

Requires Python >= 3.9, torch, h5py and numpy (transformers is optional).
"""

from __future__ import annotations

import datetime
import math
import platform
import sys
import threading
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import h5py
import numpy as np
import torch
import torch.nn.functional as F

CAPTURE_VERSION = 1
_DTYPES = ("float16", "bfloat16", "float32", "auto")

# Only one capture may patch the globals at a time; nested patching would make restoring order-dependent.
_active_lock = threading.Lock()
_active: Optional["SpargeCapture"] = None


def _to_set(values: Optional[Iterable[int]]) -> Optional[set]:
    if values is None:
        return None
    if isinstance(values, int):
        return {int(values)}
    return {int(v) for v in values}


def _classify_mask(mask: Optional[torch.Tensor], nq: int, nkv: int) -> str:
    """Says whether an explicit attention mask is no mask, a plain causal mask, or something else.

    Causal here means what SDPA's ``is_causal`` means: query i sees keys 0..i (top-left aligned).
    """
    if mask is None:
        return "none"
    with torch.no_grad():
        m = mask.detach()
        if m.dtype == torch.bool:
            allowed = m
        else:
            allowed = m == 0
            # Additive masks use 0 for "keep" and a very negative number or -inf for "drop"; anything
            # else (ALiBi-like biases) cannot be expressed by the capture format.
            dropped = ~allowed
            if bool(dropped.any()) and not bool((m[dropped] < -1e4).all()):
                return "other"
        if allowed.dim() < 2 or allowed.shape[-2:] not in ((nq, nkv), (1, nkv)):
            return "other"
        if bool(allowed.all()):
            return "none"
        if allowed.shape[-2] == nq:
            tril = torch.ones(nq, nkv, dtype=torch.bool, device=allowed.device).tril()
            if bool((allowed == tril).all()):
                return "causal"
    return "other"


class SpargeCapture:
    """Context manager that records Q/K/V of attention calls into a capture v1 HDF5 file.

    Args:
      path: output HDF5 file (created / truncated on enter).
      layers: layer indices to record (None = all). For calls whose layer is unknown (direct SDPA
        calls), the index of the call within the current step stands in for the layer.
      steps: step numbers to record (None = all). Set the step with ``cap.step = n`` or
        ``cap.next_step()``; it starts at 0.
      max_tokens: keep at most this many query and key tokens (the first ones) of each call. A causal
        prefix is a complete causal attention problem; for non-causal calls it is a smaller problem of
        the same kind. Entries that were cut carry ``orig_tokens_q`` / ``orig_tokens_kv``.
      dtype: storage dtype: "float16", "bfloat16" (stored as uint16 + attribute), "float32", or
        "auto" (keep the model's dtype when it is one of those, else float32). A float16 entry whose
        values overflow float16 is stored as float32 instead, with a warning.
      attrs: extra root attributes (provenance: model, text, command...).
      hf_implementations: names in transformers' attention registry to wrap.
      strict: re-raise errors from writing instead of warning.
      compression: h5py compression filter ("gzip" by default, None to disable).
    """

    def __init__(
        self,
        path: str,
        layers: Optional[Iterable[int]] = None,
        steps: Optional[Iterable[int]] = None,
        max_tokens: Optional[int] = None,
        dtype: str = "float16",
        attrs: Optional[Dict[str, Any]] = None,
        hf_implementations: Tuple[str, ...] = ("sdpa",),
        strict: bool = False,
        compression: Optional[str] = "gzip",
        compression_opts: Optional[int] = 4,
    ) -> None:
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        self.path = str(path)
        self.layers = _to_set(layers)
        self.steps = _to_set(steps)
        self.max_tokens = max_tokens
        self.dtype = dtype
        self.attrs = dict(attrs or {})
        self.hf_implementations = tuple(hf_implementations)
        self.strict = strict
        self.compression = compression
        self.compression_opts = compression_opts if compression == "gzip" else None

        self.step = 0
        self.entries: List[str] = []  # names written, in call order
        self.errors = 0
        self.calls_seen = 0
        self._file: Optional[h5py.File] = None
        self._group: Optional[h5py.Group] = None
        self._calls_in_step: Dict[int, int] = {}
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._orig_sdpa: Optional[Callable] = None
        self._hf_registry: Any = None
        self._hf_saved: Dict[str, Tuple[bool, Callable]] = {}

    # ----- step API (diffusion models) -----
    def next_step(self) -> int:
        self.step += 1
        return self.step

    # ----- context manager -----
    def __enter__(self) -> "SpargeCapture":
        global _active
        with _active_lock:
            if _active is not None:
                raise RuntimeError("another SpargeCapture is already active")
            _active = self
        try:
            self._file = h5py.File(self.path, "w")
            self._write_root_attrs()
            self._group = self._file.create_group("entries")
            self._patch()
        except BaseException:
            self._unpatch()
            if self._file is not None:
                self._file.close()
                self._file = None
            with _active_lock:
                _active = None
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        global _active
        try:
            self._unpatch()
        finally:
            try:
                if self._file is not None:
                    self._file.attrs["entries_written"] = len(self.entries)
                    self._file.close()
            finally:
                self._file = None
                self._group = None
                with _active_lock:
                    _active = None

    def set_attrs(self, **attrs: Any) -> None:
        """Adds root attributes (for example provenance known only after the run)."""
        self.attrs.update(attrs)
        if self._file is not None:
            for key, value in attrs.items():
                self._file.attrs[key] = _attr_value(value)

    # ----- patching -----
    def _write_root_attrs(self) -> None:
        a = self._file.attrs
        a["sparge_capture_version"] = np.int64(CAPTURE_VERSION)
        a["created_by"] = "captures/sparge_capture.py"
        a["created_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        a["torch_version"] = str(torch.__version__)
        a["h5py_version"] = h5py.__version__
        a["python_version"] = platform.python_version()
        tf = sys.modules.get("transformers")
        if tf is not None:
            a["transformers_version"] = str(getattr(tf, "__version__", "unknown"))
        a["storage_dtype"] = self.dtype
        if self.max_tokens is not None:
            a["max_tokens"] = np.int64(self.max_tokens)
        for key, value in self.attrs.items():
            a[key] = _attr_value(value)

    def _patch(self) -> None:
        self._orig_sdpa = F.scaled_dot_product_attention
        F.scaled_dot_product_attention = self._make_sdpa_wrapper(self._orig_sdpa)
        registry = _hf_attention_registry()
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
            registry[name] = self._make_hf_wrapper(original, name)

    def _unpatch(self) -> None:
        if self._orig_sdpa is not None:
            F.scaled_dot_product_attention = self._orig_sdpa
            self._orig_sdpa = None
        registry = self._hf_registry
        if registry is not None:
            local = getattr(registry, "_local_mapping", None)
            for name, (had_local, fn) in self._hf_saved.items():
                if local is not None and not had_local:
                    # The original lived in the class-wide mapping: remove our override only.
                    local.pop(name, None)
                else:
                    registry[name] = fn
        self._hf_registry = None
        self._hf_saved = {}

    def _inside_hf(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    def _make_sdpa_wrapper(self, original: Callable) -> Callable:
        capture = self

        def scaled_dot_product_attention(*args, **kwargs):
            if not capture._inside_hf():
                capture._guarded(capture._record_sdpa, args, kwargs)
            # Exactly the caller's arguments, so the result is the one the model would have had.
            return original(*args, **kwargs)

        scaled_dot_product_attention.__wrapped__ = original  # type: ignore[attr-defined]
        scaled_dot_product_attention.__doc__ = original.__doc__
        return scaled_dot_product_attention

    def _make_hf_wrapper(self, original: Callable, impl_name: str) -> Callable:
        capture = self

        def attention_forward(module, query, key, value, attention_mask, *args, **kwargs):
            capture._guarded(capture._record_hf, module, query, key, value, attention_mask, args,
                             kwargs, impl_name)
            capture._local.depth = getattr(capture._local, "depth", 0) + 1
            try:
                return original(module, query, key, value, attention_mask, *args, **kwargs)
            finally:
                capture._local.depth -= 1

        attention_forward.__wrapped__ = original  # type: ignore[attr-defined]
        return attention_forward

    def _guarded(self, fn: Callable, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as e:  # capturing must never break the model run
            self.errors += 1
            if self.strict:
                raise
            warnings.warn(f"SpargeCapture: entry not recorded: {type(e).__name__}: {e}", RuntimeWarning)

    # ----- recording -----
    def _next_call_in_step(self) -> int:
        idx = self._calls_in_step.get(self.step, 0)
        self._calls_in_step[self.step] = idx + 1
        return idx

    def _record_hf(self, module, query, key, value, attention_mask, args, kwargs, impl_name) -> None:
        self.calls_seen += 1
        call_in_step = self._next_call_in_step()
        layer = getattr(module, "layer_idx", None)
        if layer is None:
            layer = call_in_step
            layer_known = False
        else:
            layer = int(layer)
            layer_known = True
        if not self._wanted(layer):
            return
        nq, nkv = query.shape[-2], key.shape[-2]
        scaling = kwargs.get("scaling", args[1] if len(args) > 1 else None)
        dropout = kwargs.get("dropout", args[0] if len(args) > 0 else 0.0)
        is_causal = kwargs.get("is_causal", args[2] if len(args) > 2 else None)
        mask_kind = _classify_mask(attention_mask, nq, nkv) if torch.is_tensor(attention_mask) else (
            "none" if attention_mask is None else "other")
        if kwargs.get("position_bias") is not None:
            mask_kind = "other"  # an additive bias (T5-like) that the format cannot express
        if mask_kind == "causal":
            causal = True
        elif mask_kind == "none":
            if is_causal is None:
                # Mirrors transformers' sdpa_attention_forward: causal when the module says so and
                # more than one query token is processed without an explicit mask.
                causal = bool(nq > 1 and attention_mask is None and getattr(module, "is_causal", True))
            else:
                causal = bool(is_causal) and nq > 1
        else:
            causal = bool(getattr(module, "is_causal", False)) and nq > 1
        if causal and attention_mask is None and nkv > nq:
            # Prefill into a pre-allocated (static) cache: with top-left causal alignment the keys past
            # nq are never seen, and transformers crops them too before calling SDPA.
            key = key[:, :, :nq]
            value = value[:, :, :nq]
        extra = {
            "source": f"transformers.{impl_name}",
            "module": type(module).__name__,
            "attn_mask": mask_kind,
        }
        if dropout and getattr(module, "training", False):
            extra["dropout_p"] = float(dropout)
        self._write_entry(query, key, value, layer, layer_known, causal, scaling, extra)

    def _record_sdpa(self, args, kwargs) -> None:
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
        bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items()})
        query, key, value = bound["query"], bound["key"], bound["value"]
        attn_mask = bound.get("attn_mask")
        dropout_p = bound.get("dropout_p", 0.0)
        is_causal = bound.get("is_causal", False)
        scale = bound.get("scale")
        self.calls_seen += 1
        call_in_step = self._next_call_in_step()
        if not self._wanted(call_in_step):
            return
        nq, nkv = query.shape[-2], key.shape[-2]
        mask_kind = _classify_mask(attn_mask, nq, nkv)
        causal = bool(is_causal) or mask_kind == "causal"
        if is_causal and mask_kind != "none":
            mask_kind = "other"
        extra = {"source": "torch.sdpa", "attn_mask": mask_kind}
        if dropout_p:
            extra["dropout_p"] = float(dropout_p)
        if kwargs.get("enable_gqa"):
            extra["enable_gqa"] = 1
        self._write_entry(query, key, value, call_in_step, False, causal, scale, extra)

    def _wanted(self, layer: int) -> bool:
        if self._group is None:
            return False
        if self.steps is not None and self.step not in self.steps:
            return False
        if self.layers is not None and layer not in self.layers:
            return False
        return True

    def _write_entry(self, q, k, v, layer: int, layer_known: bool, causal: bool,
                     scale: Optional[float], extra: Dict[str, Any]) -> None:
        q, k, v = (_as_bhnd(t) for t in (q, k, v))
        if not (q.shape[0] == k.shape[0] == v.shape[0]):
            raise ValueError(f"batch sizes differ: q {tuple(q.shape)} k {tuple(k.shape)} v {tuple(v.shape)}")
        if q.shape[1] % k.shape[1] != 0 or k.shape[1] != v.shape[1]:
            raise ValueError(f"heads incompatible: q {tuple(q.shape)} k {tuple(k.shape)} v {tuple(v.shape)}")
        orig_nq, orig_nkv = q.shape[2], k.shape[2]
        if self.max_tokens is not None:
            q = q[:, :, : self.max_tokens]
            k = k[:, :, : self.max_tokens]
            v = v[:, :, : self.max_tokens]
        base = f"l{layer:02d}_s{self.step:03d}" if layer_known else f"c{layer:03d}_s{self.step:03d}"
        with self._write_lock:
            name = base
            n = 1
            while name in self._group:
                name = f"{base}_{n}"
                n += 1
            # Convert everything before creating the group, so a failure leaves no half-written entry.
            store_dtype = self._store_dtype(q.dtype)
            arrays = {}
            for label, t in (("q", q), ("k", k), ("v", v)):
                arrays[label], store_dtype_t = _to_numpy(t, store_dtype)
                if store_dtype_t != store_dtype:
                    # float16 overflow: redo all three in float32 so the entry has one dtype
                    store_dtype = store_dtype_t
                    arrays = {}
                    break
            if not arrays:
                for label, t in (("q", q), ("k", k), ("v", v)):
                    arrays[label], _ = _to_numpy(t, store_dtype)
            g = self._group.create_group(name)
            for label, arr in arrays.items():
                ds = g.create_dataset(
                    label, data=arr, chunks=(1, 1, arr.shape[2], arr.shape[3]),
                    compression=self.compression, compression_opts=self.compression_opts,
                    shuffle=self.compression is not None)
                if store_dtype == "bfloat16":
                    ds.attrs["dtype"] = "bfloat16"
            g.attrs["causal"] = np.int64(1 if causal else 0)
            if scale is not None:
                g.attrs["scale"] = np.float64(scale)
            if layer_known:
                g.attrs["layer"] = np.int64(layer)
            else:
                g.attrs["call_index"] = np.int64(layer)
            g.attrs["step"] = np.int64(self.step)
            g.attrs["layout"] = "HND"
            g.attrs["source_dtype"] = str(q.dtype).replace("torch.", "")
            if q.shape[2] != orig_nq or k.shape[2] != orig_nkv:
                g.attrs["orig_tokens_q"] = np.int64(orig_nq)
                g.attrs["orig_tokens_kv"] = np.int64(orig_nkv)
            for key_, val in extra.items():
                g.attrs[key_] = _attr_value(val)
            if extra.get("attn_mask") == "other":
                warnings.warn(f"SpargeCapture: {name}: attention mask is neither none nor causal; the "
                              "capture records only the causal flag", RuntimeWarning)
            self.entries.append(name)

    def _store_dtype(self, source: torch.dtype) -> str:
        if self.dtype != "auto":
            return self.dtype
        return {torch.float16: "float16", torch.bfloat16: "bfloat16"}.get(source, "float32")


def _attr_value(value: Any) -> Any:
    if isinstance(value, bool):
        return np.int64(int(value))
    if isinstance(value, int):
        return np.int64(value)
    if isinstance(value, float):
        return np.float64(value)
    if isinstance(value, (list, tuple)) and all(isinstance(x, int) for x in value):
        return np.asarray(value, dtype=np.int64)
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind not in "US":
        return value
    return str(value)  # also turns str subclasses (torch.__version__) into plain str


def _as_bhnd(t: torch.Tensor) -> torch.Tensor:
    """SDPA's layout is [..., H, N, D]; the capture needs exactly [B, H, N, D]."""
    t = t.detach()
    if t.dim() == 3:
        return t.unsqueeze(0)
    if t.dim() == 4:
        return t
    if t.dim() > 4:
        return t.reshape(-1, *t.shape[-3:])
    raise ValueError(f"attention tensor of rank {t.dim()} (shape {tuple(t.shape)}) cannot be captured")


def _to_numpy(t: torch.Tensor, store: str) -> Tuple[np.ndarray, str]:
    """Copies to host memory in the storage dtype; falls back to float32 when float16 would overflow."""
    t = t.to("cpu")
    if store == "bfloat16":
        raw = t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().view(np.uint16)
        return raw, store
    if store == "float16":
        h = t.to(torch.float16)
        if bool(torch.isinf(h).any()) and not bool(torch.isinf(t).any()):
            warnings.warn("SpargeCapture: values overflow float16; entry stored as float32", RuntimeWarning)
            return t.to(torch.float32).contiguous().numpy(), "float32"
        return h.contiguous().numpy(), store
    return t.to(torch.float32).contiguous().numpy(), "float32"


def _hf_attention_registry() -> Any:
    """transformers' global attention-function registry, or None when transformers is absent/old."""
    tf = sys.modules.get("transformers")
    if tf is None:
        try:
            import transformers  # noqa: F401
        except Exception:
            return None
    try:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    except Exception:
        return None
    return ALL_ATTENTION_FUNCTIONS


def scale_of(head_dim: int) -> float:
    """The default softmax scale the capture format assumes when `scale` is absent."""
    return 1.0 / math.sqrt(head_dim)
