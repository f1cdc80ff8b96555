"""The toy model: tokens -> vectors (a hashed embedding per token text, plus positions) -> seeded
multi-head queries, keys and values.

The same token text and seed always give the same vector on every machine (the seed comes
from SHA-256, not Python's randomised `hash`). Without positional encodings two equal tokens
get equal vectors, so their attention rows are identical: the UI shows that.

W ~ N(0, 1/d_model) keeps every q and k component at about unit variance when the inputs
have unit variance: then q.k has variance d_k (Vaswani et al. 2017, footnote 4), which is
exactly what the sqrt(d_k) scaling undoes.
"""
from __future__ import annotations

import hashlib
import math

import torch


def token_seed(token: str, seed: int) -> int:
    """A 63-bit generator seed from the token text and the user's seed."""
    digest = hashlib.sha256(f"{seed}\x1f{token}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def token_vectors(tokens: tuple[str, ...] | list[str], d_model: int, seed: int) -> torch.Tensor:
    """(n, d_model) standard-normal vectors, one per distinct token text, repeated by position."""
    vocab = {t: i for i, t in enumerate(dict.fromkeys(tokens))}
    gen = torch.Generator()
    table = torch.empty(len(vocab), d_model)                         # (vocab, d_model)
    for token, row in vocab.items():
        gen.manual_seed(token_seed(token, seed))
        table[row] = torch.randn(d_model, generator=gen)
    index = torch.tensor([vocab[t] for t in tokens], dtype=torch.long)  # (n,)
    return table[index]                                              # (n, d_model)


def sinusoidal_positions(n: int, d_model: int) -> torch.Tensor:
    """(n, d_model) encodings of Vaswani et al. 2017, section 3.5: sin on even, cos on odd dims."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]                  # (n, 1)
    i = torch.arange(0, d_model, 2, dtype=torch.float32)                  # (ceil(d/2),)
    angle = pos * torch.exp(-math.log(10000.0) * i / max(d_model, 1))     # (n, ceil(d/2))
    pe = torch.zeros(n, d_model)                                          # (n, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe


def embed(tokens, d_model: int, seed: int, positional: bool) -> torch.Tensor:
    """(n, d_model) inputs with components of about unit variance, positions optional."""
    x = token_vectors(tokens, d_model, seed)                              # (n, d_model)
    if positional:
        # token ~ N(0, 1) and sin/cos have variance 1/2: rescale the sum back to unit variance
        x = (x + sinusoidal_positions(len(tokens), d_model)) / math.sqrt(1.5)
    return x


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
