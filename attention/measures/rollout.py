"""Attention rollout (Abnar and Zuidema 2020, section 3): how much of each input position's
information reaches each position after layer l, if heads are averaged and the residual
connection counts as half of every layer. `residual_attention` is the per-layer matrix both
rollout and attention flow (attention.measures.flow) are built on."""
from __future__ import annotations

import torch


def residual_attention(weights: torch.Tensor) -> torch.Tensor:
    """A_l = rownorm(0.5 * mean_heads(W_l) + 0.5 * I): weights (layers, heads, n, n) ->
    (layers, n, n) in the weights' dtype, rows summing to 1."""
    eye = torch.eye(weights.shape[-1], dtype=weights.dtype)              # (n, n)
    a = 0.5 * weights.mean(dim=1) + 0.5 * eye                             # (layers, n, n)
    return a / a.sum(dim=-1, keepdim=True)


def rollout(weights: torch.Tensor) -> torch.Tensor:
    """weights (layers, heads, n, n) -> (layers, n, n), entry l is R_l = A_l R_(l-1), R_0 = A_0."""
    out, r = [], torch.eye(weights.shape[-1], dtype=weights.dtype)
    for layer_a in residual_attention(weights):                          # (n, n) each
        r = layer_a @ r
        out.append(r)
    return torch.stack(out)                                               # (layers, n, n)
