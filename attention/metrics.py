"""Per-row summaries of attention distributions p (each row sums to 1, or is all zeros).

All functions reduce the last dim: (..., n) -> (...). None builds an n x n matrix per row.
"""
from __future__ import annotations

import torch


def entropy(p: torch.Tensor) -> torch.Tensor:
    """H = -sum p ln p in nats, with 0 ln 0 = 0. Uniform over n keys: ln n; one-hot: 0."""
    return (-torch.special.xlogy(p, p).sum(dim=-1)).clamp_min(0.0)


def effective_tokens(p: torch.Tensor) -> torch.Tensor:
    """exp(H): how many keys the row spreads over (1 for one-hot, n for uniform)."""
    return entropy(p).exp()


def participation(p: torch.Tensor) -> torch.Tensor:
    """1 / sum p^2, the other common effective count; 0 for an all-zero row."""
    s2 = p.square().sum(dim=-1)
    return torch.where(s2 > 0, 1.0 / s2.clamp_min(1e-30), torch.zeros_like(s2))


def max_weight(p: torch.Tensor) -> torch.Tensor:
    """The largest weight of the row ("confidence", Voita et al. 2019)."""
    return p.amax(dim=-1)


def gini(p: torch.Tensor) -> torch.Tensor:
    """Gini index of the row's weights: 0 for uniform, 1 - 1/n for one-hot."""
    n = p.shape[-1]
    ranked = p.sort(dim=-1).values                                        # (..., n) ascending
    coef = 2.0 * torch.arange(1, n + 1, dtype=p.dtype) - n - 1            # (n,)
    total = ranked.sum(dim=-1)
    g = (ranked * coef).sum(dim=-1) / (n * total.clamp_min(1e-30))
    return torch.where(total > 0, g, torch.zeros_like(g))


def jacobian_norm(p: torch.Tensor) -> torch.Tensor:
    """||diag(p) - p p^T||_F, the gradient the softmax still passes, in O(n) per row.

    ||J||_F^2 = sum_i p_i^2 (1 - p_i)^2 + sum_{i != j} p_i^2 p_j^2
              = sum p^2 - 2 sum p^3 + (sum p^2)^2
    """
    s2 = p.square().sum(dim=-1)
    s3 = p.pow(3).sum(dim=-1)
    return (s2 - 2.0 * s3 + s2.square()).clamp_min(0.0).sqrt()


def js_divergence(p: torch.Tensor, q: torch.Tensor, *, smooth: float = 0.001) -> torch.Tensor:
    """Jensen-Shannon divergence (nats) per row, after Clark et al. 2019's smoothing
    p <- smooth/n + (1 - smooth) p. Zero for equal rows, at most ln 2."""
    n = p.shape[-1]
    p = smooth / n + (1.0 - smooth) * p
    q = smooth / n + (1.0 - smooth) * q
    m = 0.5 * (p + q)
    kl_pm = torch.special.xlogy(p, p / m).sum(dim=-1)
    kl_qm = torch.special.xlogy(q, q / m).sum(dim=-1)
    return (0.5 * (kl_pm + kl_qm)).clamp_min(0.0)


def js_distance(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """sqrt(JS divergence): a metric between rows."""
    return js_divergence(p, q).sqrt()


def head_distances(weights: torch.Tensor) -> torch.Tensor:
    """weights: (heads, n, n) -> (heads, heads) mean JS distance over query rows.

    One pair at a time, so memory stays at one (n, n) temporary however many heads."""
    h = weights.shape[0]
    dist = torch.zeros(h, h)                                              # (heads, heads)
    for i in range(h):
        for j in range(i + 1, h):
            dist[i, j] = dist[j, i] = js_distance(weights[i], weights[j]).mean()
    return dist


ROW_METRICS = {
    "entropy": entropy,
    "effective_tokens": effective_tokens,
    "max_weight": max_weight,
    "gini": gini,
    "jacobian_norm": jacobian_norm,
}


def row_metrics(p: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every metric of ROW_METRICS for each row of p: name -> (...,)."""
    return {name: fn(p) for name, fn in ROW_METRICS.items()}
