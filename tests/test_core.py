"""attention.core.attention against torch's scaled_dot_product_attention and hand values."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attention.core import attention, causal_mask

TOL = dict(atol=1e-5, rtol=1e-5)

# (leading dims, n_q, n_k, d_k, d_v): no batch dim, heads only, two leading dims, n_q != n_k
SHAPES = [((), 5, 5, 4, 4), ((3,), 6, 6, 8, 5), ((2, 3), 4, 7, 16, 3), ((2, 1), 1, 9, 2, 2)]
SCALES = [None, 1.0, 0.37]


def qkv(lead, n_q, n_k, d_k, d_v, seed=0, spread=1.0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, n_q, d_k, generator=gen) * spread  # (..., n_q, d_k)
    k = torch.randn(*lead, n_k, d_k, generator=gen) * spread  # (..., n_k, d_k)
    v = torch.randn(*lead, n_k, d_v, generator=gen)           # (..., n_k, d_v)
    return q, k, v


def random_mask(lead, n_q, n_k, seed=1):
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(*lead, n_q, n_k, generator=gen) > 0.4  # (..., n_q, n_k)
    mask[..., 0, :] = False  # one fully masked row in every matrix
    return mask


def masks(lead, n_q, n_k):
    return {"none": None, "causal": causal_mask(n_q, n_k), "random": random_mask(lead, n_q, n_k)}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"lead{s[0]}-{s[1]}x{s[2]}")
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("mask_kind", ["none", "causal", "random"])
def test_matches_torch_sdpa(shape, scale, mask_kind):
    lead, n_q, n_k, d_k, d_v = shape
    q, k, v = qkv(*shape)
    mask = masks(lead, n_q, n_k)[mask_kind]
    res = attention(q, k, v, scale=scale, mask=mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    assert res.output.shape == ref.shape == (*lead, n_q, d_v)
    assert torch.allclose(res.output, ref, **TOL)
    # the weights against an independent softmax of the explicit logits
    used = 1 / math.sqrt(d_k) if scale is None else scale
    logits = (q @ k.transpose(-2, -1)) * used                 # (..., n_q, n_k)
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    expected = torch.softmax(logits, dim=-1).nan_to_num(0.0)  # NaN rows are the fully masked ones
    assert torch.allclose(res.weights, expected, **TOL)
    assert torch.equal(torch.isinf(res.scores), torch.isinf(logits))
    finite = torch.isfinite(logits)
    assert torch.allclose(res.scores[finite], logits[finite], **TOL)


@pytest.mark.parametrize("shape", SHAPES[1:3], ids=["heads", "two-dims"])
def test_fully_masked_rows_are_zeros_like_sdpa(shape):
    lead, n_q, n_k, d_k, d_v = shape
    q, k, v = qkv(*shape)
    mask = random_mask(lead, n_q, n_k)
    res = attention(q, k, v, mask=mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert not torch.isnan(res.weights).any() and not torch.isnan(res.output).any()
    assert torch.equal(res.weights[..., 0, :], torch.zeros(*lead, n_k))
    assert torch.equal(res.output[..., 0, :], torch.zeros(*lead, d_v))
    assert torch.equal(ref[..., 0, :], torch.zeros(*lead, d_v))  # torch >= 2.5 agrees
    assert torch.isneginf(res.scores[..., 0, :]).all()
    live = res.weights[..., 1:, :].sum(-1)
    assert torch.allclose(live, torch.ones_like(live), **TOL)


def test_every_row_masked():
    q, k, v = qkv((2,), 3, 3, 4, 4)
    res = attention(q, k, v, mask=torch.zeros(3, 3, dtype=torch.bool))
    assert torch.equal(res.weights, torch.zeros(2, 3, 3))
    assert torch.equal(res.output, torch.zeros(2, 3, 4))


def test_mask_with_more_leading_dims_broadcasts_like_sdpa():
    q, k, v = qkv((), 4, 4, 8, 8)
    mask = random_mask((2, 3), 4, 4)
    res = attention(q, k, v, mask=mask)
    ref = F.scaled_dot_product_attention(*(t.expand(2, 3, 4, 8) for t in (q, k, v)),
                                         attn_mask=mask)  # SDPA itself does not broadcast q
    assert res.weights.shape == (2, 3, 4, 4)
    assert torch.allclose(res.output, ref, **TOL)


@pytest.mark.parametrize("temperature", [0.25, 1.0, 3.0])
@pytest.mark.parametrize("scale", SCALES)
def test_temperature_divides_the_logits(temperature, scale):
    q, k, v = qkv((3,), 6, 6, 8, 8)
    res = attention(q, k, v, scale=scale, temperature=temperature)
    used = 1 / math.sqrt(8) if scale is None else scale
    ref = F.scaled_dot_product_attention(q, k, v, scale=used / temperature)
    assert torch.allclose(res.output, ref, **TOL)
    assert torch.allclose(res.scores, (q @ k.transpose(-2, -1)) * used / temperature, **TOL)
    assert res.scale == pytest.approx(used)  # the scale field never includes the temperature


def test_scale_field():
    q, k, v = qkv((), 3, 3, 16, 2)
    assert attention(q, k, v).scale == 0.25
    assert attention(q, k, v, scale=1.0).scale == 1.0
    assert attention(q, k, v, scale=0.1, temperature=2.0).scale == 0.1
    assert isinstance(attention(q, k, v, scale=torch.tensor(0.5).item()).scale, float)


def test_two_by_two_by_hand():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    res = attention(q, k, v)
    # logits [[1/sqrt 2, 0], [0, 1/sqrt 2]]; e^0.70710678 = 2.0281150, 2.0281150/3.0281150
    a = 0.7071068
    assert torch.allclose(res.scores, torch.tensor([[a, 0.0], [0.0, a]]), atol=1e-6)
    assert torch.allclose(res.weights, torch.tensor([[0.669764, 0.330236], [0.330236, 0.669764]]),
                          atol=1e-6)
    assert torch.allclose(res.output, torch.tensor([[1.660472, 2.660472], [2.339528, 3.339528]]),
                          atol=1e-5)
    unscaled = attention(q, k, v, scale=1.0)  # e / (e + 1) = 0.7310586
    assert torch.allclose(unscaled.weights[0], torch.tensor([0.7310586, 0.2689414]), atol=1e-6)


def test_output_is_weights_at_v():
    q, k, v = qkv((2, 3), 5, 6, 4, 7)
    res = attention(q, k, v, mask=random_mask((2, 3), 5, 6))
    assert torch.allclose(res.output, res.weights @ v, **TOL)


def test_logits_of_1e4_stay_finite():
    q = torch.tensor([[1e4], [-1e4], [0.0]])      # scale 1: logits 1e4 * k
    k = torch.tensor([[1.0], [0.0], [-1.0]])
    v = torch.eye(3)
    res = attention(q, k, v, scale=1.0)
    assert torch.isfinite(res.weights).all() and torch.isfinite(res.output).all()
    assert torch.equal(res.weights[0], torch.tensor([1.0, 0.0, 0.0]))
    assert torch.equal(res.weights[1], torch.tensor([0.0, 0.0, 1.0]))
    assert torch.allclose(res.weights[2], torch.full((3,), 1 / 3))
    # logits (1000, 0, -1000): a naive exp/sum gives NaN, max-subtraction gives (1, 0, 0)
    wide = attention(torch.tensor([[1000.0]]), k, v, scale=1.0)
    assert torch.equal(wide.weights[0], torch.tensor([1.0, 0.0, 0.0]))


@pytest.mark.parametrize("temperature", [1.0, 0.01])
def test_inputs_up_to_1e30_stay_finite(temperature):
    q, k, v = qkv((4,), 8, 8, 16, 4, spread=1e30)  # q.k ~ 1e60: beyond float32
    mask = random_mask((4,), 8, 8)
    res = attention(q, k, v * 1e30, scale=1.0, temperature=temperature, mask=mask)
    assert torch.isfinite(res.weights).all() and torch.isfinite(res.output).all()
    assert not torch.isnan(res.scores).any()
    sums = res.weights[..., 1:, :].sum(-1)
    assert torch.allclose(sums, torch.ones_like(sums))
    assert torch.isfinite(res.scores[mask]).all()  # saturated at the float32 limit, not inf
    # each row is one-hot on the key with the largest exact (float64) logit
    exact = (q.double() @ k.double().transpose(-2, -1)).masked_fill(~mask, -math.inf)
    best = torch.nn.functional.one_hot(exact[..., 1:, :].argmax(-1), 8).float()
    assert torch.equal(res.weights[..., 1:, :], best)


def test_rows_with_masked_cells_by_hand():
    """Logits (0, 1), (all masked), (masked, 2): softmax, zeros, one-hot on the open key."""
    q = torch.tensor([[1.0], [1.0], [2.0]])
    k = torch.tensor([[0.0], [1.0]])                    # logits q_i * k_j at scale 1
    mask = torch.tensor([[True, True], [False, False], [False, True]])
    w = attention(q, k, torch.eye(2), scale=1.0, mask=mask).weights
    assert torch.equal(w[1], torch.zeros(2)) and torch.equal(w[2], torch.tensor([0.0, 1.0]))
    assert torch.allclose(w[0], torch.softmax(torch.tensor([0.0, 1.0]), -1))


def test_gradients_match_sdpa_and_stay_finite():
    """The experiments train through attention(): its gradients must be SDPA's."""
    q, k, v = qkv((2,), 5, 5, 4, 3)
    mask = random_mask((2,), 5, 5)
    grads = []
    for fn in (lambda q, k, v: attention(q, k, v, mask=mask).output,
               lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        (fn(*leaves) * torch.arange(3.0)).sum().backward()
        grads.append([t.grad for t in leaves])
    for ours, ref in zip(*grads):
        assert torch.isfinite(ours).all()
        assert torch.allclose(ours, ref, **TOL)


def test_causal_mask():
    assert torch.equal(causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool())
    # more keys than queries: the queries are the last n_q positions
    assert torch.equal(causal_mask(2, 3), torch.tensor([[1, 1, 0], [1, 1, 1]]).bool())


def test_rejects_bad_arguments():
    q, k, v = qkv((), 3, 3, 4, 4)
    for temperature in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            attention(q, k, v, temperature=temperature)
    with pytest.raises(TypeError):
        attention(q, k, v, mask=torch.ones(3, 3))  # an additive float mask is not our contract


finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(q=arrays(np.float32, (3, 4), elements=finite32),
       k=arrays(np.float32, (5, 4), elements=finite32),
       v=arrays(np.float32, (5, 2), elements=st.floats(-2.0**100, 2.0**100, width=32)),  # |v| <= 1.3e30
       scale=st.sampled_from(SCALES), temperature=st.sampled_from([0.01, 1.0, 100.0]))
def test_any_finite_input_gives_finite_weights(q, k, v, scale, temperature):
    res = attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                    scale=scale, temperature=temperature)
    assert torch.isfinite(res.weights).all() and torch.isfinite(res.output).all()
    assert (res.weights >= 0).all()
    assert torch.allclose(res.weights.sum(-1), torch.ones(3), atol=1e-5)
