"""analyze(), the d_k sweeps and the toy model's inputs, against independent references."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from attention.measures import rows as metrics
from attention.analysis import (DK_SWEEP, SWEEP_MAX_HEADS, SWEEP_MAX_TOKENS, analyze, dk_sweep,
                                random_dk_sweep)
from attention.core import attention, causal_mask
from attention.models.toy import embed, token_vectors
from attention.models.toy import project
from attention.spec import AttentionSpec

ROOT = Path(__file__).resolve().parent.parent
TOL = dict(atol=1e-5, rtol=1e-5)
# The same numbers recomputed (other tensors, other positions, another call): float32 sums may
# differ in the last bits between CPUs' matmul kernels, so "equal" means within SAME. Measured
# on one CPU: equal tokens' columns differ by up to 2.4e-7; positions change weights by 0.1.
SAME = dict(atol=1e-5, rtol=1e-5)
SWEEP_COLUMNS = ["d_k", "scaled", "score_std", *metrics.ROW_METRICS]


@pytest.fixture(scope="module")
def default():
    return analyze(AttentionSpec())


def test_inputs_are_the_embedding_projected(default):
    spec = default.spec
    x = embed(spec.tokens, spec.d_model, spec.seed, spec.positional)
    q, k, v = project(x, spec.d_k, spec.heads, spec.seed)
    for ours, ref in ((default.q, q), (default.k, k), (default.v, v)):
        torch.testing.assert_close(ours, ref, **SAME)
    assert default.q.shape == (spec.heads, spec.n, spec.d_k)
    assert default.tokens == spec.tokens and default.heads == 4 and default.n == 11


def test_scaled_and_unscaled_are_core_attention_and_sdpa(default):
    a = default
    for result, scale in ((a.scaled, None), (a.unscaled, 1.0)):
        ours = attention(a.q, a.k, a.v, scale=scale)
        torch.testing.assert_close(result.weights, ours.weights, **SAME)
        torch.testing.assert_close(result.output, ours.output, **SAME)
        ref = F.scaled_dot_product_attention(a.q, a.k, a.v, scale=scale)
        assert torch.allclose(result.output, ref, **TOL)
    assert a.scaled.scale == 1 / math.sqrt(16) and a.unscaled.scale == 1.0
    raw = a.q @ a.k.transpose(-2, -1)
    assert torch.allclose(a.raw_scores(), raw) and torch.allclose(a.raw_scores(2), raw[2])
    assert torch.allclose(a.scaled.scores, raw / 4, **TOL)
    assert torch.allclose(a.unscaled.scores, raw, **TOL)
    assert a.mask is None


def test_metrics_per_head_and_row(default):
    for values, result in ((default.scaled_metrics, default.scaled),
                           (default.unscaled_metrics, default.unscaled)):
        assert list(values) == list(metrics.ROW_METRICS)
        expected = metrics.row_metrics(result.weights)
        for name, t in values.items():
            assert t.shape == (4, 11) and torch.isfinite(t).all()
            torch.testing.assert_close(t, expected[name], **SAME)
    assert (default.unscaled_metrics["entropy"].mean() < default.scaled_metrics["entropy"].mean())


def test_one_head_and_a_window_of_rows_recomputed_equal_sdpa(default):
    """result(scaled, heads, queries): the rows of a few heads, each softmax over every key."""
    a = default
    for scaled, scale in ((True, None), (False, 1.0)):
        ref = F.scaled_dot_product_attention(a.q, a.k, a.v, scale=scale)     # (heads, n, d_v)
        one = a.result(scaled, 2)
        assert one.weights.shape == (a.n, a.n)
        torch.testing.assert_close(one.output, ref[2], **TOL)
        rows = a.result(scaled, [3, 1], range(4, 7))
        assert rows.weights.shape == (2, 3, a.n)
        torch.testing.assert_close(rows.output, ref[[3, 1], 4:7], **TOL)
        torch.testing.assert_close(rows.weights, a.result(scaled).weights[[3, 1], 4:7], **TOL)


def test_an_analysis_keeps_no_n_by_n_tensor():
    """At 512 tokens and 12 heads, what an Analysis holds is q, k, v and (heads, n) metrics:
    no tensor of n x n cells (the four all-heads results were 0.8 GB at 2048 tokens)."""
    a = analyze(AttentionSpec(tokens=tuple(f"w{i}" for i in range(512)), heads=12, d_k=16,
                              d_model=32))
    kept = [*a.__dict__.values(), *a.scaled_metrics.values(), *a.unscaled_metrics.values()]
    tensors = [t for t in kept if isinstance(t, torch.Tensor)]
    assert all(t.numel() < a.n * a.n for t in tensors)
    assert sum(t.numel() * t.element_size() for t in tensors) < 2 * 2**20


def test_causal_and_temperature():
    spec = AttentionSpec(causal=True, temperature=2.0)
    a = analyze(spec)
    assert torch.equal(a.mask, causal_mask(spec.n))
    upper = ~causal_mask(spec.n)
    assert torch.equal(a.scaled.weights[:, upper], torch.zeros(4, int(upper.sum())))
    assert torch.isneginf(a.scaled.scores[:, upper]).all()
    assert torch.equal(a.scaled.weights[:, 0, 0], torch.ones(4))  # the first token sees itself only
    ref = F.scaled_dot_product_attention(a.q, a.k, a.v, is_causal=True, scale=0.25 / 2.0)
    assert torch.allclose(a.scaled.output, ref, **TOL)
    ref = F.scaled_dot_product_attention(a.q, a.k, a.v, is_causal=True, scale=1.0 / 2.0)
    assert torch.allclose(a.unscaled.output, ref, **TOL)
    assert all(torch.isfinite(t).all() for t in a.scaled_metrics.values())


@pytest.fixture(scope="module")
def init_sweep():
    return random_dk_sweep()


def test_random_sweep_score_spread_is_sqrt_dk(init_sweep):
    assert sorted(set(init_sweep["d_k"])) == sorted(DK_SWEEP)
    for row in init_sweep.itertuples():
        expected = 1.0 if row.scaled else math.sqrt(row.d_k)
        assert row.score_std == pytest.approx(expected, rel=0.10), row


def monte_carlo_rows(d_k: int, scaled: bool, samples: int = 256, n: int = 16,
                     seed: int = 20_261_201) -> dict[str, tuple[float, float]]:
    """Entropy, max weight and ||J||_F of softmax(q.k * scale) rows with q, k ~ N(0, I),
    computed here in numpy with its own generator: name -> (mean, standard error). The error
    is taken over per-sample means, since rows of one sample share their keys."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((samples, n, d_k))                             # (samples, n, d_k)
    k = rng.standard_normal((samples, n, d_k))
    z = q @ k.transpose(0, 2, 1) / (math.sqrt(d_k) if scaled else 1.0)    # (samples, n, n)
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    jac = np.eye(n) * p[..., None, :] - p[..., :, None] * p[..., None, :]  # (samples, n, n, n)
    rows = {"entropy": -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(-1),
            "max_weight": p.max(-1), "jacobian_norm": np.sqrt((jac ** 2).sum((-2, -1)))}
    per_sample = {name: v.mean(-1) for name, v in rows.items()}           # (samples,)
    return {name: (v.mean(), v.std(ddof=1) / math.sqrt(samples)) for name, v in per_sample.items()}


