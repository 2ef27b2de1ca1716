"""SpargeApply: tuned parameters applied inside a live model. The attention calls SpargeCapture records are
routed, for the duration of a `with` block, through sparse attention with each head's parameters; every call the
parameter file does not cover runs dense, untouched. A summary says which modules ran sparse, which dense and why.

    with torch.no_grad(), SpargeApply(model, "params.json", engine="reference") as sa:
        model(input_ids)
    print(sa.summary)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

import torch

from . import masks
from .engines import Call, EngineUnavailable, make_engine
from .hooks import AttentionHooks, bind_hf, bind_sdpa, hf_mask_info, sdpa_mask_info
from .identity import CallTracker, EntryNames, Identity
from .matching import GroupIndex
from .params import Group, HeadParams, ParamsFile, read_params

MIN_QUERIES = 128  # SpargeAttn asserts at least 128 query tokens: decode steps run dense in deployment too


class SpargeApplyError(RuntimeError):
    """The parameters cannot be applied to this model as asked (what, where, what to do)."""


@dataclass
class HeadStats:
    """Per query head of one tuned entry, added up over the calls since the last take_stats(). `counts` is
    [Hq, K >= 3]: valid, selected and P·V-computed blocks in its first three columns (one tensor, so that a call
    adds its counts with one operation)."""
    counts: torch.Tensor
    abs_diff: Optional[torch.Tensor] = None
    abs_ref: Optional[torch.Tensor] = None

    @property
    def valid(self) -> torch.Tensor:
        return self.counts[:, 0]

    @property
    def selected(self) -> torch.Tensor:
        return self.counts[:, 1]

    @property
    def computed(self) -> torch.Tensor:
        return self.counts[:, 2]

    def cpu(self) -> "HeadStats":
        move = lambda t: None if t is None else t.cpu()  # noqa: E731
        return HeadStats(self.counts.cpu(), move(self.abs_diff), move(self.abs_ref))

    @staticmethod
    def start(counts: torch.Tensor, abs_diff, abs_ref) -> "HeadStats":
        return HeadStats(counts.clone(), None if abs_diff is None else abs_diff.clone(),
                         None if abs_ref is None else abs_ref.clone())

    def add(self, counts: torch.Tensor, abs_diff, abs_ref) -> None:
        # Counts stay where the engine produced them (no wait for the GPU per call); take_stats() moves them.
        self.counts += counts
        if abs_diff is not None:
            self.abs_diff = abs_diff.clone() if self.abs_diff is None else self.abs_diff + abs_diff
            self.abs_ref = abs_ref.clone() if self.abs_ref is None else self.abs_ref + abs_ref


@dataclass
class SparseModule:
    module: str
    entry: str  # the tuned entry whose parameters ran (its group: `group`)
    group: str
    how: str  # "entry" | "nearest step"
    heads_q: int
    layer: Optional[int] = None
    numerics: List[str] = field(default_factory=list)  # per head, as deployed
    calls: int = 0
    dense_heads: Dict[int, str] = field(default_factory=dict)  # head -> why it runs dense
    stats: Optional[HeadStats] = None


@dataclass
class DenseModule:
    module: str
    why: str
    calls: int = 0


class ApplySummary:
    """Which modules ran sparse (with their tuned entry and dense heads) and which ran dense, with why."""

    def __init__(self, engine: str, params: ParamsFile) -> None:
        self.engine = engine
        self.params = params
        self.sparse: Dict[str, SparseModule] = {}  # by live entry name
        self.dense: Dict[Tuple[str, str], DenseModule] = {}  # by (module, why)
        self.notes: List[str] = []

    @property
    def calls_seen(self) -> int:
        return sum(s.calls for s in self.sparse.values()) + sum(d.calls for d in self.dense.values())

    def as_dict(self) -> dict:
        return {"sparse": [{"module": s.module, "entry": s.entry, "calls": s.calls} for s in self.sparse.values()],
                "dense": [{"module": d.module, "calls": d.calls, "why": d.why} for d in self.dense.values()]}

    def text(self) -> str:
        lines = [f"SpargeApply ({self.engine} engine, {self.params.numerics}, {self.params.geometry}): "
                 f"{len(self.sparse)} module(s) sparse, {len(self.dense)} dense"]
        for name, s in self.sparse.items():
            extra = f" (parameters of {s.entry}, {s.how})" if s.entry != name or s.how != "entry" else ""
            dense = f"; dense heads {_heads_text(s.dense_heads)}" if s.dense_heads else ""
            lines.append(f"  sparse  {s.module} [{name}]{extra}: {s.calls} call(s){dense}")
        for d in self.dense.values():
            lines.append(f"  dense   {d.module}: {d.calls} call(s) — {d.why}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __str__ = text


def _heads_text(dense: Dict[int, str]) -> str:
    by_why: Dict[str, List[int]] = {}
    for h, why in sorted(dense.items()):
        by_why.setdefault(why, []).append(h)
    return "; ".join(f"{', '.join(map(str, hs))} ({why})" for why, hs in by_why.items())


class SpargeApply:
    """Context manager that runs a model's attention calls with tuned SpargeAttn parameters.

    Args:
      model: the model (used for its attention implementation in error messages; may be None).
      params: a parameter file from `sparge tune` (path or ParamsFile).
      engine: "reference" (PyTorch, CPU or GPU), "spargeattn" (SpargeAttn's API, CUDA) or "sparge".
      device: where the reference engine computes (default: where the call's tensors are).
      allow_incomplete: accept a file whose tuning was interrupted ("complete": false); what it lacks runs dense.
      measure: also compute each head's L1 against the exact dense attention of the same call (stats()).
      steps: "nearest" lets a call at an untuned step use the parameters of the nearest tuned step of the same
        module; "exact" runs it dense.
      captures: capture files to read entry identities from (default: those the parameter file names).
      strict: raise on exit when no attention call was seen or none matched.
      observe: run the sparse attention and record its statistics, but hand the model the dense output, so that
        every layer sees the dense model's inputs (per-head figures of two engines on identical inputs).
      counts: record the per-head block counts (take_stats()). counts=False is for deployment: the "sparge"
        engine then asks its kernels for no counters, so that they leave out what only the counters need (the
        P·V-skip vote of heads with λ >= 40, which cannot change the output; Stage 1 of top-k 1 heads); the
        summary still lists what ran sparse and dense. Not with measure=True, whose figures are per-head counts.
    """

    def __init__(self, model: Optional[torch.nn.Module], params: Union[str, ParamsFile], engine: str = "reference",
                 *, device=None, allow_incomplete: bool = False, measure: bool = False, steps: str = "nearest",
                 captures: Optional[List[str]] = None, hf_implementations: Tuple[str, ...] = ("sdpa",),
                 strict: bool = True, observe: bool = False, counts: bool = True) -> None:
        if steps not in ("nearest", "exact"):
            raise ValueError(f"steps={steps!r}: expected 'nearest' or 'exact'")
        if measure and not counts:
            raise ValueError("measure=True records per-head figures with the counts: it needs counts=True")
        self.model = model
        self.params = params if isinstance(params, ParamsFile) else read_params(params)
        self._check_complete(allow_incomplete)
        self.engine = make_engine(engine, device)
        self.engine.configure(self.params)
        self.measure = measure
        self.counts = counts
        self.observe = observe
        self.steps = steps
        self.strict = strict
        self.step = 0
        self.index = GroupIndex(self.params, captures)
        self.summary = ApplySummary(self.engine.name, self.params)
        if self.index.unresolved:
            self.summary.notes.append(f"capture(s) {', '.join(self.index.unresolved)} named by the parameter file "
                                      "were not found: calls are matched by entry name only")
        self._head_params: Dict[str, HeadParams] = {}
        self._lock = threading.Lock()
        self._tracker = CallTracker(on_outer_call=self._new_forward)
        self._hooks = AttentionHooks(self, self._tracker, hf_implementations, self._on_sdpa, self._on_hf)
        self._new_forward()

    def _check_complete(self, allow: bool) -> None:
        p = self.params
        partial = [g for g in p.groups if g.missing_heads()]
        if p.complete or allow:
            return
        lacking = "; ".join(f"group {g.name}: heads {', '.join(map(str, g.missing_heads()))} missing"
                            for g in partial[:8]) or "the entries tuning had not reached yet"
        raise SpargeApplyError(
            f"{p.path}: tuning was interrupted (\"complete\": false) — finish it with `sparge tune --resume "
            f"{p.path}`, or pass allow_incomplete=True (sparge-eval: --allow-incomplete) to run what it holds; "
            f"then these run dense: {lacking}, and every entry the file does not hold")

    # ----- step API and per-forward naming (as SpargeCapture names entries) -----
    def next_step(self) -> int:
        self.step += 1
        return self.step

    def _new_forward(self) -> None:
        self._names = EntryNames()
        self._taken: set = set()
        self._calls_in_step: Dict[int, int] = {}

    def __enter__(self) -> "SpargeApply":
        self._new_forward()
        self._hooks.claim()
        try:
            self._hooks.patch()
        except BaseException:
            self._hooks.unpatch()
            self._hooks.release()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._hooks.unpatch()
        self._hooks.release()
        if exc_type is None and self.strict:
            self.check_matched()

    def check_matched(self) -> None:
        """Raises when the model made no attention call the hook could see, or when none matched the file."""
        if self.summary.calls_seen == 0:
            impl = getattr(getattr(self.model, "config", None), "_attn_implementation", None)
            raise SpargeApplyError(
                "no attention call was seen: SpargeApply routes torch.nn.functional.scaled_dot_product_attention "
                "and transformers' \"sdpa\" attention; " + (f"this model uses \"{impl}\" attention: " if impl else "")
                + "load it with attn_implementation=\"sdpa\" (or call model.set_attn_implementation(\"sdpa\")); "
                "eager attention, flash-attn, xformers and other custom kernels are not seen")
        if not self.summary.sparse:
            seen = sorted({d.module for d in self.summary.dense.values()})[:6]
            whys = sorted({d.why for d in self.summary.dense.values()})[:3]
            entries = [e for g in self.params.groups for e in g.entries][:6]
            raise SpargeApplyError(
                f"{self.params.path}: no attention call of this model matched the parameter file (a file from "
                f"another model?). The model's calls: {', '.join(seen)} ({'; '.join(whys)}); the file's entries: "
                f"{', '.join(entries)}")

    # ----- the hooks -----
    def _on_sdpa(self, original, args, kwargs):
        b = bind_sdpa(args, kwargs)
        q, k, v = b["query"], b["key"], b["value"]
        info = sdpa_mask_info(b, q.shape[-2], k.shape[-2])
        ident = self._tracker.identify(None, info.causal)
        dropout = float(b.get("dropout_p") or 0.0)
        gqa = bool(kwargs.get("enable_gqa", False))
        if q.dim() < 3 or q.shape[:-3] != k.shape[:-3] or (not gqa and k.shape[-3] != q.shape[-3]):
            return self._dense(ident, "a call whose batch or head layout is not [B, H, N, D]", original, args,
                               kwargs)
        out = self._route(ident, q, k, v, info, b.get("scale"), dropout, torch.is_grad_enabled())
        return original(*args, **kwargs) if out is None else out

    def _on_hf(self, original, module, query, key, value, attention_mask, args, kwargs):
        dropout, scaling, is_causal = bind_hf(args, kwargs)
        nq, nkv = query.shape[-2], key.shape[-2]
        info = hf_mask_info(module, attention_mask, nq, nkv, is_causal, kwargs)
        ident = self._tracker.identify(module, info.causal)
        if info.causal and attention_mask is None and nkv > nq:
            key, value = key[:, :, :nq], value[:, :, :nq]  # prefill into a static cache, as transformers crops
        training = bool(getattr(module, "training", False))
        out = self._route(ident, query, key, value, info, scaling, float(dropout or 0.0) if training else 0.0,
                          torch.is_grad_enabled())
        if out is None:
            return original(module, query, key, value, attention_mask, *args, **kwargs)
        return out.transpose(1, 2).contiguous(), None

    def _dense(self, ident: Identity, why: str, original, args, kwargs):
        self._count_dense(ident, why)
        return original(*args, **kwargs)

    def _count_dense(self, ident: Identity, why: str) -> None:
        where = ident.path or "no module"
        with self._lock:
            d = self.summary.dense.setdefault((where, why), DenseModule(where, why))
            d.calls += 1

    def _route(self, ident: Identity, q, k, v, info: masks.MaskInfo, scale, dropout: float,
               grad: bool) -> Optional[torch.Tensor]:
        """The sparse output [B, Hq, Nq, Dv] of a call, or None when it runs dense (recorded with why)."""
        with self._lock:
            index = self._calls_in_step.get(self.step, 0)
            self._calls_in_step[self.step] = index + 1
            name = self._names.name(ident, index, self.step, self._taken)
            self._taken.add(name)
        why = self._dense_reason(q, info, dropout, grad)
        match = None
        if why is None:
            match = self.index.find(name, ident.path, ident.kind, ident.stack, self.step, self.steps == "nearest")
            why = match.why if match.group is None else None
        call = None
        if why is None:
            call = Call(*(_as_bhnd(t) for t in (q, k, v)), info.causal, info.window, scale)
            why = self.engine.unsupported(call)
        if why is not None:
            self._count_dense(ident, why)
            return None
        return self._run(ident, name, match, call, tuple(q.shape))

    def _dense_reason(self, q, info: masks.MaskInfo, dropout: float, grad: bool) -> Optional[str]:
        if not info.expressible:
            return f"its attention mask is {info.description}"
        if dropout > 0:
            return "attention dropout (training mode)"
        if q.shape[-2] < MIN_QUERIES:
            return f"{q.shape[-2]} queries (SpargeAttn needs at least {MIN_QUERIES}; decode steps run dense)"
        if grad and q.requires_grad:
            return "gradients are required (sparse attention here is for inference: use torch.no_grad())"
        return None

    def _run(self, ident: Identity, name: str, match, call: Call, shape) -> torch.Tensor:
        group: Group = match.group
        heads = call.q.shape[1]
        if group.heads_q != heads:
            raise SpargeApplyError(
                f"{self.params.path}: module {ident.path or 'no module'} (entry {name}) has {heads} query heads, but "
                f"group \"{group.name}\" (entry {match.entry}) was tuned for {group.heads_q}: a parameter file "
                "from another model?")
        hp = self._head_params.get(group.name)
        if hp is None:
            hp = self._head_params[group.name] = self.params.head_params(group)
        try:
            run = self.engine.run(call, hp, self.params, self.measure, self.counts)
        except EngineUnavailable as e:
            raise SpargeApplyError(f"module {ident.path} (entry {name}): {e}") from None
        self._record(ident, name, match, hp, run, heads)
        if self.observe:
            return None  # the model goes on with the dense output
        return run.output.reshape(*shape[:-1], call.v.shape[-1])

    def _record(self, ident: Identity, name: str, match, hp: HeadParams, run, heads: int) -> None:
        with self._lock:
            s = self.summary.sparse.get(name)
            if s is None:
                s = self.summary.sparse[name] = SparseModule(ident.path or "no module", match.entry, match.group.name,
                                                             match.how, heads, ident.layer, list(hp.numerics))
                for h in hp.missing:
                    s.dense_heads[h] = "no parameters in the file (tuning interrupted or limited to some heads)"
                for h in range(heads):
                    if h not in s.dense_heads and not bool(hp.sparse[h]):
                        s.dense_heads[h] = "tuned dense (is_sparse false)"
            s.calls += 1
            if run.counts is not None:
                if s.stats is None:
                    s.stats = HeadStats.start(run.counts, run.abs_diff, run.abs_ref)
                else:
                    s.stats.add(run.counts, run.abs_diff, run.abs_ref)

    def take_stats(self) -> Dict[str, SparseModule]:
        """The per-entry statistics since the last call (for one input of an evaluation), then reset."""
        with self._lock:
            out = {}
            for name, s in self.summary.sparse.items():
                if s.stats is not None:
                    out[name] = SparseModule(s.module, s.entry, s.group, s.how, s.heads_q, s.layer, s.numerics,
                                             s.calls, dict(s.dense_heads), s.stats.cpu())
                    s.stats = None
            return out


def _as_bhnd(t: torch.Tensor) -> torch.Tensor:
    if t.dim() == 3:
        return t.unsqueeze(0)
    if t.dim() > 4:
        return t.reshape(-1, *t.shape[-3:])
    return t
