"""The one implementation of scaled dot-product attention.

    softmax(Q K^T * scale / temperature) V,   scale = 1/sqrt(d_k) unless given

Every page, the pretrained-model path and the experiments call `attention()`;
nothing else in the project computes a softmax over attention logits.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True, eq=False)
class AttentionResult:
    scores: torch.Tensor   # (..., n_q, n_k) logits after scale/temperature; masked cells -inf
    weights: torch.Tensor  # (..., n_q, n_k) softmax rows; a fully masked row is all zeros
    output: torch.Tensor   # (..., n_q, d_v) weights @ v
    scale: float           # the factor actually applied to q @ k^T (before temperature)


def causal_mask(n_q: int, n_k: int | None = None, *, device=None) -> torch.Tensor:
    """Boolean (n_q, n_k) mask, True where query i may attend key j (j <= i + n_k - n_q)."""
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(diagonal=n_k - n_q)


def stable_softmax(logits: torch.Tensor) -> torch.Tensor:
    """Row softmax over the last dim that tolerates -inf: a row of only -inf gives zeros."""
    row_max = logits.amax(dim=-1, keepdim=True)                   # (..., n_q, 1)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    weights = (logits - row_max).exp_()                           # (..., n_q, n_k) in [0, 1]
    total = weights.sum(dim=-1, keepdim=True)                     # (..., n_q, 1) >= 1 unless fully masked
    return weights.div_(total.clamp_min_(torch.finfo(weights.dtype).tiny))


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    mask: torch.Tensor | None = None,
    temperature: float = 1.0,
) -> AttentionResult:
    """Scaled dot-product attention over any leading batch/head dims.

    q: (..., n_q, d_k), k: (..., n_k, d_k), v: (..., n_k, d_v).
    scale=None means 1/sqrt(d_k); scale=1.0 is unscaled (as in torch's SDPA).
    mask: bool, broadcastable to (..., n_q, n_k), True = may attend.
    """
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be a positive finite number, got {temperature!r}")
    d_k = q.shape[-1]
    scale = 1.0 / math.sqrt(d_k) if scale is None else float(scale)
    factor = scale / temperature
    scores = (q @ k.transpose(-2, -1)) * factor                  # (..., n_q, n_k)
    # Logits beyond float range (huge inputs, tiny temperatures) saturate instead of
    # turning into inf - inf = NaN; the softmax of a saturated row is still its argmax.
    big = torch.finfo(scores.dtype).max
    scores = scores.nan_to_num_(nan=0.0, posinf=big, neginf=-big)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))         # (..., n_q, n_k)
    weights = stable_softmax(scores)                              # (..., n_q, n_k)
    output = weights @ v                                          # (..., n_q, d_v)
    return AttentionResult(scores=scores, weights=weights, output=output, scale=scale)