@pytest.mark.parametrize("d_k", [1, 16, 256, 1024])
def test_random_sweep_matches_an_independent_monte_carlo(init_sweep, d_k):
    """random_dk_sweep (torch, the core, the project's metrics) against numpy draws of the
    same setting with another seed, within 5 combined standard errors. docs/science.md lists
    the values (scaled entropy about 2.36-2.44 at every d_k; unscaled 0.91 at d_k 16, 0.19 at
    256, 0.09 at 1024, where ln 16 = 2.77 is uniform)."""
    by = init_sweep.set_index(["d_k", "scaled"])
    for scaled in (True, False):
        for name, (mean, se) in monte_carlo_rows(d_k, scaled).items():
            got = by.loc[(d_k, scaled), name]
            assert abs(got - mean) <= 5 * math.sqrt(2) * se + 1e-9, (d_k, scaled, name, got, mean, se)


def test_random_sweep_scaled_stays_flat_and_unscaled_collapses(init_sweep):
    """The shape of the sweep: scaled rows keep their spread at every d_k; unscaled rows
    sharpen monotonically towards one-hot, and at d_k = 1 the two are the same."""
    by = init_sweep.set_index(["d_k", "scaled"])
    scaled = by.xs(True, level="scaled")
    unscaled = by.xs(False, level="scaled")
    assert scaled["entropy"].max() - scaled["entropy"].min() < 0.15
    assert unscaled["entropy"].is_monotonic_decreasing
    assert unscaled["max_weight"].is_monotonic_increasing
    assert unscaled.loc[1024, "entropy"] < 0.1 * scaled.loc[1024, "entropy"]
    assert scaled.loc[1].equals(unscaled.loc[1])  # 1/sqrt(1) = 1


