"""Which group of a parameter file an attention call of a live model belongs to: by the identity the capture
gave its entry (module path, kind, stack, layer, step and the entry name built from them), never by call order
alone. The capture files a parameter file was tuned on are read, when they can be found, for the module path of
every entry; without them calls are matched by entry name."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import h5py

from .params import Group, ParamsFile

_STEP = re.compile(r"^(?P<base>.*)_s(?P<step>\d{3,})(?P<again>_\d+)?$")
IDENTITY_ATTRS = ("module", "kind", "stack", "layer", "step")


def split_name(name: str) -> Tuple[str, Optional[int]]:
    """("l03" + repeat suffix, step) of an entry name made by the capture hook; (name, None) otherwise."""
    m = _STEP.match(name)
    if not m:
        return name, None
    return m.group("base") + (m.group("again") or ""), int(m.group("step"))


@dataclass
class Tuned:
    """One entry a group was tuned on."""
    name: str
    group: Group
    module: Optional[str]  # from the capture, when it was found
    kind: Optional[str]
    stack: Optional[str]


@dataclass
class Match:
    group: Optional[Group]
    entry: Optional[str]  # the tuned entry whose parameters run
    how: str  # "entry" | "nearest step" | "" (no match)
    why: str = ""  # for no match: the reason, in words


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _resolve(path: str, params_path: str) -> Optional[str]:
    if not path:
        return None
    for candidate in (path, os.path.join(os.path.dirname(os.path.abspath(params_path)), path)):
        if os.path.isfile(candidate):
            return candidate
    return None


def _capture_attrs(path: str) -> Dict[str, dict]:
    try:
        with h5py.File(path, "r") as f:
            return {name: {k: _text(g.attrs[k]) for k in IDENTITY_ATTRS if k in g.attrs}
                    for name, g in f.get("entries", {}).items()}
    except OSError:
        return {}


class GroupIndex:
    def __init__(self, params: ParamsFile, captures: Optional[List[str]] = None) -> None:
        self.params = params
        self.unresolved: List[str] = []  # captures named by the file that were not found
        attrs = self._load_attrs(params, captures)
        self.by_name: Dict[str, Tuned] = {}
        self.by_base: Dict[str, List[Tuple[int, Tuned]]] = {}
        for g in params.groups:
            for e in g.entries:
                a = attrs.get(e, {})
                t = Tuned(e, g, a.get("module"), a.get("kind"), a.get("stack"))
                self.by_name.setdefault(e, t)
                base, step = split_name(e)
                if step is not None:
                    self.by_base.setdefault(base, []).append((step, t))
        self.identified = bool(attrs)

    def _load_attrs(self, params: ParamsFile, captures: Optional[List[str]]) -> Dict[str, dict]:
        named = list(captures or [])
        if not named:
            named = [params.capture] + [t.get("capture", "") for g in params.groups for t in g.tuned_on]
        attrs: Dict[str, dict] = {}
        for path in dict.fromkeys(p for p in named if p):
            found = _resolve(path, params.path)
            if found is None:
                self.unresolved.append(path)
                continue
            for name, a in _capture_attrs(found).items():
                attrs.setdefault(name, a)
        return attrs

    def find(self, name: str, module: Optional[str], kind: str, stack: str, step: int, nearest: bool) -> Match:
        t = self.by_name.get(name)
        if t is not None:
            clash = self._clash(t, module, kind, stack)
            if clash:
                return Match(None, None, "", clash)
            return Match(t.group, t.name, "entry")
        base, _ = split_name(name)
        others = [(s, t) for s, t in self.by_base.get(base, []) if not self._clash(t, module, kind, stack)]
        if nearest and others:
            s, t = min(others, key=lambda st: (abs(st[0] - step), st[0]))
            return Match(t.group, t.name, "nearest step")
        if others:
            return Match(None, None, "", f"its module was tuned at step(s) {sorted(s for s, _ in others)} only "
                                         "(steps='nearest' uses the nearest tuned step)")
        return Match(None, None, "", "no group in the parameter file matches")

    @staticmethod
    def _clash(t: Tuned, module: Optional[str], kind: str, stack: str) -> str:
        for label, mine, theirs in (("module", module, t.module), ("kind", kind, t.kind), ("stack", stack, t.stack)):
            if theirs and mine and mine != theirs:
                return (f"entry {t.name} of the parameter file was captured from {label} {theirs}, this call comes "
                        f"from {mine} (a parameter file from another model, or a model called differently)")
        return ""
