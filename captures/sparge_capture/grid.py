"""The token grid of image and video entries (captures/FORMAT.md: ``grid``, ``grid_offset``, ``grid_tokens``).

A diffusion transformer cuts its latent of T frames x H x W pixels into patches; the patch tokens are the
grid, in row-major (t, h, w) order, possibly after (``grid_offset``) or before text tokens of a joint
attention. Sparge Studio permutes them (``--permute hilbert``) so that a block holds neighbouring patches.

Usage::

    from sparge_capture import SpargeCapture, TokenGrid, grid_from_pipeline

    grid = grid_from_pipeline(pipe, height=480, width=720, num_frames=49)   # diffusers pipelines
    with SpargeCapture("video.h5", grid=grid) as cap:
        pipe(prompt, height=480, width=720, num_frames=49)

    SpargeCapture("vit.h5", grid=TokenGrid(1, 14, 14, offset=1))            # a ViT: class token first

For a model with several grids, pass a callable ``grid(identity, tokens_q, tokens_kv)`` returning a
TokenGrid or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

import numpy as np

GRID_TOKENS = ("qkv", "q", "kv")


@dataclass(frozen=True)
class TokenGrid:
    """T frames x H rows x W columns of tokens, from token ``offset`` of the sequences named by ``tokens``."""

    frames: int
    height: int
    width: int
    offset: int = 0
    tokens: str = "qkv"

    def __post_init__(self) -> None:
        for name in ("frames", "height", "width"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"TokenGrid.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.offset, (int, np.integer)) or self.offset < 0:
            raise ValueError(f"TokenGrid.offset must be an integer >= 0, got {self.offset!r}")
        if self.tokens not in GRID_TOKENS:
            raise ValueError(f"TokenGrid.tokens must be one of {GRID_TOKENS}, got {self.tokens!r}")

    @property
    def count(self) -> int:
        return int(self.frames) * int(self.height) * int(self.width)

    def fits(self, tokens: int) -> bool:
        return self.offset + self.count <= tokens

    def attrs(self) -> Dict[str, Any]:
        """The entry attributes of this grid."""
        return {"grid": np.asarray([self.frames, self.height, self.width], dtype=np.int64),
                "grid_offset": np.int64(self.offset), "grid_tokens": self.tokens}


def grid_for_call(grid: TokenGrid, tokens_q: int, tokens_kv: int) -> Optional[TokenGrid]:
    """The grid as it applies to one attention call: on the sequences it fits (a joint self-attention holds it
    in q and kv; a cross-attention from the image to text tokens in q only), None when it fits neither."""
    on_q = grid.tokens in ("qkv", "q") and grid.fits(tokens_q)
    on_kv = grid.tokens in ("qkv", "kv") and grid.fits(tokens_kv)
    if on_q and on_kv:
        tokens = "qkv"
    elif on_q:
        tokens = "q"
    elif on_kv:
        tokens = "kv"
    else:
        return None
    return TokenGrid(grid.frames, grid.height, grid.width, grid.offset, tokens)


def grid_for_latents(latent_shape, patch_size: int = 1, temporal_patch_size: int = 1,
                     text_tokens: int = 0, tokens: str = "qkv") -> TokenGrid:
    """The grid of a latent of shape [B, C, H, W] (image) or [B, C, F, H, W] (video) cut into patches of
    ``patch_size`` x ``patch_size`` (and ``temporal_patch_size`` frames), after ``text_tokens`` text tokens."""
    shape = tuple(int(s) for s in latent_shape)
    if len(shape) == 4:
        frames, height, width = 1, shape[2], shape[3]
    elif len(shape) == 5:
        frames, height, width = shape[2], shape[3], shape[4]
    else:
        raise ValueError(f"latent shape must be [B, C, H, W] or [B, C, F, H, W], got {shape}")
    for name, size, patch in (("frames", frames, temporal_patch_size), ("height", height, patch_size),
                              ("width", width, patch_size)):
        if patch < 1 or size % patch:
            raise ValueError(f"latent {name} {size} is not a multiple of the patch size {patch}")
    return TokenGrid(frames // temporal_patch_size, height // patch_size, width // patch_size, text_tokens, tokens)


def grid_from_pipeline(pipe: Any, height: int, width: int, num_frames: Optional[int] = None,
                       text_tokens: int = 0) -> TokenGrid:
    """The grid of a diffusers image or video pipeline's transformer for an output of ``height`` x ``width``
    pixels (and ``num_frames`` frames): the VAE's scale factors and the transformer's patch sizes."""
    config = getattr(getattr(pipe, "transformer", None), "config", None)
    if config is None:
        raise ValueError("the pipeline has no transformer with a config (a UNet pipeline has no token grid)")
    spatial = int(getattr(pipe, "vae_scale_factor_spatial", 0) or getattr(pipe, "vae_scale_factor", 0) or 8)
    patch = getattr(config, "patch_size", 1) or 1
    patch_t = getattr(config, "patch_size_t", None) or 1
    if isinstance(patch, (tuple, list)):  # (t, h, w) as in Wan and HunyuanVideo
        patch_t, patch = int(patch[0]), int(patch[1])
    if height % spatial or width % spatial:
        raise ValueError(f"{height}x{width} is not a multiple of the VAE's scale factor {spatial}")
    if num_frames is None:
        latent = (1, 1, height // spatial, width // spatial)
    else:
        temporal = int(getattr(pipe, "vae_scale_factor_temporal", 1) or 1)
        latent = (1, 1, (int(num_frames) - 1) // temporal + 1, height // spatial, width // spatial)
    return grid_for_latents(latent, int(patch), int(patch_t), text_tokens)


def call_grid_attrs(grid: Any, identity: Any, tokens_q: int, tokens_kv: int) -> Dict[str, Any]:
    """The grid attributes of one call for SpargeCapture's ``grid`` argument (empty when none applies)."""
    if grid is None:
        return {}
    chosen = grid(identity, tokens_q, tokens_kv) if callable(grid) else grid_for_call(grid, tokens_q, tokens_kv)
    if chosen is None:
        return {}
    if not isinstance(chosen, TokenGrid):
        raise TypeError(f"grid must give a TokenGrid or None, got {type(chosen).__name__}")
    on_q, on_kv = chosen.tokens in ("qkv", "q"), chosen.tokens in ("qkv", "kv")
    if (on_q and not chosen.fits(tokens_q)) or (on_kv and not chosen.fits(tokens_kv)):
        raise ValueError(f"grid {chosen} does not fit a call of {tokens_q} query and {tokens_kv} key tokens")
    return chosen.attrs()
