"""Reference rows for softmax saturation: how much gradient a row passes as one weight grows.

    J = diag(p) - p p^T,  ||J||_F -> 0 as p -> one-hot

Both tables are computed through the project's own code (core.attention, metrics), so the
Score analysis page's reference curve and its one-logit-ahead table are the numbers the core
gives, not a copied table (docs/science.md, "Metrics of one attention row").
"""
from __future__ import annotations

import pandas as pd
import torch

from attention.measures import rows as metrics
from attention.core import attention


def saturation_curve(n_keys: int, points: int = 101) -> pd.DataFrame:
    """||J||_F of a row where one key holds weight m and the other n_keys - 1 share the rest
    evenly, for m from 1/n_keys (uniform) to 1 (one-hot): columns max_weight, jacobian_norm."""
    m = torch.linspace(1.0 / n_keys, 1.0, points, dtype=torch.float64)      # (points,)
    rest = ((1.0 - m) / max(n_keys - 1, 1))[:, None].expand(points, max(n_keys - 1, 0))
    rows = torch.cat([m[:, None], rest], dim=1)                              # (points, n_keys)
    return pd.DataFrame({"max_weight": m.numpy(),
                         "jacobian_norm": metrics.jacobian_norm(rows).numpy()})


def one_logit_ahead(gaps=(0.0, 2.0, 5.0, 10.0, 20.0), n_keys: int = 4) -> pd.DataFrame:
    """A row of n_keys logits, one of them ahead of the others by g, through the core:
    columns gap, max_weight, jacobian_norm (docs/science.md lists the values)."""
    gaps_t = torch.tensor(gaps, dtype=torch.float64)
    q = gaps_t[:, None, None]                                    # (rows, 1, 1) the query is g
    k = torch.zeros(len(gaps), n_keys, 1, dtype=torch.float64)   # (rows, n_keys, 1)
    k[:, 0, 0] = 1.0                                             # logits (g, 0, ..., 0)
    p = attention(q, k, k, scale=1.0).weights[:, 0]              # (rows, n_keys)
    return pd.DataFrame({"gap": gaps_t.numpy(), "max_weight": metrics.max_weight(p).numpy(),
                         "jacobian_norm": metrics.jacobian_norm(p).numpy()})
