#!/usr/bin/env python3
"""Per-head L1 of SpargeApply's engines on captured Q/K/V, for models whose weights cannot travel to the GPU
machine: every entry of CAPTURE that PARAMS has a group for runs through the `spargeattn` engine (SpargeAttn's
own kernels), the `reference` engine and, when the package is importable, the `sparge` engine (this project's
kernels), each with the group's per-head parameters, and each head's L1 = Σ|O − O_ref| / Σ|O_ref| is taken
against the same float32 dense reference. Prints and writes (JSON) the share of heads whose L1 agree within 15 %.

    python3 bench/apply_parity_capture.py CAPTURE PARAMS [--json OUT.json] [--engines spargeattn,reference,sparge]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "captures"))
from sparge_capture.engines import Call, EngineUnavailable, make_engine  # noqa: E402
from sparge_capture.maskfile import entry_names, read_entry  # noqa: E402
from sparge_capture.params import read_params  # noqa: E402

AGREE = 0.15


def group_of(pf, name):
    return next((g for g in pf.groups if name in g.entries), None)


def engine_l1(engine, call, hp, pf):
    run = engine.run(call, hp, pf, measure=True)
    return (run.abs_diff / run.abs_ref).tolist()


def share_within(a, b):
    pairs = [(x, y) for x, y in zip(a, b) if y > 0]
    agree = sum(1 for x, y in pairs if abs(x / y - 1) <= AGREE)
    return agree, len(pairs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture")
    ap.add_argument("params")
    ap.add_argument("--json")
    ap.add_argument("--engines", default="spargeattn,reference,sparge")
    a = ap.parse_args()
    pf = read_params(a.params)
    engines = {}
    for name in a.engines.split(","):
        try:
            engines[name] = make_engine(name, device="cuda")
            engines[name].configure(pf)
        except EngineUnavailable as e:
            print(f"{name}: not run ({e})")
    rows = []
    for name in entry_names(a.capture):
        g = group_of(pf, name)
        if g is None:
            continue
        e = read_entry(a.capture, name)
        call = Call(e.q.cuda(), e.k.cuda(), e.v.cuda(), e.causal, e.window, e.scale)
        hp = pf.head_params(g)
        l1 = {n: engine_l1(eng, call, hp, pf) for n, eng in engines.items()}
        for h in range(e.q.shape[1]):
            rows.append({"entry": name, "head": h, "numerics": hp.numerics[h], "sparse": bool(hp.sparse[h]),
                         **{f"l1_{n}": v[h] for n, v in l1.items()}})
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "capture": a.capture,
              "params": a.params, "geometry": pf.geometry, "numerics": pf.numerics, "heads": rows}
    for other in ("reference", "sparge"):
        if "spargeattn" in engines and other in engines:
            ok, n = share_within([r[f"l1_{other}"] for r in rows], [r["l1_spargeattn"] for r in rows])
            result[f"{other}_vs_spargeattn_within_15pct"] = {"agree": ok, "heads": n}
            print(f"{other} vs spargeattn: per-head L1 within 15 % on {ok} of {n} heads "
                  f"({100 * ok / max(n, 1):.1f} %; target >= 85 %)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
