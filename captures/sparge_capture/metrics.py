"""Model-level comparison metrics of a sparse run against the dense run: next-token statistics of causal LMs,
word error rate of transcripts, PSNR and SSIM of images (implemented here, no extra dependency)."""

from __future__ import annotations

import math
import re
from typing import Dict, List, Sequence

import torch
import torch.nn.functional as F


def next_token_stats(logits_dense: torch.Tensor, logits_sparse: torch.Tensor, ids: torch.Tensor) -> Dict[str, float]:
    """Sums over the predicted positions of one sequence ([N, V] logits, [N] ids): negative log-likelihood of the
    next token under each run, next-token top-1 agreement, and KL(dense || sparse) in nats."""
    ld, ls = logits_dense[:-1].double().log_softmax(-1), logits_sparse[:-1].double().log_softmax(-1)
    target = ids[1:].to(ld.device)
    kl = (ld.exp() * (ld - ls)).sum(-1)
    return {"positions": int(target.numel()),
            "nll_dense": float(-ld.gather(-1, target[:, None]).sum()),
            "nll_sparse": float(-ls.gather(-1, target[:, None]).sum()),
            "top1_agree": int((ld.argmax(-1) == ls.argmax(-1)).sum()),
            "kl": float(kl.clamp(min=0).sum())}


def _words(text: str) -> List[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower()).split()


def word_errors(reference: str, hypothesis: str) -> tuple:
    """(word edits, reference words): Levenshtein distance over lower-cased words without punctuation."""
    r, h = _words(reference), _words(hypothesis)
    prev = list(range(len(h) + 1))
    for i, rw in enumerate(r, 1):
        cur = [i] + [0] * len(h)
        for j, hw in enumerate(h, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (rw != hw))
        prev = cur
    return prev[-1], len(r)


def token_agreement(a: Sequence[int], b: Sequence[int]) -> tuple:
    """(positions where a and b agree, positions compared): over the longer of the two."""
    n = max(len(a), len(b))
    return sum(1 for x, y in zip(a, b) if x == y), n


def psnr(reference: torch.Tensor, test: torch.Tensor, data_range: float = 1.0) -> float:
    mse = float(((reference.double() - test.double()) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(data_range ** 2 / mse)


def ssim(reference: torch.Tensor, test: torch.Tensor, data_range: float = 1.0) -> float:
    """Mean SSIM (Wang et al. 2004: 11x11 Gaussian window, σ 1.5, K1 0.01, K2 0.03) of images [H, W, C] or [H, W],
    computed per channel over the 'valid' window positions and averaged."""
    x, y = reference.double(), test.double()
    if x.dim() == 2:
        x, y = x[..., None], y[..., None]
    x, y = x.permute(2, 0, 1)[:, None], y.permute(2, 0, 1)[:, None]  # [C, 1, H, W]
    g = torch.exp(-((torch.arange(11, dtype=torch.float64) - 5) ** 2) / (2 * 1.5 ** 2))
    g = g / g.sum()
    w = (g[:, None] * g[None, :])[None, None]
    mu_x, mu_y = F.conv2d(x, w), F.conv2d(y, w)
    sxx = F.conv2d(x * x, w) - mu_x ** 2
    syy = F.conv2d(y * y, w) - mu_y ** 2
    sxy = F.conv2d(x * y, w) - mu_x * mu_y
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    s = ((2 * mu_x * mu_y + c1) * (2 * sxy + c2)) / ((mu_x ** 2 + mu_y ** 2 + c1) * (sxx + syy + c2))
    return float(s.mean())
