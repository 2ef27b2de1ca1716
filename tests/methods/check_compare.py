#!/usr/bin/env python3
"""Checks a `sparge compare --methods` report of make_planted_capture.py's capture: the report's fields, the
winners known by construction, and that each method's sparsity per head equals the one `sparge run --params`
reports with that method's tuned file.

usage: check_compare.py COMPARE.json [METHOD=RUN_REPORT.json ...]
"""
import json
import math
import sys

METHODS = ["spargeattn", "xattention", "minference", "flexprefill", "moba"]


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def check_fields(rep):
    labels = [v["label"] for v in rep["variants"]]
    if labels != METHODS or [v["method"] for v in rep["variants"]] != METHODS:
        fail(f"variants {rep['variants']}")
    (entry,) = rep["entries"]
    if not entry["dense_ms"] > 0:
        fail(f"dense_ms {entry['dense_ms']}")
    won = {m: 0 for m in METHODS}
    for h in entry["heads"]:
        totals = {m: h["variants"][m]["sparsity_total"] for m in METHODS}
        best = max(totals.values())
        if (h["winner"] is None) != (best == 0) or (best > 0 and totals[h["winner"]] != best):
            fail(f"head {h['head']}: winner {h['winner']} is not the sparsest of {totals}")
        for m in METHODS:
            won[m] += best > 0 and totals[m] == best
            v = h["variants"][m]
            if not (v["l1"] is not None and v["l1"] < rep["budget"]["l1"] + 1e-9):
                fail(f"head {h['head']} {m}: l1 {v['l1']} over the budget")
            if (m == "spargeattn") != ("simthreshd1" in v) or (m != "spargeattn") != (m in v):
                fail(f"head {h['head']} {m}: parameters {sorted(v)}")
    for m in METHODS:
        s = entry["variants"][m]
        if s["heads_won"] != won[m]:
            fail(f"{m}: heads_won {s['heads_won']}, counted {won[m]}")
        share = s["stage1_ms"] / entry["dense_ms"]
        if not (s["stage1_ms"] > 0 and math.isclose(s["stage1_share_of_dense"], share, rel_tol=1e-9)):
            fail(f"{m}: stage 1 {s['stage1_ms']} ms, share {s['stage1_share_of_dense']} (expected {share})")
    return entry


def check_winners(entry):
    heads = {h["head"]: h for h in entry["heads"]}
    s = {h: {m: heads[h]["variants"][m]["sparsity_total"] for m in METHODS} for h in heads}
    # Head 0, stripes: XAttention sees single-token stripes; MoBA's block means cancel them.
    if heads[0]["winner"] != "xattention":
        fail(f"stripes head: winner {heads[0]['winner']}, sparsity {s[0]}")
    if not s[0]["moba"] < s[0]["xattention"] - 0.2:
        fail(f"stripes head: moba {s[0]['moba']} not well below xattention {s[0]['xattention']}")
    # Head 1, even-lag slash: XAttention's antidiagonals never touch it; MInference's slash lines do.
    if not (s[1]["xattention"] <= 0.05 and s[1]["minference"] >= 0.5 and heads[1]["winner"] != "xattention"):
        fail(f"slash head: sparsity {s[1]}, winner {heads[1]['winner']}")


def check_runs(entry, runs):
    for arg in runs:
        method, path = arg.split("=", 1)
        with open(path) as f:
            run = json.load(f)
        (e,) = run["entries"]
        if e.get("method", method) != method:
            fail(f"{path}: method {e.get('method')}")
        got = {h["head"]: h["sparsity_total"] for h in e["heads"]}
        for h in entry["heads"]:
            want = h["variants"][method]["sparsity_total"]
            if not math.isclose(got[h["head"]], want, abs_tol=1e-12):
                fail(f"{method} head {h['head']}: compare {want}, run --params {got[h['head']]}")


def main():
    with open(sys.argv[1]) as f:
        rep = json.load(f)
    entry = check_fields(rep)
    check_winners(entry)
    check_runs(entry, sys.argv[2:])
    print("compare report ok")


if __name__ == "__main__":
    main()
