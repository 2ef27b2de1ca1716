#!/usr/bin/env python3
"""Checks a `sparge run --params P --report R` report against the parameter file P: every head ran with
the stored parameters and its L1 is below the budget it was tuned for (l2 when λ was tuned, else l1)."""
import json
import sys


def main(params_path, report_path):
    params = json.load(open(params_path))
    report = json.load(open(report_path))
    budget = params["l2"] if params.get("tune_pv", True) else params["l1"]
    sel_key = "cdfthreshd" if params["mode"] == "cdf" else "topk"
    failures, checked = [], 0
    for entry in report["entries"]:
        group = next((g for g in params["groups"] if entry["name"] in g["entries"]), None)
        if group is None:
            failures.append(f"{entry['name']}: no group in {params_path}")
            continue
        if entry["geometry"] != params["geometry"]:
            failures.append(f"{entry['name']}: ran with geometry {entry['geometry']}, tuned with {params['geometry']}")
        stored = {h["head"]: h for h in group["heads"]}
        for h in entry["heads"]:
            p = stored[h["head"]]
            used = h["params"]
            for key in ("simthreshd1", sel_key, "pvthreshd", "is_sparse"):
                if used.get(key) != p[key]:
                    failures.append(f"{entry['name']} head {h['head']}: {key} {used.get(key)} != stored {p[key]}")
            if not (0 <= h["l1"] < budget):
                failures.append(f"{entry['name']} head {h['head']}: L1 {h['l1']:.5f} not below {budget}")
            if abs(h["l1"] - p["l1"]) > 1e-6 * max(1.0, p["l1"]):
                failures.append(f"{entry['name']} head {h['head']}: L1 {h['l1']:.6f} differs from tuned {p['l1']:.6f}")
            checked += 1
    if checked == 0:
        failures.append("no head checked")
    for f in failures:
        print("FAIL:", f)
    print(f"checked {checked} heads against budget {budget}: {'ok' if not failures else 'FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
