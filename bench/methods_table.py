#!/usr/bin/env python3
"""The table of docs/methods.md: the block predictors side by side on real captures, on the CPU engine.

For each capture and budget, runs `sparge compare CAPTURE --methods spargeattn,xattention,minference,flexprefill,
moba --l1 X --l2 X+0.01 --sink --engine cpu` (the CLI's default numerics int8-fp8 at 128x64 tiles; --sink
because XAttention, MInference and FlexPrefill keep key block 0 by construction on causal entries) with a JSON
report, then summarises per method: the mean over heads of the total sparsity reached (Stage 1 and PV skip) and
of Stage 1's alone, the heads it wins (a tie counts for each tied method; a head no method makes sparse has no
winner) and Stage 1's time as a share of the dense pass (summed over the entries).

    python3 bench/methods_table.py build/cli/sparge WORK_DIR NAME=CAPTURE[:ENTRY,ENTRY...] ... \
        [--l1 0.05,0.08] [--out bench/results/methods_table_cpu.json]

Reports already in WORK_DIR are reused. Writes the summary JSON and prints the Markdown rows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys

METHODS = ["spargeattn", "xattention", "minference", "flexprefill", "moba"]


def run_compare(sparge, capture, entries, l1, report):
    if os.path.exists(report):
        return
    cmd = [sparge, "compare", capture, "--methods", ",".join(METHODS), "--l1", str(l1),
           "--l2", str(round(l1 + 0.01, 6)), "--sink", "--engine", "cpu", "--report", report]
    for e in entries:
        cmd += ["--entry", e]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def summarise(report):
    with open(report) as f:
        rep = json.load(f)
    heads = [h for e in rep["entries"] for h in e["heads"]]
    out = {"entries": [e["name"] for e in rep["entries"]], "heads": len(heads), "methods": {}}
    dense_ms = sum(e["dense_ms"] for e in rep["entries"])
    for m in METHODS:
        total = [h["variants"][m]["sparsity_total"] for h in heads]
        stage1 = [h["variants"][m]["sparsity_stage1"] for h in heads]
        best = [max(h["variants"][x]["sparsity_total"] for x in METHODS) for h in heads]
        stage1_ms = sum(e["variants"][m]["stage1_ms"] for e in rep["entries"])
        out["methods"][m] = {
            "mean_sparsity_total": sum(total) / len(total),
            "mean_sparsity_stage1": sum(stage1) / len(stage1),
            "heads_won": sum(b > 0 and t == b for t, b in zip(total, best)),
            "stage1_ms": stage1_ms,
            "stage1_share_of_dense": stage1_ms / dense_ms if dense_ms > 0 else None,
            "per_head_sparsity_total": [
                {"entry": e["name"], "head": h["head"], "sparsity": h["variants"][m]["sparsity_total"]}
                for e in rep["entries"] for h in e["heads"]],
        }
    out["dense_ms"] = dense_ms
    out["heads_dense_for_all"] = sum(
        all(h["variants"][m]["sparsity_total"] == 0 for m in METHODS) for h in heads)
    return out


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def command_line(a):
    """The command as the docs quote it: capture files by name, the work folder as WORK."""
    specs = []
    for spec in a.captures:
        name, rest = spec.split("=", 1)
        capture, sep, entries = rest.partition(":")
        specs.append(f"{name}={os.path.basename(capture)}{sep}{entries}")
    return f"python3 bench/methods_table.py build/cli/sparge WORK {' '.join(specs)} --l1 {a.l1}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sparge")
    ap.add_argument("work")
    ap.add_argument("captures", nargs="+", help="NAME=CAPTURE[:ENTRY,ENTRY...]")
    ap.add_argument("--l1", default="0.05,0.08")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "methods_table_cpu.json"))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    budgets = [float(x) for x in a.l1.split(",")]
    table = {"machine": f"{cpu_model()}, {os.cpu_count()} cores (shared with other work: times are noisy)",
             "engine": "cpu", "numerics": "int8-fp8", "geometry": "128x64", "l2": "l1 + 0.01", "sink": True,
             "command": command_line(a), "captures": {}}
    for spec in a.captures:
        name, rest = spec.split("=", 1)
        capture, _, entries = rest.partition(":")
        entries = [e for e in entries.split(",") if e]
        table["captures"][name] = {"file": os.path.basename(capture), "budgets": {}}
        for l1 in budgets:
            report = os.path.join(a.work, f"{name}_l1_{l1}.json")
            run_compare(a.sparge, capture, entries, l1, report)
            table["captures"][name]["budgets"][str(l1)] = summarise(report)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.out)
    print(markdown(table))


def markdown(table):
    """Rows: methods; columns: capture and budget, "mean total sparsity (Stage 1 alone), heads won"; then
    Stage 1's share of the dense pass."""
    cols = [(c, b) for c, cap in table["captures"].items() for b in cap["budgets"]]
    head = "| method | " + " | ".join(f"{c} l1 {b}" for c, b in cols) + " |"
    lines = [head, "|" + " --- |" * (len(cols) + 1)]
    for m in METHODS:
        cells = []
        for c, b in cols:
            s = table["captures"][c]["budgets"][b]
            r = s["methods"][m]
            cells.append(f"{100 * r['mean_sparsity_total']:.1f} % ({100 * r['mean_sparsity_stage1']:.1f} %), "
                         f"{r['heads_won']} / {s['heads']}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    cells = [str(table["captures"][c]["budgets"][b]["heads_dense_for_all"]) for c, b in cols]
    lines.append("| no method sparse | " + " | ".join(cells) + " |")
    lines += ["", "| method | " + " | ".join(f"{c} l1 {b}" for c, b in cols) + " |",
              "|" + " --- |" * (len(cols) + 1)]
    for m in METHODS:
        cells = [f"{100 * table['captures'][c]['budgets'][b]['methods'][m]['stage1_share_of_dense']:.0f} %"
                 for c, b in cols]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