@pytest.mark.parametrize("causal", [False, True])
def test_dk_sweep_of_a_spec(causal):
    frame = dk_sweep(AttentionSpec(causal=causal))
    assert list(frame.columns) == SWEEP_COLUMNS
    assert len(frame) == 2 * len(DK_SWEEP)
    assert frame.drop(columns="scaled").notna().all().all()
    assert set(frame["scaled"]) == {True, False}
    unscaled = frame[~frame["scaled"]].set_index("d_k")
    assert unscaled.loc[1024, "score_std"] > 10 * unscaled.loc[1, "score_std"]


REPEATED = ("the", "cat", "sat", "on", "the", "mat")


def test_without_positions_equal_tokens_attend_identically():
    a = analyze(AttentionSpec(tokens=REPEATED, positional=False))
    for result in (a.scaled, a.unscaled):
        # Equal inputs at two positions: the same numbers up to float32 rounding (bitwise
        # identity depends on the CPU's matmul kernels, position by position).
        w = result.weights                                                 # (heads, n, n)
        torch.testing.assert_close(w[:, 0], w[:, 4], **SAME)               # the same row
        torch.testing.assert_close(w[:, :, 0], w[:, :, 4], **SAME)         # the same column
    b = analyze(AttentionSpec(tokens=REPEATED, positional=True))
    assert not torch.allclose(b.scaled.weights[:, 0], b.scaled.weights[:, 4], atol=1e-3)


def test_embedding_is_deterministic_per_token_and_seed():
    assert torch.equal(embed(REPEATED, 32, 5, True), embed(REPEATED, 32, 5, True))
    alone = token_vectors(["cat"], 32, 5)
    assert torch.equal(token_vectors(["dog", "cat"], 32, 5)[1], alone[0])
    assert not torch.equal(token_vectors(["cat"], 32, 6), alone)
    assert not torch.equal(token_vectors(["cat "], 32, 5), alone)


_EMBED_SCRIPT = """
import json, torch
from attention.models.toy import embed, token_vectors
print(json.dumps([token_vectors(["the", "cat", "猫", "👋"], 8, 7).tolist(),
                  embed(["a", "b", "a"], 6, 3, True).tolist()]))
"""


def test_embedding_does_not_depend_on_python_hash_seed():
    seed = "1" if os.environ.get("PYTHONHASHSEED") == "12345" else "12345"  # not ours
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _EMBED_SCRIPT], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True)
    there = json.loads(out.stdout)
    here = [token_vectors(["the", "cat", "猫", "👋"], 8, 7).tolist(),
            embed(["a", "b", "a"], 6, 3, True).tolist()]
    assert there == here


def test_components_have_unit_variance():
    tokens = [f"t{i}" for i in range(500)]
    x = token_vectors(tokens, 64, 0)
    assert x.mean().item() == pytest.approx(0.0, abs=0.02)
    assert x.var().item() == pytest.approx(1.0, abs=0.05)
    # positions (sin/cos, mean square 1/2) are added and the sum rescaled: still unit power
    assert embed(tokens, 64, 0, True).square().mean().item() == pytest.approx(1.0, abs=0.05)
    for positional in (False, True):
        a = analyze(AttentionSpec(tokens=tuple(tokens[:256]), d_model=64, d_k=16, heads=4,
                                  positional=positional))
        for t in (a.q, a.k, a.v):
            assert t.var().item() == pytest.approx(1.0, abs=0.15)


def test_dk_sweep_cost_is_capped_at_four_heads_and_256_tokens():
    """A 16-head spec sweeps as its 4-head twin (means over heads), a long input as its first
    256 tokens: the sweep's cost does not grow with the spec past those caps."""
    many = AttentionSpec(tokens=tuple(f"w{i}" for i in range(300)), heads=16, d_model=64, d_k=4)
    few = AttentionSpec(tokens=many.tokens[:SWEEP_MAX_TOKENS], heads=SWEEP_MAX_HEADS,
                        d_model=64, d_k=16)
    pd.testing.assert_frame_equal(dk_sweep(many, (1, 8, 64)), dk_sweep(few, (1, 8, 64)))
    assert not dk_sweep(replace(few, heads=2), (1, 8, 64)).equals(dk_sweep(few, (1, 8, 64)))
