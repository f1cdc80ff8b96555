"""One computation of the raw scores q.k^T (attention.core.scores) and of the logits made from
them (core.logits): every place that shows them agrees with an independent einsum, and the
Score analysis page's scaled scores with core.attention's own, even where they saturate."""
from __future__ import annotations

import math

import numpy as np
import torch

from attention import core

from attention.analysis import frames

from attention.analysis import scorestats
from attention.analysis import analyze, analyze_qkv
from attention.spec import AttentionSpec


def einsum_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return torch.einsum("...qd,...kd->...qk", q.double(), k.double())   # (..., n_q, n_k)


def test_core_scores_is_q_times_k_transposed():
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(3, 5, 7, generator=gen)                   # (heads, n_q, d_k)
    k = torch.randn(3, 6, 7, generator=gen)                   # (heads, n_k, d_k)
    assert core.scores(q, k).shape == (3, 5, 6)
    assert torch.allclose(core.scores(q, k).double(), einsum_scores(q, k), atol=1e-5)
    # attention()'s logits are these, times scale / temperature
    res = core.attention(q, k, k, temperature=2.0)
    assert torch.allclose(res.scores.double(), einsum_scores(q, k) / math.sqrt(7) / 2.0,
                          atol=1e-5)


def test_every_caller_agrees_with_an_einsum():
    spec = AttentionSpec(tokens=tuple("the cat sat on the mat and then it slept".split()),
                         causal=True, temperature=0.5)
    a = analyze(spec)
    expected = einsum_scores(a.q, a.k)                        # (heads, n, n)
    assert torch.allclose(a.raw_scores().double(), expected, atol=1e-4)
    assert torch.allclose(a.raw_scores(2).double(), expected[2], atol=1e-4)

    frame = frames.cells(a)                                   # causal: masked cells left out
    want = expected.numpy()[frame["head"], frame["query_pos"], frame["key_pos"]]
    assert np.allclose(frame["raw_score"], want, atol=1e-4)

    stats = scorestats.score_stats(a, [1, 3]).set_index("series")
    allowed = expected[[1, 3]][:, a.mask]                     # (2, allowed cells)
    for series, values in (("raw", allowed), ("scaled", allowed * a.scale / 0.5)):
        assert stats.loc[series, "count"] == values.numel()
        assert math.isclose(stats.loc[series, "mean"], values.mean().item(), abs_tol=1e-4)
        assert math.isclose(stats.loc[series, "std"], values.std().item(), rel_tol=1e-4)
        assert math.isclose(stats.loc[series, "max"], values.max().item(), rel_tol=1e-5)


def test_scaled_scores_saturate_as_the_core_does():
    """Logits beyond float32 (huge q and k, a tiny temperature): the page's scaled series
    holds core.attention's saturated scores, never inf, and its histogram stays finite."""
    big = 1e19                                                # q.k = 1e38: finite; / 0.01 is not
    q = torch.tensor([[[big, 0.0], [1.0, 1.0]]])              # (1 head, n=2, d_k=2)
    k = torch.tensor([[[big, 0.0], [0.0, 1.0]]])
    spec = AttentionSpec(tokens=("a", "b"), d_k=2, heads=1, temperature=0.01)
    a = analyze_qkv(spec, ("a", "b"), q, k, k)
    res = core.attention(q, k, k, temperature=0.01)
    assert torch.isfinite(res.scores).all()
    assert torch.equal(core.logits(q, k, res.scale / 0.01), res.scores)
    stats = scorestats.score_stats(a, [0]).set_index("series")
    assert stats.loc["scaled", "max"] == res.scores.max().item() == torch.finfo(torch.float32).max
    hist = scorestats.score_histogram(a, [0])
    assert np.isfinite(hist[["bin_start", "bin_end", "share"]].to_numpy()).all()
