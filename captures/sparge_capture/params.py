"""The tuned-parameter file (params.json v1, written by `sparge tune`): a strict reader whose errors name the
file and the JSON pointer of the bad value, and the per-head parameter tensors of a group."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch

from .reference.numerics import NUMERICS

PARAMS_VERSION = 1
FALLBACKS = ("off", "head", "entry", "layer")


class ParamsError(ValueError):
    """A parameter file that cannot be used as it is (what, where, what to do)."""


@dataclass
class Head:
    head: int
    is_sparse: bool
    theta: float
    tau: Optional[float]
    topk: Optional[float]
    lam: float
    numerics: str
    l1: Optional[float] = None  # the tuner's figures on the inputs it was tuned on
    sparsity: Optional[float] = None


@dataclass
class Group:
    name: str
    entries: List[str]
    layer: Optional[int]
    heads_q: int
    complete: bool
    heads: Dict[int, Head]
    tuned_on: List[dict] = field(default_factory=list)

    def missing_heads(self) -> List[int]:
        return [h for h in range(self.heads_q) if h not in self.heads]


@dataclass
class HeadParams:
    """Per-query-head parameters of one group as tensors [Hq], ready for the engines."""
    mode: str
    theta: torch.Tensor
    tau: torch.Tensor
    topk: torch.Tensor
    lam: torch.Tensor
    sparse: torch.Tensor  # bool
    numerics: List[str]
    missing: List[int]  # heads absent from the file: run dense


@dataclass
class ParamsFile:
    path: str
    complete: bool
    capture: str
    mode: str
    l1: float
    l2: float
    geometry: str
    numerics: str
    smooth_k: bool
    sink: bool
    diagonal: bool
    exact_fallback: str
    groups: List[Group]

    def head_params(self, group: Group) -> HeadParams:
        heads = [group.heads.get(h) for h in range(group.heads_q)]

        def column(get, default):
            return torch.tensor([default if x is None else get(x) for x in heads], dtype=torch.float64)

        return HeadParams(
            self.mode, column(lambda x: x.theta, 1.0), column(lambda x: x.tau if x.tau is not None else 1.0, 1.0),
            column(lambda x: x.topk if x.topk is not None else 1.0, 1.0), column(lambda x: x.lam, math.inf),
            torch.tensor([x is not None and x.is_sparse for x in heads]),
            [self.numerics if x is None else x.numerics for x in heads], group.missing_heads())

    def exact_heads(self) -> int:
        return sum(1 for g in self.groups for h in g.heads.values() if h.numerics == "none" != self.numerics)


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, pointer: str, problem: str):
        raise ParamsError(f"{self.path}:{pointer or '/'}: {problem}")

    def get(self, obj, pointer: str, key: str, kind, required: bool = True, default=None):
        if not isinstance(obj, dict):
            self.fail(pointer, "expected a JSON object")
        if key not in obj:
            if required:
                self.fail(f"{pointer}/{key}", f'missing key "{key}" — re-create the file with sparge tune')
            return default
        value = obj[key]
        ok = {"number": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x),
              "int": lambda x: isinstance(x, int) and not isinstance(x, bool),
              "bool": lambda x: isinstance(x, bool), "str": lambda x: isinstance(x, str),
              "list": lambda x: isinstance(x, list)}[kind](value)
        if not ok:
            self.fail(f"{pointer}/{key}", f"expected {'a finite number' if kind == 'number' else 'a ' + kind}, "
                                          f"got {json.dumps(value)[:40]}")
        return value


def _head(rd: _Reader, jh, hp: str, group_heads: int, mode: str, numerics: str) -> Head:
    head = rd.get(jh, hp, "head", "int")
    if not 0 <= head < group_heads:
        rd.fail(f"{hp}/head", f"head {head} out of range [0, {group_heads})")
    tau = rd.get(jh, hp, "cdfthreshd", "number") if mode == "cdf" else None
    topk = rd.get(jh, hp, "topk", "number") if mode == "topk" else None
    if tau is not None and not 0 <= tau <= 1:
        rd.fail(f"{hp}/cdfthreshd", "must be in [0, 1]")
    if topk is not None and not 0 < topk <= 1:
        rd.fail(f"{hp}/topk", "must be in (0, 1]")
    lam = rd.get(jh, hp, "pvthreshd", "number")
    if lam < 0:
        rd.fail(f"{hp}/pvthreshd", "must be >= 0")
    own = rd.get(jh, hp, "numerics", "str", required=False, default=numerics)
    if own not in NUMERICS:
        rd.fail(f"{hp}/numerics", f"unknown numerics {own!r} (expected {', '.join(NUMERICS)})")
    return Head(head, rd.get(jh, hp, "is_sparse", "bool"), rd.get(jh, hp, "simthreshd1", "number"), tau, topk,
                lam, own, rd.get(jh, hp, "l1", "number", required=False),
                rd.get(jh, hp, "sparsity", "number", required=False))


def _group(rd: _Reader, jg, gp: str, mode: str, numerics: str) -> Group:
    entries = rd.get(jg, gp, "entries", "list")
    if not entries or not all(isinstance(e, str) for e in entries):
        rd.fail(f"{gp}/entries", "expected a non-empty array of entry names")
    layer = jg.get("layer") if isinstance(jg, dict) else None
    if layer is not None and (not isinstance(layer, int) or isinstance(layer, bool)):
        rd.fail(f"{gp}/layer", "expected an integer or null")
    heads_q = rd.get(jg, gp, "heads_q", "int")
    if heads_q <= 0:
        rd.fail(f"{gp}/heads_q", "must be positive")
    heads: Dict[int, Head] = {}
    for i, jh in enumerate(rd.get(jg, gp, "heads", "list")):
        h = _head(rd, jh, f"{gp}/heads/{i}", heads_q, mode, numerics)
        if h.head in heads:
            rd.fail(f"{gp}/heads/{i}/head", f"duplicate head {h.head}")
        heads[h.head] = h
    tuned_on = jg.get("tuned_on", []) if isinstance(jg.get("tuned_on", []), list) else []
    return Group(rd.get(jg, gp, "name", "str"), list(entries), layer, heads_q,
                 rd.get(jg, gp, "complete", "bool", required=False, default=True), heads, tuned_on)


def read_params(path: str) -> ParamsFile:
    """Reads and checks a parameter file; a ParamsError names the file, the JSON pointer and the fix."""
    rd = _Reader(str(path))
    try:
        with open(path, encoding="utf-8") as f:
            root = json.load(f)
    except OSError as e:
        raise ParamsError(f"{path}: cannot read the parameter file ({e.strerror})") from None
    except ValueError as e:
        raise ParamsError(f"{path}: not valid JSON ({e}) — fix the file or re-create it with sparge tune") from None
    version = rd.get(root, "", "sparge_params_version", "int")
    if version != PARAMS_VERSION:
        rd.fail("/sparge_params_version", f"unsupported version {version} (this package reads {PARAMS_VERSION})")
    mode = rd.get(root, "", "mode", "str")
    if mode not in ("cdf", "topk"):
        rd.fail("/mode", f'unknown mode "{mode}" (expected "cdf" or "topk")')
    numerics = rd.get(root, "", "numerics", "str", required=False, default="none")
    if numerics not in NUMERICS:
        rd.fail("/numerics", f"unknown numerics {numerics!r} (expected {', '.join(NUMERICS)})")
    geometry = rd.get(root, "", "geometry", "str")
    if geometry not in ("128x64", "64x128"):
        rd.fail("/geometry", f'unknown geometry "{geometry}" (expected "128x64" or "64x128")')
    fallback = rd.get(root, "", "exact_fallback", "str", required=False, default="off")
    if fallback not in FALLBACKS:
        rd.fail("/exact_fallback", f"unknown value {fallback!r} (expected {', '.join(FALLBACKS)})")
    groups = [_group(rd, jg, f"/groups/{i}", mode, numerics) for i, jg in enumerate(rd.get(root, "", "groups", "list"))]
    return ParamsFile(str(path), rd.get(root, "", "complete", "bool", required=False, default=True),
                      rd.get(root, "", "capture", "str", required=False, default=""), mode,
                      rd.get(root, "", "l1", "number"), rd.get(root, "", "l2", "number"), geometry, numerics,
                      rd.get(root, "", "smooth_k", "bool"), rd.get(root, "", "sink", "bool"),
                      rd.get(root, "", "diagonal", "bool", required=False, default=False), fallback, groups)
