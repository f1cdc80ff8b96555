"""Properties of attention.core.attention on random shapes, values up to +-1e30, random masks
(fully masked rows included) and random temperatures and scales.

For any such input: weights and output are finite, every row of weights sums to 1 or (exactly
when the row is fully masked) is all zeros, masked cells weigh exactly 0, and the heaviest key
of a row is one of its top-scoring keys by an independent float64 computation. With moderate
values the weights match a float64 numpy softmax outright.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attention.core import attention

PROPERTY = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
DTYPES = {np.float32: torch.float32, np.float64: torch.float64}


@st.composite
def problems(draw, bound: float = 1e30):
    """(q, k, v, mask, scale, temperature) with 0-2 leading dims and a broadcastable mask."""
    lead = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))
    n_q, n_k = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(list(DTYPES)))
    width = 32 if dtype is np.float32 else 64
    edge = float(np.array(bound, dtype))  # +-1e30 rounded to the dtype
    values = st.floats(-edge, edge, allow_nan=False, allow_infinity=False, width=width)
    q = draw(arrays(dtype, (*lead, n_q, d_k), elements=values))     # (..., n_q, d_k)
    k = draw(arrays(dtype, (*lead, n_k, d_k), elements=values))     # (..., n_k, d_k)
    v = draw(arrays(dtype, (*lead, n_k, d_v), elements=values))     # (..., n_k, d_v)
    mask_shape = draw(st.sampled_from([None, (*lead, n_q, n_k), (n_q, n_k), (*lead, 1, n_k)]))
    mask = None
    if mask_shape is not None:
        mask = draw(arrays(np.bool_, mask_shape))                    # True = may attend
        dead = draw(st.lists(st.integers(0, n_q - 1), max_size=2))
        if mask_shape[-2] == n_q:
            mask[..., dead, :] = False                               # fully masked rows
    scale = draw(st.one_of(st.none(), st.just(1.0), st.floats(1e-3, 1e3)))
    temperature = draw(st.floats(1e-4, 1e4))
    return q, k, v, mask, scale, temperature


def run(q, k, v, mask, scale, temperature):
    t = DTYPES[q.dtype.type]
    return attention(torch.from_numpy(q).to(t), torch.from_numpy(k).to(t),
                     torch.from_numpy(v).to(t),
                     mask=None if mask is None else torch.from_numpy(mask),
                     scale=scale, temperature=temperature)


def reference_logits(q, k, mask, scale, temperature) -> np.ndarray:
    """Float64 logits computed independently; -inf where masked. Products of values up to 1e30
    stay far inside float64's range (|q.k| <= 8e60), so nothing saturates here."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits = np.matmul(q.astype(np.float64), np.swapaxes(k.astype(np.float64), -1, -2))
    logits = logits * (scale / temperature)                          # (..., n_q, n_k)
    if mask is not None:
        logits = np.where(np.broadcast_to(mask, logits.shape), logits, -np.inf)
    return logits


def full_mask(mask, shape) -> np.ndarray:
    return np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)


@PROPERTY
@given(problems())
def test_weights_are_finite_rows_sum_to_one_or_are_all_zero(problem):
    q, k, v, mask, scale, temperature = problem
    res = run(*problem)
    weights = res.weights.double().numpy()                           # (..., n_q, n_k)
    allowed = full_mask(mask, weights.shape)
    dead = ~allowed.any(axis=-1)                                     # (..., n_q)

    assert res.weights.dtype == res.output.dtype == DTYPES[q.dtype.type]
    assert np.isfinite(weights).all()
    assert torch.isfinite(res.output).all()
    assert (weights >= 0).all() and (weights <= 1).all()
    assert (weights[~allowed] == 0).all()                            # masked cells weigh 0
    sums = weights.sum(axis=-1)
    assert np.allclose(sums[~dead], 1.0, atol=1e-5)
    assert (weights[dead] == 0).all()                                # dead row: zeros, not NaN
    assert (res.output.double().numpy()[dead] == 0).all()
    # Scores: -inf exactly where masked, finite (saturated at most) everywhere else.
    scores = res.scores.double().numpy()
    assert np.isneginf(scores[~allowed]).all() and np.isfinite(scores[allowed]).all()


@PROPERTY
@given(problems())
def test_heaviest_key_is_a_top_scoring_key(problem):
    """Saturated or not, a row never puts its largest weight on a key that scores clearly
    lower than the row's best key (float64 reference; float32 rounding allowed for)."""
    q, k, v, mask, scale, temperature = problem
    res = run(*problem)
    logits = reference_logits(q, k, mask, scale, temperature)        # (..., n_q, n_k)
    weights = res.weights.double().numpy()
    live = np.isfinite(logits).any(axis=-1)
    if not live.any():
        return
    best = logits.max(axis=-1)[live]                                 # (rows,)
    chosen = np.take_along_axis(logits, weights.argmax(axis=-1)[..., None], -1)[..., 0][live]
    eps = np.finfo(q.dtype).eps
    # A computed logit is off by at most (d_k + 2) eps |q| |k| factor (Cauchy-Schwarz on the
    # rounded dot product); two of them may be, and weights that round to equal tie (4 eps).
    qn = np.linalg.norm(q.astype(np.float64), axis=-1)               # (..., n_q)
    kn = np.linalg.norm(k.astype(np.float64), axis=-1).max(axis=-1, keepdims=True)  # (..., 1)
    factor = (1 / math.sqrt(q.shape[-1]) if scale is None else scale) / temperature
    slack = 2 * (q.shape[-1] + 2) * eps * (qn * kn * factor)[live] + 4 * eps
    assert (chosen >= best - slack).all()


@settings(max_examples=200, deadline=None)
@given(problems(bound=10.0))
def test_moderate_values_match_a_float64_softmax(problem):
    """Values up to 10 and temperatures of at least 0.1 (logits up to a few thousand): the
    weights and output equal a float64 numpy softmax, dead rows zero."""
    q, k, v, mask, scale, temperature = problem
    temperature = max(temperature, 0.1)
    scale = None if scale is None else min(scale, 10.0)
    res = run(q, k, v, mask, scale, temperature)
    logits = reference_logits(q, k, mask, scale, temperature)
    live = np.isfinite(logits).any(axis=-1, keepdims=True)
    top = np.where(live, logits.max(axis=-1, keepdims=True, initial=-np.inf), 0.0)
    e = np.where(np.isfinite(logits), np.exp(logits - top), 0.0)
    expected = np.where(live, e / np.where(live, e.sum(axis=-1, keepdims=True), 1.0), 0.0)
    tol = 1e-3 if q.dtype == np.float32 else 1e-9
    np.testing.assert_allclose(res.weights.double().numpy(), expected, atol=tol, rtol=0)
    out = np.matmul(expected, v.astype(np.float64))
    np.testing.assert_allclose(res.output.double().numpy(), out, atol=tol * 40, rtol=tol)
