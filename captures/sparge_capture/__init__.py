"""Capture attention Q/K/V from PyTorch models into Sparge Studio's capture format v1 (HDF5).

Usage::

    from sparge_capture import SpargeCapture

    with torch.no_grad(), SpargeCapture("llm.h5", layers=[0, 15, 29]) as cap:
        model(input_ids)                     # LLM: one forward pass

    with SpargeCapture("dit.h5", steps=[0, 10, 29]) as cap:
        for t in timesteps:                  # diffusion transformer: one step per denoising step
            latents = pipe_step(latents, t)
            cap.next_step()

What is recorded is exactly what the attention kernel receives (after rotary embeddings, after any
per-head normalisation, in the model's own dtype by default), because the hook sits at the kernel call:

* ``torch.nn.functional.scaled_dot_product_attention`` is replaced by a wrapper for the duration of
  the ``with`` block (diffusers, timm, hand-written models).
* Hugging Face transformers' attention-function registry (``ALL_ATTENTION_FUNCTIONS``) gets its
  ``"sdpa"`` entry wrapped, so models loaded with ``attn_implementation="sdpa"`` are recorded once
  with their real layer index and with K/V still holding the KV heads (before ``repeat_kv``). The
  inner SDPA call made by that function is not recorded a second time.
* ``torch.nn.Module.__call__`` is wrapped to know which module made each call: its path in the model,
  layer, kind (self/cross) and stack (encoder/decoder) become entry attributes and the entry's name.

Each entry records the mask the call used when the format can describe it: ``causal`` and a local
``window`` [left, right] (from the mask itself, or from the module's ``sliding_window`` when no mask
was needed). Other masks (padding, biases) are reported with a warning naming the module.

The wrappers call the originals with the original arguments and return their results untouched:
capturing never changes the model's output. A failure while writing is reported as a warning (and
counted in ``cap.errors``) instead of breaking the model run, unless ``strict=True``.

Models run with ``attn_implementation="eager"`` call neither function and are not captured.
Requires Python >= 3.9, torch, h5py and numpy (transformers is optional).
"""

import math

from .apply import ApplySummary, SpargeApply, SpargeApplyError
from .capture import CAPTURE_VERSION, SpargeCapture, __version__
from .engines import EngineUnavailable
from .maskfile import load_mask_id
from .grid import TokenGrid, grid_for_latents, grid_from_pipeline
from .masks import MaskInfo, describe_mask
from .params import ParamsError, read_params

__all__ = ["SpargeCapture", "SpargeApply", "ApplySummary", "SpargeApplyError", "EngineUnavailable", "ParamsError",
           "read_params", "load_mask_id", "CAPTURE_VERSION", "MaskInfo", "describe_mask", "scale_of",
           "__version__", "TokenGrid", "grid_for_latents", "grid_from_pipeline"]


def scale_of(head_dim: int) -> float:
    """The default softmax scale the capture format assumes when `scale` is absent."""
    return 1.0 / math.sqrt(head_dim)
