"""Tests of the token grid in the capture package (captures/sparge_capture/grid.py): validation, the grid of
diffusers-like pipelines and latents, and SpargeCapture(grid=...) writing attributes the C++ reader accepts.

With SPARGE_BIN set to the sparge CLI, the file is opened with the C++ reader and permuted (`sparge run
--permute hilbert`), which also checks that the attributes are the ones captures/FORMAT.md defines.
"""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

sys.path.append(str(Path(__file__).resolve().parents[2] / "captures"))
from sparge_capture import SpargeCapture, TokenGrid, grid_for_latents, grid_from_pipeline  # noqa: E402
from sparge_capture.grid import grid_for_call  # noqa: E402

F = torch.nn.functional


def test_grid_validation():
    with pytest.raises(ValueError, match="height"):
        TokenGrid(1, 0, 4)
    with pytest.raises(ValueError, match="offset"):
        TokenGrid(1, 2, 2, offset=-1)
    with pytest.raises(ValueError, match="tokens"):
        TokenGrid(1, 2, 2, tokens="keys")
    assert TokenGrid(13, 30, 45).count == 13 * 30 * 45


def test_grid_for_call_picks_the_sequences_it_fits():
    g = TokenGrid(2, 4, 4, offset=3)  # 32 grid tokens after 3 text tokens: 35
    assert grid_for_call(g, 35, 35).tokens == "qkv"
    assert grid_for_call(g, 40, 77 - 60).tokens == "q"  # image queries attending to 17 text tokens
    assert grid_for_call(g, 10, 35).tokens == "kv"
    assert grid_for_call(g, 34, 20) is None


def test_latents_and_pipelines():
    # Hand-computed: a 1024x1024 SD3-like image, VAE /8, patch 2 -> 64x64 tokens after 333 text tokens.
    assert grid_for_latents((1, 16, 128, 128), patch_size=2, text_tokens=333) == TokenGrid(1, 64, 64, 333)
    # CogVideoX-like: 49 frames -> (49 - 1) / 4 + 1 = 13 latent frames, 480x720 / 8 / 2 = 30x45.
    pipe = SimpleNamespace(vae_scale_factor_spatial=8, vae_scale_factor_temporal=4,
                           transformer=SimpleNamespace(config=SimpleNamespace(patch_size=2, patch_size_t=None)))
    assert grid_from_pipeline(pipe, 480, 720, num_frames=49) == TokenGrid(13, 30, 45)
    # Wan-like patch (1, 2, 2): 81 frames -> 21 latent frames, 480x832 -> 30x52.
    wan = SimpleNamespace(vae_scale_factor_spatial=8, vae_scale_factor_temporal=4,
                          transformer=SimpleNamespace(config=SimpleNamespace(patch_size=(1, 2, 2))))
    assert grid_from_pipeline(wan, 480, 832, num_frames=81) == TokenGrid(21, 30, 52)
    with pytest.raises(ValueError, match="multiple"):
        grid_for_latents((1, 4, 63, 64), patch_size=2)
    with pytest.raises(ValueError, match="transformer"):
        grid_from_pipeline(SimpleNamespace(unet=object()), 512, 512)


def test_capture_records_the_grid(tmp_path):
    grid = TokenGrid(2, 6, 5, offset=4)  # 64 tokens: 4 text, 60 on the grid
    path = tmp_path / "grid.h5"
    q = torch.randn(1, 2, 64, 16)
    text = torch.randn(1, 2, 7, 16)
    with SpargeCapture(str(path), grid=grid, compression=None) as cap:
        F.scaled_dot_product_attention(q, q, q)        # self-attention over text + grid
        F.scaled_dot_product_attention(q, text, text)  # cross-attention to text: grid on q only
        F.scaled_dot_product_attention(text, text, text)  # text alone: no grid
    with h5py.File(path) as f:
        entries = [f["entries"][n] for n in cap.entries]
        assert list(entries[0].attrs["grid"]) == [2, 6, 5]
        assert int(entries[0].attrs["grid_offset"]) == 4
        assert entries[0].attrs["grid_tokens"] == "qkv"
        assert entries[1].attrs["grid_tokens"] == "q"
        assert "grid" not in entries[2].attrs
    sparge = os.environ.get("SPARGE_BIN")
    if sparge:
        info = subprocess.run([sparge, "info", str(path)], capture_output=True, text=True, check=True).stdout
        assert "2x6x5 (4, qkv)" in info
        run = subprocess.run([sparge, "run", str(path), "--entry", cap.entries[0], "--permute", "hilbert",
                              "--engine", "cpu", "--summary-only"], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert "tokens in hilbert order" in run.stdout
