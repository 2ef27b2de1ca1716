#!/usr/bin/env python3
"""Runs `sparge run` for every run of a parity manifest (bench/parity_manifest.json): the masks and the report
that bench/parity_spargeattn.py compares with SpargeAttn's kernel. Runs whose capture is missing are skipped.

    python3 bench/parity_runs.py MANIFEST SPARGE --engine cpu|cuda [--out-dir DIR]

Paths in the manifest are relative to its folder; with --out-dir, masks and reports go there instead (by file
name), for example a GPU run's outputs next to the CPU ones.
"""

import argparse
import json
import os
import subprocess
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("manifest")
    ap.add_argument("sparge")
    ap.add_argument("--engine", default="cpu")
    ap.add_argument("--out-dir")
    a = ap.parse_args()
    base = os.path.dirname(os.path.abspath(a.manifest))
    man = json.load(open(a.manifest))
    failed = 0
    for run in man["runs"]:
        capture = os.path.join(base, run["capture"])
        if not os.path.exists(capture):
            print(f"skipped (no {run['capture']}): {run['label']}", flush=True)
            continue
        where = (lambda p: os.path.join(a.out_dir, os.path.basename(p))) if a.out_dir else \
            (lambda p: os.path.join(base, p))
        cmd = [a.sparge, "run", capture, "--engine", a.engine, *man.get("common", []), *run.get("args", []),
               "--masks", where(run["masks"]), "--report", where(run["report"])]
        r = subprocess.run(cmd, capture_output=True, text=True)
        lines = [l for l in r.stdout.splitlines() if l.startswith("all heads") or l.startswith("entry ")]
        print(f"{run['label']} ({a.engine}): rc {r.returncode}\n  " + "\n  ".join(lines[:2]), flush=True)
        if r.returncode != 0:
            print(r.stderr[-2000:], flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
