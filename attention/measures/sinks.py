"""Hiding attention sinks (Xiao et al. 2023; Clark et al. 2019 on [SEP]): the first token and
the special tokens, which collect weight that carries no meaning. One definition, used before
the softmax, so the weights over the other keys are the softmax over those keys alone (the
same as renormalising a row without them)."""
from __future__ import annotations

import torch


def hide_sinks(mask: torch.Tensor | None, sinks: torch.Tensor, shape) -> torch.Tensor:
    """`mask` (..., n_q, n_k) bool, True = may attend (None = every key), without the sink keys
    (sinks (n_k,) bool). A row left with no key keeps its original keys (a causal model's
    first row may only see the first token). Returns a bool mask of `shape`."""
    allowed = torch.ones(shape, dtype=torch.bool) if mask is None else mask.expand(shape)
    hidden = allowed & ~sinks                                          # (..., n_q, n_k)
    empty = ~hidden.any(dim=-1, keepdim=True)                          # (..., n_q, 1)
    return torch.where(empty, allowed, hidden)
