"""Drop-in replacements for SpargeAttn's (thu-ml/SpargeAttn) recommended functions: the same names, parameters
and defaults, and the same return conventions, so that changing one import switches a model over:

    from sparge_attn.compat import spas_sage2_attn_meansim_topk_cuda

As SpargeAttn on the GPU it runs: tiles 64x128 on Hopper (sm_90), 128x64 elsewhere; int8-fp16 numerics on
sm80/86/87, int8-fp8 elsewhere. CPU tensors run the CPU engine (128x64, int8-fp8). Differences, all on
purpose (docs/capi.md): is_causal is exact inside the diagonal blocks (SpargeAttn's sage2 kernels ignore it
there); the sparsity returned with return_sparsity has exact denominators; GQA (fewer KV heads), head dim 256
and query lengths below 128 work; attn_mask, dropout_p and output_dtype are accepted and ignored, as upstream
ignores them."""

import torch

from . import attention

__all__ = ["spas_sage2_attn_meansim_cuda", "spas_sage2_attn_meansim_topk_cuda"]


def _device_numerics(device):
    """The numerics of SpargeAttn's kernel on this device (its tiles are attention()'s default geometry)."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device) in ((8, 0), (8, 6), (8, 7)):
        return "int8-fp16"
    return "int8-fp8"


def _call(q, k, v, is_causal, scale, smooth_k, simthreshd1, cdfthreshd, topk, pvthreshd, attention_sink,
          tensor_layout, return_sparsity):
    result = attention(q, k, v, simthreshd1=simthreshd1, cdfthreshd=cdfthreshd, topk=topk, pvthreshd=pvthreshd,
                       is_causal=is_causal, numerics=_device_numerics(q.device), tensor_layout=tensor_layout,
                       scale=scale, smooth_k=smooth_k, attention_sink=attention_sink, return_sparsity=return_sparsity)
    if return_sparsity:
        o, stats = result
        return o, stats.stage1
    return result


def spas_sage2_attn_meansim_cuda(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, smooth_k=True,
                                 simthreshd1=0.6, cdfthreshd=0.98, pvthreshd=50, attention_sink=False,
                                 tensor_layout="HND", output_dtype=torch.float16, return_sparsity=False):
    """SpargeAttn with mean-similarity and CDF selection (τ = cdfthreshd). Returns o, or (o, sparsity)."""
    return _call(q, k, v, is_causal, scale, smooth_k, simthreshd1, cdfthreshd, None, pvthreshd, attention_sink,
                 tensor_layout, return_sparsity)


def spas_sage2_attn_meansim_topk_cuda(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                      smooth_k=True, simthreshd1=-0.1, cdfthreshd=None, topk=0.5, pvthreshd=50,
                                      attention_sink=False, tensor_layout="HND", output_dtype=torch.float16,
                                      return_sparsity=False):
    """SpargeAttn with mean-similarity and top-k selection (the fraction topk of the key blocks per row).
    Returns o, or (o, sparsity)."""
    if cdfthreshd is not None and topk is not None:
        raise ValueError("give cdfthreshd or topk, not both (SpargeAttn's Stage 1 takes exactly one)")
    return _call(q, k, v, is_causal, scale, smooth_k, simthreshd1, cdfthreshd, topk, pvthreshd, attention_sink,
                 tensor_layout, return_sparsity)
