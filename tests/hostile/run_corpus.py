#!/usr/bin/env python3
"""Runs sparge on every file of the malformed corpus (make_corpus.py) and checks each outcome.

usage: run_corpus.py SPARGE CORPUS_DIR

For a capture: `sparge info` and `sparge run` must end within the time limit, without a signal or a
sanitizer report, with the exit status of the manifest, and (for errors) a message that names the file
and says what the manifest expects. For a parameter file: the same for `sparge run good.h5 --params`.
"""
import concurrent.futures
import json
import os
import subprocess
import sys

SPARGE, CORPUS = sys.argv[1], sys.argv[2]
TIMEOUT = float(os.environ.get("SPARGE_CORPUS_TIMEOUT", "60"))
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer")


def run(args):
    try:
        p = subprocess.run([SPARGE] + args, capture_output=True, text=True, errors="replace", timeout=TIMEOUT,
                           cwd=CORPUS)
    except subprocess.TimeoutExpired:
        return None, ""
    return p.returncode, p.stdout + p.stderr


def check(case):
    problems = []
    if case["kind"] == "capture":
        path = os.path.join("captures", case["file"])
        commands = [(["info", path], None), (["run", path, "--engine", "cpu", "--summary-only"], case["exit"])]
    else:
        path = os.path.join("params", case["file"])
        commands = [(["run", "good.h5", "--entry", "l0", "--engine", "cpu", "--summary-only", "--params", path],
                     case["exit"])]
    for args, want in commands:
        rc, out = run(args)
        what = "sparge " + " ".join(args)
        if rc is None:
            problems.append(f"{what}: no answer within {TIMEOUT:.0f} s (hang)")
            continue
        if rc < 0 or rc >= 128 or any(m in out for m in SANITIZER_MARKS):
            problems.append(f"{what}: crashed (exit {rc}): {out[-1500:]}")
            continue
        allowed = want if want is not None else [0, 1]  # `info` reads no data: it may succeed
        if rc not in allowed:
            problems.append(f"{what}: exit {rc}, expected {allowed}: {out[-600:]}")
            continue
        if rc == 1:
            if case["file"] not in out:
                problems.append(f"{what}: the message does not name the file: {out[-600:]}")
            if want is not None and case["expect"] and case["expect"] not in out:
                problems.append(f"{what}: the message lacks '{case['expect']}': {out[-600:]}")
    return case["file"], problems


def main():
    manifest = json.load(open(os.path.join(CORPUS, "manifest.json")))
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=int(os.environ.get("SPARGE_CORPUS_JOBS", "2"))) as pool:
        for name, problems in pool.map(check, manifest):
            for p in problems:
                failures += 1
                print(f"FAIL {name}: {p}")
    print(f"{len(manifest)} corpus files, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
