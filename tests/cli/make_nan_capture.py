#!/usr/bin/env python3
"""Writes a small causal capture with NaN/Inf in known places (q head 1 one NaN, k head 2 a row of Inf).
usage: make_nan_capture.py OUT.h5 — used by the CLI test (nan_input) and by tools/gpu/session.sh."""
import sys

import h5py
import numpy as np

rng = np.random.default_rng(1)
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["sparge_capture_version"] = 1
    g = f.create_group("entries/a")
    g.attrs["causal"] = 1
    q, k, v = (rng.standard_normal((1, 3, 700, 64)).astype(np.float16) for _ in range(3))
    q[0, 1, 100, 3] = np.nan
    k[0, 2, 300, :] = np.inf
    g["q"], g["k"], g["v"] = q, k, v
