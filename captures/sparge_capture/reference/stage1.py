"""Stage 1 of SpargeAttn (docs/method.md section 3) in PyTorch, with the C++ CPU engine's order of float32
operations, so that the block masks are the engine's bit for bit: sums run sequentially in float32 (one tensor
operation per term, vectorised over heads and blocks), exp is the correctly rounded float32 exp, and ties in
the probability sort go to the lower block index."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from .numerics import f32, pad_rows, round_half, round_input

Window = Optional[Tuple[int, int]]


@dataclass
class Validity:
    """Which blocks of the grid hold at least one visible (query, key) pair, and how many."""
    valid: torch.Tensor  # [nq, nk] bool
    area: torch.Tensor  # [nq, nk] float64, visible pairs
    diagonal: torch.Tensor  # [nq, nk] bool, blocks holding a visible pair with key == query


def visible_range(n_q: int, n_kv: int, causal: bool, window: Window, device) -> Tuple[torch.Tensor, torch.Tensor]:
    """First and last key (inclusive) each query sees: top-left aligned, window [left, right], -1 unbounded,
    causal = right 0 whatever the window says."""
    t = torch.arange(n_q, device=device)
    first = torch.zeros_like(t)
    last = torch.full_like(t, n_kv - 1)
    left, right = window if window is not None else (-1, -1)
    if causal:
        right = 0
    if right >= 0:
        last = torch.minimum(last, t + right)
    if left >= 0:
        first = torch.clamp(t - left, min=0)
    return first, last


def block_validity(n_q: int, n_kv: int, block_q: int, block_k: int, causal: bool, window: Window,
                   device) -> Validity:
    first, last = visible_range(n_q, n_kv, causal, window, device)
    nq, nk = -(-n_q // block_q), -(-n_kv // block_k)
    k0 = torch.arange(nk, device=device) * block_k
    k1 = torch.clamp(k0 + block_k, max=n_kv)
    overlap = (torch.minimum(last[:, None], k1[None, :] - 1) - torch.maximum(first[:, None], k0[None, :]) + 1)
    overlap = pad_rows(overlap.clamp(min=0).double(), block_q)
    area = overlap.reshape(nq, block_q, nk).sum(1)
    t = torch.arange(min(n_q, n_kv), device=device)
    on_diag = (first[: len(t)] <= t) & (t <= last[: len(t)])
    diagonal = torch.zeros(nq, nk, dtype=torch.bool, device=device)
    diagonal[t[on_diag] // block_q, t[on_diag] // block_k] = True
    return Validity(area > 0, area, diagonal)


def _sequential_sum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Σ over `dim` in float32, one term after the other (the C++ loops' order)."""
    terms = x.unbind(dim)
    acc = torch.zeros_like(terms[0])
    for t in terms:
        acc = acc + t
    return acc


def block_pass(x: torch.Tensor, block: int, mean: Optional[torch.Tensor], input_type: str):
    """Pooled rows [..., nb, D] (rounded to the input type) and self-similarity [..., nb] (NaN for partial
    blocks and blocks with an all-zero row) of x [..., N, D]; K is smoothed first when `mean` is given."""
    n, d = x.shape[-2], x.shape[-1]
    rows = round_input(x - mean, input_type) if mean is not None else x
    rows = pad_rows(rows, block)  # rows past the end are zero, as if they were absent from the sums
    nb = rows.shape[-2] // block
    rows = rows.reshape(*rows.shape[:-2], nb, block, d)
    counts = torch.full((nb,), block, dtype=torch.float32, device=x.device)
    counts[-1] = n - (nb - 1) * block
    pooled = round_input(_sequential_sum(rows, -2) / counts[:, None], input_type)
    norm = torch.sqrt(_sequential_sum(rows * rows, -1))
    unit_sum = _sequential_sum(round_half(rows / norm.unsqueeze(-1)), -2)
    sim = _sequential_sum(unit_sum * unit_sum, -1) / (counts * counts)
    real = (torch.arange(nb * block, device=x.device) < n).reshape(nb, block)
    undefined = ((norm == 0) & real).any(-1) | (counts < block)
    return pooled, torch.where(undefined, torch.full_like(sim, math.nan), sim)


