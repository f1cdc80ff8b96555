"""Summaries of many heads at once: Clark et al. 2019's per-head table, attention rollout
(Abnar and Zuidema 2020) and value-weighted norms (Kobayashi et al. 2020). Pure torch on
weights that already came out of core.attention; nothing here computes attention.
"""
from __future__ import annotations

import unicodedata

import pandas as pd
import torch

from . import metrics

CLS, SEP = "[CLS]", "[SEP]"
HEAD_COLUMNS = ("entropy", "max_weight", "to_cls", "to_sep", "to_punct",
                "to_prev", "to_next", "to_self")


def is_punctuation(token: str) -> bool:
    """True for a token made only of punctuation or symbols (".", ",", "--", "?!")."""
    text = token.removeprefix("##")
    return bool(text) and all(unicodedata.category(ch)[0] in "PS" for ch in text)


def token_classes(tokens: tuple[str, ...] | list[str]) -> dict[str, torch.Tensor]:
    """Boolean (n,) masks of the keys each share column counts."""
    return {
        "to_cls": torch.tensor([t == CLS for t in tokens], dtype=torch.bool),
        "to_sep": torch.tensor([t == SEP for t in tokens], dtype=torch.bool),
        "to_punct": torch.tensor([is_punctuation(t) for t in tokens], dtype=torch.bool),
    }


def _diagonal_share(weights: torch.Tensor, offset: int) -> torch.Tensor:
    """Mean over the queries that have one of weights[..., i, i + offset]: (...) from
    (..., n, n); 0 when no query has such a key (n = 1 with offset 1)."""
    diag = weights.diagonal(offset=offset, dim1=-2, dim2=-1)              # (..., n - |offset|)
    if diag.shape[-1] == 0:
        return weights.new_zeros(weights.shape[:-2])
    return diag.mean(dim=-1)


def head_stats(weights: torch.Tensor, tokens) -> dict[str, torch.Tensor]:
    """Clark et al. 2019's per-head summary of weights (..., n, n), rows over keys.

    Each value has the leading shape (...) (e.g. (layers, heads)): mean row entropy (nats),
    mean max weight, and the mean share of a row's weight that lands on [CLS], [SEP],
    punctuation, the previous token, the next token and the token itself."""
    stats = {
        "entropy": metrics.entropy(weights).mean(dim=-1),                 # (...)
        "max_weight": metrics.max_weight(weights).mean(dim=-1),           # (...)
    }
    for name, keys in token_classes(tokens).items():
        stats[name] = (weights * keys.to(weights.dtype)).sum(dim=-1).mean(dim=-1)  # (...)
    stats["to_prev"] = _diagonal_share(weights, -1)
    stats["to_next"] = _diagonal_share(weights, 1)
    stats["to_self"] = _diagonal_share(weights, 0)
    return stats


def head_table(weights: torch.Tensor, tokens) -> pd.DataFrame:
    """One row per (layer, head) of weights (layers, heads, n, n) with HEAD_COLUMNS."""
    layers, heads = weights.shape[:2]
    stats = head_stats(weights, tokens)                                   # name -> (layers, heads)
    ll, hh = torch.meshgrid(torch.arange(layers), torch.arange(heads), indexing="ij")
    frame = pd.DataFrame({"layer": ll.flatten().numpy(), "head": hh.flatten().numpy()})
    for name in HEAD_COLUMNS:
        frame[name] = stats[name].flatten().numpy()
    return frame


def rollout(weights: torch.Tensor) -> torch.Tensor:
    """Attention rollout. weights: (layers, heads, n, n) -> (layers, n, n), where entry l is
    R_l = A_l R_(l-1), R_0 = A_0, A_l = rownorm(0.5 * mean_heads(W_l) + 0.5 * I)."""
    n = weights.shape[-1]
    eye = torch.eye(n, dtype=weights.dtype)                               # (n, n)
    a = 0.5 * weights.mean(dim=1) + 0.5 * eye                             # (layers, n, n)
    a = a / a.sum(dim=-1, keepdim=True)                                   # rows sum to 1
    out, r = [], eye
    for layer_a in a:
        r = layer_a @ r                                                   # (n, n)
        out.append(r)
    return torch.stack(out)                                               # (layers, n, n)


def value_weighted_norms(weights: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """||alpha_ij f(x_j)|| for weights (..., n, n) and transformed vectors f (..., n, hidden):
    since alpha_ij >= 0 this is alpha_ij * ||f(x_j)||. Returns (..., n, n)."""
    norms = f.norm(dim=-1)                                                # (..., n)
    return weights * norms.unsqueeze(-2)                                  # (..., n, n)
