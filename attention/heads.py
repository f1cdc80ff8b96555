"""Seeded projections of inputs to multi-head queries, keys and values.

W ~ N(0, 1/d_model) keeps every q and k component at about unit variance when the inputs
have unit variance: then q.k has variance d_k (Vaswani et al. 2017, footnote 4), which is
exactly what the sqrt(d_k) scaling undoes.
"""
from __future__ import annotations

import torch


def projections(d_model: int, d_k: int, heads: int, seed: int) -> torch.Tensor:
    """(3, heads, d_model, d_k) weights for Q, K and V, the same for the same arguments."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(3, heads, d_model, d_k, generator=gen)  # (3, heads, d_model, d_k)
    return w / d_model ** 0.5


def project(x: torch.Tensor, d_k: int, heads: int, seed: int) -> tuple[torch.Tensor, ...]:
    """x: (n, d_model) -> q, k, v, each (heads, n, d_k)."""
    w = projections(x.shape[-1], d_k, heads, seed)          # (3, heads, d_model, d_k)
    qkv = torch.einsum("nd,thdk->thnk", x, w)               # (3, heads, n, d_k)
    return qkv[0], qkv[1], qkv[2]