@dataclass
class BlockStats:
    """θ-independent statistics of every (batch, query head): cached across parameter changes."""
    sim_q: torch.Tensor  # [B, Hq, nq]
    sim_k: torch.Tensor  # [B, Hq, nk] (K heads expanded to their query heads)
    scores: torch.Tensor  # [B, Hq, nq, nk]


def block_stats(q: torch.Tensor, k: torch.Tensor, block_q: int, block_k: int, smooth_k: bool,
                input_type: str, kv_mean: Optional[torch.Tensor]) -> BlockStats:
    """q [B, Hq, Nq, D], k [B, Hkv, Nkv, D] float32 holding values of `input_type`; kv_mean [B, Hkv, 1, D]."""
    pq, sim_q = block_pass(q, block_q, None, input_type)
    pk, sim_k = block_pass(k, block_k, kv_mean if smooth_k else None, input_type)
    group = q.shape[1] // k.shape[1]
    pk, sim_k = pk.repeat_interleave(group, 1), sim_k.repeat_interleave(group, 1)
    d = q.shape[-1]
    dot = torch.zeros(*pq.shape[:-1], pk.shape[-2], dtype=torch.float32, device=q.device)
    for c in range(d):  # the dot products in the engine's order
        dot = dot + pq[..., :, None, c] * pk[..., None, :, c]
    # The predictor always scales by D^-0.5, whatever softmax scale the attention uses.
    scores = round_input(round_input(dot, input_type) * f32(1.0 / math.sqrt(d), q), input_type)
    return BlockStats(sim_q, sim_k, scores)


def _expf(x: torch.Tensor) -> torch.Tensor:
    """float32 exp, correctly rounded (float64 exp rounded once), like the C library's expf."""
    return torch.exp(x.double()).float()


def select_blocks(st: BlockStats, validity: Validity, theta: torch.Tensor, mode: str, tau: torch.Tensor,
                  topk: torch.Tensor, dense: torch.Tensor, sink: bool, diagonal: bool) -> torch.Tensor:
    """The final Stage-1 mask [B, Hq, nq, nk] (bool). Per query head [Hq]: theta, tau (cdf mode), topk (topk
    mode), dense (is_sparse false)."""
    nk = st.scores.shape[-1]
    theta32 = theta.float()[:, None]
    similar_q = st.sim_q > theta32  # NaN compares false: partial and zero-row blocks are never similar
    similar_k = st.sim_k > theta32
    masked = ~similar_k[..., None, :] | ~validity.valid
    neg_inf = torch.tensor(-math.inf, device=st.scores.device)
    row = torch.where(masked, neg_inf, st.scores)
    row_max = row.amax(-1, keepdim=True)
    all_masked = row_max.squeeze(-1) == -math.inf  # every valid block of the row is forced on anyway
    e = _expf(row - torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max))
    e = torch.where(masked, torch.zeros_like(e), e)
    prob = round_half(e / _sequential_sum(e, -1).unsqueeze(-1))
    order = torch.sort(-prob, dim=-1, stable=True).indices  # descending, ties to the lower index
    if mode == "cdf":
        cdf = torch.zeros_like(prob[..., 0])
        ok = []
        for p in prob.gather(-1, order).unbind(-1):
            cdf = cdf + p
            ok.append(round_half(cdf) <= tau.float()[:, None])
        keep = torch.stack(ok, -1).int().cumprod(-1).sum(-1)  # kept while the running sum stays <= tau
    else:
        keep = torch.trunc(topk.float()[:, None] * f32(float(nk), prob)).int().expand(prob.shape[:-1])
    keep = torch.where(all_masked, nk, keep).clamp(1, nk)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(nk, device=order.device).expand_as(order))
    selected = (rank < keep.unsqueeze(-1)) & ~all_masked.unsqueeze(-1)
    mask = selected | ~similar_k[..., None, :] | ~similar_q[..., :, None] | dense[:, None, None]
    if sink:
        mask[..., 0] = True
    if diagonal:
        mask = mask | validity.diagonal
    return mask & validity.valid  # invalid blocks go off after every forcing rule
