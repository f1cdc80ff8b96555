"""Row metrics against hand values, the Jacobian table of docs/science.md and explicit
references."""
from __future__ import annotations

import math

import pytest
import torch

from attention.measures import rows as metrics
from attention.measures.rows import (ROW_METRICS, effective_tokens, entropy, gini, jacobian_norm,
                               max_weight, row_metrics)


def random_rows(*shape, seed=0, spread=3.0):
    gen = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(*shape, generator=gen) * spread, dim=-1)


def explicit_jacobian_norm(p: torch.Tensor) -> float:
    """||d softmax / d z||_F at the logits log p, by autograd, in float64."""
    z = p.double().log()
    return torch.autograd.functional.jacobian(lambda z: torch.softmax(z, -1), z).norm().item()


@pytest.mark.parametrize("n", [1, 2, 16, 300])
def test_uniform_row(n):
    p = torch.full((n,), 1.0 / n)
    assert entropy(p).item() == pytest.approx(math.log(n), abs=1e-5)
    assert effective_tokens(p).item() == pytest.approx(n, rel=1e-5)
    assert gini(p).item() == pytest.approx(0.0, abs=1e-5)
    assert max_weight(p).item() == pytest.approx(1.0 / n)
    # diag(p) - p p^T for uniform p: (n - 1) / n^2 on the diagonal, -1/n^2 elsewhere
    assert jacobian_norm(p).item() == pytest.approx(math.sqrt(n - 1) / n, rel=1e-5)


@pytest.mark.parametrize("n", [1, 4, 16, 300])
def test_one_hot_row(n):
    p = torch.zeros(n)
    p[n // 2] = 1.0
    assert entropy(p).item() == 0.0
    assert effective_tokens(p).item() == 1.0
    assert gini(p).item() == pytest.approx(1.0 - 1.0 / n, abs=1e-6)
    assert max_weight(p).item() == 1.0
    assert jacobian_norm(p).item() == 0.0
    if n == 16:
        assert gini(p).item() == pytest.approx(0.9375)  # docs/science.md


@pytest.mark.parametrize("gap, norm, p_max", [(0, 0.433, 0.25), (5, 2.8e-2, 0.980),
                                              (10, 1.9e-4, None), (20, 8.7e-9, None)])
def test_jacobian_gap_table_of_the_science_doc(gap, norm, p_max):
    """4 tokens, one logit ahead by g (float32 weights, as the dashboard computes them)."""
    p = torch.softmax(torch.tensor([float(gap), 0.0, 0.0, 0.0]), -1)
    assert jacobian_norm(p).item() == pytest.approx(norm, rel=0.03)
    assert jacobian_norm(p).item() == pytest.approx(explicit_jacobian_norm(p), rel=1e-4)
    if p_max is not None:
        assert max_weight(p).item() == pytest.approx(p_max, abs=5e-4)


def test_jacobian_norm_matches_autograd_and_the_explicit_matrix():
    rows = torch.cat([random_rows(6, 9, spread=s, seed=i) for i, s in enumerate((0.5, 3, 12))])
    ours = jacobian_norm(rows)
    for p, value in zip(rows, ours):
        p64 = p.double() / p.double().sum()  # float32 rows sum to 1 only within 1e-7;
        # 1 - p_max of a near one-hot row would inherit that error, our formula does not
        explicit = (torch.diag(p64) - torch.outer(p64, p64)).norm().item()
        assert value.item() == pytest.approx(explicit, rel=1e-5, abs=1e-9)
        assert value.item() == pytest.approx(explicit_jacobian_norm(p), rel=1e-4, abs=1e-9)


def test_masked_rows_are_all_zero_metrics():
    p = torch.zeros(2, 5)
    p[1, 2] = 1.0
    m = row_metrics(p)
    assert m["entropy"][0] == 0 and m["max_weight"][0] == 0 and m["gini"][0] == 0
    assert m["jacobian_norm"][0] == 0
    assert all(torch.isfinite(v).all() for v in m.values())


def test_gini_by_hand():
    # sorted [0.1, 0.2, 0.3, 0.4]: sum (2i - 5) p_(i) / 4 = (-0.3 - 0.2 + 0.3 + 1.2) / 4
    assert gini(torch.tensor([0.4, 0.1, 0.3, 0.2])).item() == pytest.approx(0.25, abs=1e-6)
    # mean absolute difference over 2 n^2 mean, straight from the definition
    p = random_rows(7, seed=3).double()
    mad = (p[:, None] - p[None, :]).abs().sum() / (2 * 7 * 7 * p.mean())
    assert gini(p).item() == pytest.approx(mad.item(), rel=1e-9)


def test_entropy_by_hand():
    p = torch.tensor([0.5, 0.25, 0.25])
    assert entropy(p).item() == pytest.approx(1.5 * math.log(2), rel=1e-6)


def test_row_metrics_equal_the_single_functions_and_keep_shape():
    p = random_rows(3, 70, 700, seed=1)         # larger than one chunk: crosses chunk borders
    assert p.numel() > 2 * metrics.CHUNK_ELEMENTS
    table = row_metrics(p)
    assert list(table) == list(ROW_METRICS)
    for name, fn in ROW_METRICS.items():
        assert table[name].shape == (3, 70)
        assert torch.allclose(table[name], fn(p), rtol=1e-5, atol=1e-6), name
    assert torch.equal(table["max_weight"], p.amax(-1))
    # and each row alone gives the same as the batch
    assert torch.allclose(row_metrics(p[1, 5])["gini"], table["gini"][1, 5])
    assert torch.allclose(table["entropy"], -torch.special.xlogy(p, p).sum(-1), atol=1e-5)


def test_float64_rows_stay_float64():
    p = random_rows(4, 10).double()
    assert all(v.dtype == torch.float64 for v in row_metrics(p).values())


def test_entropy_is_differentiable():
    z = torch.randn(3, 5, requires_grad=True)
    entropy(torch.softmax(z, -1)).sum().backward()
    assert torch.isfinite(z.grad).all() and z.grad.abs().sum() > 0
