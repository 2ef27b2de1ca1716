"""The SpargeCapture context manager: patches the attention entry points, records each call as an entry."""

from __future__ import annotations

import datetime
import platform
import sys
import threading
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import h5py
import numpy as np
import torch

from . import masks, storage
from .grid import call_grid_attrs
from .hooks import AttentionHooks, bind_hf, bind_sdpa, hf_mask_info, sdpa_mask_info
from .identity import CallTracker, EntryNames, Identity

CAPTURE_VERSION = 1
__version__ = "1.2.0"

def _to_set(values: Optional[Iterable[int]]) -> Optional[set]:
    if values is None:
        return None
    if isinstance(values, int):
        return {int(values)}
    return {int(v) for v in values}


class SpargeCapture:
    """Context manager that records Q/K/V of attention calls into a capture v1 HDF5 file.

    Args:
      path: output HDF5 file (created / truncated on enter).
      layers: layer indices to record (None = all): transformers' layer index, else the last number of
        the module path (``blocks.3.attn`` -> 3), else the index of the call within the current step.
      steps: step numbers to record (None = all). Set the step with ``cap.step = n`` or
        ``cap.next_step()``; it starts at 0.
      max_tokens: keep at most this many query and key tokens (the first ones) of each call. A causal
        or windowed prefix is a complete problem of the same kind; entries that were cut carry
        ``orig_tokens_q`` / ``orig_tokens_kv``.
      dtype: storage dtype. "auto" (default) keeps the model's compute dtype: bfloat16 as bfloat16,
        float16 as float16, float32 as float32. "float16", "bfloat16" (stored as uint16 + attribute) or
        "float32" force one; when that changes the values, the relative error of q, k, v and of the
        attention output is measured and stored (``rel_error_*``), with a warning above 1e-3. A float16
        entry whose values overflow float16 is stored as float32, with a warning.
      attrs: extra root attributes (provenance: model, text, command...).
      hf_implementations: names in transformers' attention registry to wrap.
      strict: re-raise errors from writing, and masks the format cannot describe, instead of warning.
      compression: h5py compression filter ("gzip" by default, None to disable).
      grid: the token grid of image / video calls (a ``TokenGrid``, see ``grid.py``), recorded on every call
        it fits; or a callable ``grid(identity, tokens_q, tokens_kv)`` returning a TokenGrid or None.
    """

    def __init__(
        self,
        path: str,
        layers: Optional[Iterable[int]] = None,
        steps: Optional[Iterable[int]] = None,
        max_tokens: Optional[int] = None,
        dtype: str = "auto",
        attrs: Optional[Dict[str, Any]] = None,
        hf_implementations: Tuple[str, ...] = ("sdpa",),
        strict: bool = False,
        compression: Optional[str] = "gzip",
        compression_opts: Optional[int] = 4,
        grid: Any = None,
    ) -> None:
        if dtype not in storage.DTYPES:
            raise ValueError(f"dtype must be one of {storage.DTYPES}, got {dtype!r}")
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
        self.grid = grid

        self.step = 0
        self.entries: List[str] = []  # names written, in call order
        self.errors = 0
        self.calls_seen = 0
        self._file: Optional[h5py.File] = None
        self._group: Optional[h5py.Group] = None
        self._calls_in_step: Dict[int, int] = {}
        self._write_lock = threading.Lock()
        self._tracker = CallTracker()
        self._hooks = AttentionHooks(self, self._tracker, self.hf_implementations, self._on_sdpa, self._on_hf)
        self._names = EntryNames()

    # ----- step API (diffusion models) -----
    def next_step(self) -> int:
        self.step += 1
        return self.step

    # ----- context manager -----
    def __enter__(self) -> "SpargeCapture":
        self._hooks.claim()
        try:
            self._file = h5py.File(self.path, "w")
            self._write_root_attrs()
            self._group = self._file.create_group("entries")
            self._hooks.patch()
        except BaseException:
            self._hooks.unpatch()
            if self._file is not None:
                self._file.close()
                self._file = None
            self._hooks.release()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self._hooks.unpatch()
        finally:
            try:
                if self._file is not None:
                    self._file.attrs["entries_written"] = len(self.entries)
                    self._file.close()
            finally:
                self._file = None
                self._group = None
                self._hooks.release()

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
        a["created_by"] = f"sparge_capture {__version__}"
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

    def _on_sdpa(self, original: Callable, args, kwargs):
        self._guarded(self._record_sdpa, args, kwargs)
        # Exactly the caller's arguments, so the result is the one the model would have had.
        return original(*args, **kwargs)

    def _on_hf(self, original: Callable, module, query, key, value, attention_mask, args, kwargs):
        self._guarded(self._record_hf, module, query, key, value, attention_mask, args, kwargs)
        return original(module, query, key, value, attention_mask, *args, **kwargs)

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

    def _record_hf(self, module, query, key, value, attention_mask, args, kwargs) -> None:
        self.calls_seen += 1
        call_index = self._next_call_in_step()
        nq, nkv = query.shape[-2], key.shape[-2]
        dropout, scaling, is_causal = bind_hf(args, kwargs)
        info = hf_mask_info(module, attention_mask, nq, nkv, is_causal, kwargs)
        module_causal = bool(getattr(module, "is_causal", False)) and nq > 1
        ident = self._tracker.identify(module, info.causal if info.expressible else module_causal)
        if not self._wanted(ident.layer if ident.layer is not None else call_index):
            return
        configured = masks.window_of_module(kwargs.get("sliding_window", getattr(module, "sliding_window", None)),
                                            info.causal if info.expressible else module_causal)
        if info.causal and attention_mask is None and nkv > nq:
            # Prefill into a pre-allocated (static) cache: with top-left causal alignment the keys past
            # nq are never seen, and transformers crops them too before calling SDPA.
            key, value = key[:, :, :nq], value[:, :, :nq]
        extra = {"source": "transformers.sdpa", "module_class": type(module).__name__}
        if dropout and getattr(module, "training", False):
            extra["dropout_p"] = float(dropout)
        self._write_entry(query, key, value, ident, call_index, self._settle_mask(info, configured, module_causal),
                          scaling, extra)

    def _record_sdpa(self, args, kwargs) -> None:
        bound = bind_sdpa(args, kwargs)
        query, key, value = bound["query"], bound["key"], bound["value"]
        is_causal = bool(bound.get("is_causal", False))
        self.calls_seen += 1
        call_index = self._next_call_in_step()
        info = sdpa_mask_info(bound, query.shape[-2], key.shape[-2])
        ident = self._tracker.identify(None, info.causal)
        if not self._wanted(ident.layer if ident.layer is not None else call_index):
            return
        extra = {"source": "torch.sdpa"}
        if ident.module is not None:
            extra["module_class"] = type(ident.module).__name__
        if bound.get("dropout_p"):
            extra["dropout_p"] = float(bound["dropout_p"])
        if kwargs.get("enable_gqa"):
            extra["enable_gqa"] = 1
        self._write_entry(query, key, value, ident, call_index, self._settle_mask(info, None, is_causal),
                          bound.get("scale"), extra)

    def _settle_mask(self, seen: masks.MaskInfo, configured: Optional[Tuple[int, int]],
                     module_causal: bool) -> Tuple[masks.MaskInfo, Optional[str]]:
        """The mask to record, and a problem to report (None when the record is exact)."""
        if not seen.expressible:
            fallback = masks.MaskInfo("window", module_causal, configured) if configured else \
                masks.from_rule(module_causal, None, None)
            return fallback, seen.description
        if configured is None:
            return seen, None
        if seen.kind == "window":
            if seen.window != configured:
                warnings.warn(f"SpargeCapture: the mask is the window {list(seen.window)} but the module is "
                              f"configured for {list(configured)}; the mask (what was computed) is recorded",
                              RuntimeWarning)
            return seen, None
        # No mask was needed at this length (the window covers the whole sequence): record the module's
        # window, which the attention has all the same.
        return masks.MaskInfo("window", seen.causal, configured), None

    def _wanted(self, layer: int) -> bool:
        if self._group is None:
            return False
        if self.steps is not None and self.step not in self.steps:
            return False
        if self.layers is not None and layer not in self.layers:
            return False
        return True

    def _write_entry(self, q, k, v, ident: Identity, call_index: int,
                     settled: Tuple[masks.MaskInfo, Optional[str]], scale: Optional[float],
                     extra: Dict[str, Any]) -> None:
        info, problem = settled
        q, k, v = (_as_bhnd(t) for t in (q, k, v))
        if not (q.shape[0] == k.shape[0] == v.shape[0]):
            raise ValueError(f"batch sizes differ: q {tuple(q.shape)} k {tuple(k.shape)} v {tuple(v.shape)}")
        if q.shape[1] % k.shape[1] != 0 or k.shape[1] != v.shape[1]:
            raise ValueError(f"heads incompatible: q {tuple(q.shape)} k {tuple(k.shape)} v {tuple(v.shape)}")
        orig_nq, orig_nkv = q.shape[2], k.shape[2]
        if self.max_tokens is not None:
            q, k, v = (t[:, :, : self.max_tokens] for t in (q, k, v))
        with self._write_lock:
            name = self._names.name(ident, call_index, self.step, self._group)
            where = ident.path or "no module"
            if problem is not None:
                message = (f"SpargeCapture: {name} ({where}): the attention mask is {problem}; the entry records "
                           f"causal={int(info.causal)}" + (f" and window {list(info.window)}" if info.window else "")
                           + " from the module, so Sparge's masks will differ from the model's")
                if self.strict:
                    raise ValueError(message)
                warnings.warn(message, RuntimeWarning)
            store = storage.storage_dtype(self.dtype, q.dtype)
            if store == "float16" and storage.overflows_float16(q, k, v):
                warnings.warn(f"SpargeCapture: {name} ({where}): values overflow float16; entry stored as float32",
                              RuntimeWarning)
                store = "float32"
            errs = {}
            if storage.narrows(store, q.dtype):
                errs = storage.precision_report(q, k, v, store, info.causal, info.window, scale, self._hooks.orig_sdpa)
                storage.warn_precision(name, where, q.dtype, store, errs, k)
            # Convert everything before creating the group, so a failure leaves no half-written entry.
            arrays = {label: storage.to_numpy(t, store) for label, t in (("q", q), ("k", k), ("v", v))}
            g = self._group.create_group(name)
            for label, arr in arrays.items():
                ds = g.create_dataset(
                    label, data=arr, chunks=(1, 1, arr.shape[2], arr.shape[3]),
                    compression=self.compression, compression_opts=self.compression_opts,
                    shuffle=self.compression is not None)
                if store == "bfloat16":
                    ds.attrs["dtype"] = "bfloat16"
            attrs = _entry_attrs(ident, call_index, self.step, info, scale, q.dtype, errs)
            if q.shape[2] != orig_nq or k.shape[2] != orig_nkv:
                attrs.update(orig_tokens_q=orig_nq, orig_tokens_kv=orig_nkv)
            if problem is not None:
                attrs["attn_mask"] = "other: " + problem
            attrs.update(call_grid_attrs(self.grid, ident, q.shape[2], k.shape[2]))
            attrs.update(extra)
            for key_, val in attrs.items():
                g.attrs[key_] = _attr_value(val)
            self.entries.append(name)


def _entry_attrs(ident: Identity, call_index: int, step: int, info: masks.MaskInfo, scale, source_dtype,
                 errs: Dict[str, float]) -> Dict[str, Any]:
    a: Dict[str, Any] = {"causal": int(info.causal), "step": step, "layout": "HND",
                         "source_dtype": str(source_dtype).replace("torch.", ""), "attn_mask": info.kind}
    if info.window is not None:
        a["window"] = np.asarray(info.window, dtype=np.int64)
    if scale is not None:
        a["scale"] = float(scale)
    if ident.layer is not None:
        a["layer"] = ident.layer
    a["call_index"] = call_index
    for key, value in (("module", ident.path), ("kind", ident.kind), ("stack", ident.stack)):
        if value:
            a[key] = value
    a.update(errs)
    return a


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
