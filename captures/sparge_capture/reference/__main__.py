"""python -m sparge_capture.reference CAPTURE --entry E ... --masks OUT.h5: the reference engine on capture
entries, writing masks v1 exactly as `sparge run --masks` lays them out (and optionally a JSON report of
per-head sparsity and L1). Options follow `sparge run`: --theta, --tau | --topk, --lambda, --target / --block /
--quant, --sink, --no-smooth-k, --diagonal, --dense, --params (per-head values, which also set geometry,
numerics, smooth_k, sink and diagonal)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch

from .. import maskfile
from ..params import ParamsError, read_params
from . import GEOMETRIES, attention

TARGETS = {"sm80": ("128x64", "int8-fp16"), "sm89": ("128x64", "int8-fp8"), "sm90": ("64x128", "int8-fp8")}


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m sparge_capture.reference", description=__doc__.split("\n\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--entry", action="append", help="entry to run (repeatable; default: every entry)")
    ap.add_argument("--theta", type=float, default=0.6, help="θ, simthreshd1 (default 0.6)")
    sel = ap.add_mutually_exclusive_group()
    sel.add_argument("--tau", type=float, help="τ, cdfthreshd (default 0.98)")
    sel.add_argument("--topk", type=float, help="top-k mode: fraction of K blocks kept per row")
    ap.add_argument("--lambda", dest="lam", type=float, default=50.0, help="λ, pvthreshd (default 50)")
    ap.add_argument("--target", default="sm89", choices=sorted(TARGETS), help="tiles and numerics (default sm89)")
    ap.add_argument("--block", choices=sorted(GEOMETRIES), help="tile geometry, overrides --target")
    ap.add_argument("--quant", choices=("none", "int8-fp16", "int8-fp8"), help="numerics, overrides --target")
    ap.add_argument("--no-smooth-k", action="store_true")
    ap.add_argument("--sink", action="store_true")
    ap.add_argument("--diagonal", action="store_true")
    ap.add_argument("--dense", action="store_true", help="every valid block, no PV skip")
    ap.add_argument("--params", help="per-head parameters from sparge tune (JSON)")
    ap.add_argument("--masks", required=True, help="masks v1 output (.h5)")
    ap.add_argument("--report", help="per-head sparsity and L1 (.json)")
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    return ap.parse_args(argv)


def _config(a) -> dict:
    geometry, numerics = TARGETS[a.target]
    return {"geometry": a.block or geometry, "numerics": a.quant or numerics, "smooth_k": not a.no_smooth_k,
            "sink": a.sink, "diagonal": a.diagonal}


def _values(a, cfg, params, entry, heads):
    """Keyword arguments of attention() for one entry: the command line's, or the parameter file's group."""
    kw = {"simthreshd1": a.theta, "pvthreshd": a.lam, "is_sparse": not a.dense, "numerics": cfg["numerics"]}
    kw.update({"topk": a.topk} if a.topk is not None else {"cdfthreshd": 0.98 if a.tau is None else a.tau})
    if params is None:
        return kw
    group = next((g for g in params.groups if entry.name in g.entries), None)
    layer = entry.attrs.get("layer")
    if group is None and layer is not None:
        group = next((g for g in params.groups if g.layer is not None and g.layer == int(layer)), None)
    if group is None:
        raise SystemExit(f"{params.path}: no parameters for entry \"{entry.name}\"")
    if group.heads_q != heads:
        raise SystemExit(f"{params.path}: group \"{group.name}\" was tuned for {group.heads_q} query heads, but "
                         f"entry \"{entry.name}\" has {heads}")
    hp = params.head_params(group)
    for h in hp.missing:  # as `sparge run`: heads without parameters use the command line's values
        hp.theta[h], hp.lam[h], hp.sparse[h] = a.theta, a.lam, not a.dense
        hp.tau[h] = 0.98 if a.tau is None else a.tau
        hp.topk[h] = 0.5 if a.topk is None else a.topk
    kw = {"simthreshd1": hp.theta, "pvthreshd": hp.lam, "is_sparse": hp.sparse, "numerics": hp.numerics}
    kw.update({"topk": hp.topk} if params.mode == "topk" else {"cdfthreshd": hp.tau})
    return kw


def run(argv=None) -> int:
    a = parse_args(argv)
    cfg = _config(a)
    params = None
    if a.params:
        try:
            params = read_params(a.params)
        except ParamsError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        cfg.update(geometry=params.geometry, numerics=params.numerics, smooth_k=params.smooth_k, sink=params.sink,
                   diagonal=params.diagonal)
    names = a.entry or maskfile.entry_names(a.capture)
    target = next((t for t, gn in TARGETS.items() if gn == (cfg["geometry"], cfg["numerics"])), None)
    config = {"numerics": cfg["numerics"], "engine": f"reference (PyTorch {torch.__version__}, {a.device})",
              "target": "none" if cfg["numerics"] == "none" else (target or "custom"), "smooth_k": cfg["smooth_k"],
              "sink": cfg["sink"], "diagonal": cfg["diagonal"]}
    runs, report = [], []
    for name in names:
        e = maskfile.read_entry(a.capture, name)
        q, k, v = (t.to(a.device) for t in (e.q, e.k, e.v))
        kw = _values(a, cfg, params, e, q.shape[1])
        r = attention(q, k, v, geometry=cfg["geometry"], causal=e.causal, window=e.window, scale=e.scale,
                      smooth_k=cfg["smooth_k"], sink=cfg["sink"], diagonal=cfg["diagonal"], measure=bool(a.report),
                      **kw)
        mode = "topk" if "topk" in kw else "cdf"
        col = {k_: torch.as_tensor(kw.get(k_, 0.0), dtype=torch.float64).flatten().expand(q.shape[1])
               for k_ in ("simthreshd1", "cdfthreshd", "topk", "pvthreshd")}
        sparse = torch.as_tensor(kw["is_sparse"]).flatten().expand(q.shape[1])
        runs.append((e, r, config, maskfile.params_attrs(mode, col["simthreshd1"], col["cdfthreshd"], col["topk"],
                                                         col["pvthreshd"], sparse)))
        report.append(_report_entry(name, r))
    maskfile.write_masks(a.masks, runs)
    if a.report:
        _write_json(a.report, {"generator": "sparge_capture.reference", "capture": a.capture, "config": config,
                               "geometry": cfg["geometry"], "entries": report})
    for item in report:
        print(f"{item['name']}: stage-1 sparsity {item['sparsity_stage1']:.3f}, total {item['sparsity_total']:.3f}")
    return 0


def _report_entry(name, r) -> dict:
    out = {"name": name}
    out.update(r.sparsity())
    heads = []
    for h in range(r.block_mask.shape[1]):
        c = {k: float(v[h]) for k, v in r.counts.items()}
        row = {"head": h, "sparsity_stage1": 1 - c["selected"] / c["valid"],
               "sparsity_total": 1 - c["computed_pv"] / c["valid"], "empty_rows": int(r.empty_rows[:, h].sum())}
        if r.l1 is not None:
            row["l1"] = float(r.l1[h])
        heads.append(row)
    out["heads"] = heads
    return out


def _write_json(path, obj) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


if __name__ == "__main__":
    sys.exit(run())
