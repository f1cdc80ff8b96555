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


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The raw scores q k^T, unscaled and unmasked: q (..., n_q, d_k), k (..., n_k, d_k) ->
    (..., n_q, n_k) (for one head's (n, d_k) inputs, (n, n); for all heads', (heads, n, n)).
    The one place the project multiplies queries by keys: attention() scales these, and the
    pages' "raw score" columns and histograms are these."""
    return torch.matmul(q, k.transpose(-2, -1))                   # (..., n_q, n_k)


def _softmax_rows(logits: torch.Tensor, dead: torch.Tensor | None) -> torch.Tensor:
    """torch.softmax (max-subtracted, one fused pass) with the rows flagged in `dead`
    (broadcastable to (..., n_q, 1)) set to zeros. Those rows are softmaxed as zeros first,
    so neither the weights nor their gradients ever see NaN."""
    if dead is None or not bool(dead.any()):
        return torch.softmax(logits, dim=-1)                      # (..., n_q, n_k)
    weights = torch.softmax(logits.masked_fill(dead, 0.0), dim=-1)
    return weights.masked_fill(dead, 0.0)                         # (..., n_q, n_k)


def _cannot_overflow(q: torch.Tensor, k: torch.Tensor, factor: float) -> bool:
    """True when no logit can leave float range: |q.k| <= |q| |k| (Cauchy-Schwarz), so
    bounding the largest norms bounds every dot product and its rounding. O(n d), not O(n^2)."""
    with torch.no_grad():
        bound = (torch.linalg.vector_norm(q, dim=-1).amax()
                 * torch.linalg.vector_norm(k, dim=-1).amax()).item()
    limit = torch.finfo(torch.promote_types(q.dtype, k.dtype)).max / 4
    return bound <= limit and bound * abs(factor) <= limit  # False for inf and NaN too


def _wide_logits(q: torch.Tensor, k: torch.Tensor, factor: float) -> torch.Tensor:
    """q @ k^T * factor in float64 (at least); what still overflows saturates, NaN -> 0."""
    wide = torch.promote_types(torch.promote_types(q.dtype, k.dtype), torch.float64)
    logits = scores(q.to(wide), k.to(wide)) * factor              # (..., n_q, n_k)
    big = torch.finfo(wide).max
    return logits.nan_to_num(nan=0.0, posinf=big, neginf=-big)


def _logits(q: torch.Tensor, k: torch.Tensor, factor: float,
            raw: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(scores(q, k) * factor in q's dtype, the same in float64 or None): the float64 copy
    exists only when a logit could leave float range (huge inputs, tiny temperatures); the
    softmax then runs on it, where they fit, so a saturated row still picks the true argmax,
    and the first saturates at the dtype's largest finite value instead of inf or NaN.
    raw: scores(q, k) when the caller has it already (left unchanged)."""
    if raw is None:
        logits = scores(q, k)                                     # (..., n_q, n_k)
        if factor != 1.0:
            logits.mul_(factor)
    else:
        logits = raw * factor                                     # (..., n_q, n_k) a copy
    if not logits.numel() or _cannot_overflow(q, k, factor):
        return logits, None
    exact = _wide_logits(q, k, factor)                            # (..., n_q, n_k) float64
    big = torch.finfo(logits.dtype).max
    return exact.clamp(-big, big).to(logits.dtype), exact


def logits(q: torch.Tensor, k: torch.Tensor, factor: float,
           raw: torch.Tensor | None = None) -> torch.Tensor:
    """The logits attention() gives its softmax, q k^T * factor (factor = scale / temperature),
    unmasked: (..., n_q, n_k), saturating at the dtype's largest finite value as
    AttentionResult.scores does, never inf or NaN for finite q and k. raw: scores(q, k) if
    the caller has it (saves the product)."""
    return _logits(q, k, factor, raw)[0]


def _mask_fill(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """-inf where mask is False; in place unless the mask adds leading dims."""
    if torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape:
        return scores.masked_fill_(~mask, float("-inf"))
    return scores.masked_fill(~mask, float("-inf"))


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

    Allocates the two (..., n_q, n_k) tensors it returns and nothing else of that size
    (in-place scaling and masking; autograd still works through every step).
    """
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be a positive finite number, got {temperature!r}")
    d_k = q.shape[-1]
    scale = 1.0 / math.sqrt(d_k) if scale is None else float(scale)
    factor = scale / temperature
    logits, exact = _logits(q, k, factor)                        # (..., n_q, n_k)
    dead = None
    if mask is not None:
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be boolean (True = may attend), got {mask.dtype}")
        logits = _mask_fill(logits, mask)                         # (..., n_q, n_k)
        exact = None if exact is None else _mask_fill(exact, mask)
        dead = ~mask.any(dim=-1, keepdim=True)                    # (..., n_q, 1) fully masked
    weights = _softmax_rows(logits if exact is None else exact, dead).to(logits.dtype)
    output = weights @ v                                          # (..., n_q, d_v)
    return AttentionResult(scores=logits, weights=weights, output=output, scale=scale)
