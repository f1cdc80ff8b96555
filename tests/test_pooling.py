"""Block pooling and zoom windows against naive loops and the full matrix."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention.analysis import frames
from attention.analysis import analyze
from attention.core import causal_mask
from attention.analysis.pooled import pooled_cells
from attention.measures.pooling import (Blocks, block_counts, block_preview, blocks_for, pool,
                                        window, window_from_brush, window_slice, window_tokens)
from attention.spec import AttentionSpec


def naive_pool(m: torch.Tensor, size: int, how: str, mask=None) -> torch.Tensor:
    """Python loops over every block and every cell in it: the reference."""
    n = m.shape[-1]
    b = math.ceil(n / size)
    out = torch.full((*m.shape[:-2], b, b), math.nan)
    for lead in (range(m.shape[0]) if m.dim() == 3 else [None]):
        mat = m[lead] if lead is not None else m
        for i in range(b):
            for j in range(b):
                vals = [float(mat[q, k]) for q in range(i * size, min(n, (i + 1) * size))
                        for k in range(j * size, min(n, (j + 1) * size))
                        if mask is None or bool(mask[q, k])]
                if not vals:
                    continue
                if how == "max":
                    v = max(vals)
                elif how == "mean":
                    v = sum(vals) / len(vals)
                else:
                    v = max(vals, key=abs)
                if lead is None:
                    out[i, j] = v
                else:
                    out[lead, i, j] = v
    return out


@pytest.mark.parametrize("how", ["max", "mean", "extreme"])
@pytest.mark.parametrize("n,max_blocks", [(10, 3), (12, 4), (7, 7), (5, 2), (9, 1)])
def test_pool_matches_naive_loops_with_uneven_edges(how, n, max_blocks):
    m = torch.randn(3, n, n, generator=torch.Generator().manual_seed(n))    # (heads, n, n)
    pooled, blocks = pool(m, max_blocks, how)
    assert blocks.size == math.ceil(n / max_blocks) and blocks.count <= max_blocks
    torch.testing.assert_close(pooled, naive_pool(m, blocks.size, how), equal_nan=True)


@pytest.mark.parametrize("how", ["max", "mean", "extreme"])
def test_masked_cells_are_left_out_and_empty_blocks_are_nan(how):
    n = 10
    m = torch.randn(n, n, generator=torch.Generator().manual_seed(1)) + 5.0   # (n, n)
    mask = causal_mask(n)
    pooled, blocks = pool(m, 3, how, mask)                                   # blocks of 4, 4, 2
    torch.testing.assert_close(pooled, naive_pool(m, 4, how, mask), equal_nan=True)
    assert math.isnan(pooled[0, 1]) and math.isnan(pooled[0, 2]) and math.isnan(pooled[1, 2])
    # The diagonal block 0 holds the 10 lower-triangle cells of rows 0-3, not 16.
    assert block_counts(n, blocks, mask)[0, 0] == 10
    assert block_counts(n, blocks)[2, 2] == 4                                # uneven corner: 2 x 2


def test_hand_computed_two_by_two_blocks():
    m = torch.tensor([[1., 2., 3.],
                      [4., 5., 6.],
                      [7., 8., 9.]])
    mx, blocks = pool(m, 2, "max")
    mean, _ = pool(m, 2, "mean")
    assert blocks == Blocks(n=3, size=2)
    assert mx.tolist() == [[5., 6.], [8., 9.]]
    assert mean.tolist() == [[3., 4.5], [7.5, 9.]]                       # (1+2+4+5)/4, (3+6)/2, ...
    signed, _ = pool(torch.tensor([[0.2, -0.7], [0.5, 0.1]]), 1, "extreme")
    assert signed.tolist() == [[pytest.approx(-0.7)]]


def test_block_labels_and_previews():
    blocks = blocks_for(10, 3)
    assert blocks.labels() == ["0-3", "4-7", "8-9"]
    assert blocks_for(2048, 64).labels()[-1] == "2016-2047"
    assert Blocks(n=5, size=1).label(4) == "4"
    tokens = list("abcdefghij")
    assert block_preview(tokens, blocks, 0) == "a … d"
    assert block_preview(tokens, blocks, 2) == "i … j"
    with pytest.raises(ValueError):
        blocks_for(0, 4)


def test_window_is_clamped_inside_the_sequence():
    assert window(100, 10, 16) == range(10, 26)
    assert window(100, 95, 16) == range(84, 100)      # slides back instead of running off
    assert window(100, -5, 16) == range(0, 16)
    assert window(8, 3, 16) == range(0, 8)            # a window larger than n shrinks to n


SPEC = AttentionSpec(tokens=tuple("the cat sat on the mat and the dog sat on the log".split()),
                     heads=2, d_k=8, d_model=16, causal=True)


def test_zoomed_cells_equal_the_full_matrix_and_carry_the_right_tokens():
    a = analyze(SPEC)
    queries, keys = window(a.n, 4, 5), window(a.n, 2, 5)
    zoom = window_slice(a.scaled.weights, queries, keys)                   # (heads, 5, 5)
    for h in range(a.heads):
        for i, q in enumerate(queries):
            for j, k in enumerate(keys):
                assert zoom[h, i, j] == a.scaled.weights[h, q, k]
    assert window_tokens(a.tokens, queries) == ["the", "mat", "and", "the", "dog"]
    assert window_tokens(a.tokens, keys) == ["sat", "on", "the", "mat", "and"]
    # The tidy frame of the window has the same cells, tokens and positions.
    cells = frames.cells(a, heads=[1], queries=queries, keys=keys)
    for row in cells.itertuples():
        assert row.weight == pytest.approx(float(a.scaled.weights[1, row.query_pos, row.key_pos]))
        assert row.query_token == a.tokens[row.query_pos]
        assert row.key_token == a.tokens[row.key_pos]


def test_pooled_cells_match_pooling_each_matrix():
    a = analyze(SPEC)                                                      # 13 tokens, causal
    frame = pooled_cells(a, [0, 1], 4, "max")                             # blocks of 4: 4,4,4,1
    w, u = a.scaled.weights, a.unscaled.weights
    ref_w = naive_pool(w, 4, "max", a.mask)
    ref_u = naive_pool(u, 4, "max", a.mask)
    ref_d = naive_pool(w - u, 4, "extreme", a.mask)
    assert not frame.isna().any().any()
    expected_rows = int((~torch.isnan(ref_w)).sum())
    assert len(frame) == expected_rows                                     # empty blocks dropped
    for row in frame.itertuples():
        h, i, j = row.head, row.query_block, row.key_block
        assert row.weight == pytest.approx(float(ref_w[h, i, j]))
        assert row.unscaled_weight == pytest.approx(float(ref_u[h, i, j]))
        assert row.difference == pytest.approx(float(ref_d[h, i, j]))
        assert (row.query_start, row.query_stop) == (4 * i, min(13, 4 * i + 4))
        assert row.query_range == ("12" if i == 3 else f"{4 * i}-{4 * i + 3}")
    corner = frame[(frame.query_block == 3) & (frame.key_block == 3)]
    assert corner["cells"].tolist() == [1, 1]                              # one cell, each head
    mean = pooled_cells(a, [0], 4, "mean")
    row = mean[(mean.query_block == 1) & (mean.key_block == 0)].iloc[0]
    assert row.weight == pytest.approx(float(w[0, 4:8, 0:4].mean()))      # fully allowed block
    assert row.cells == 16


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), max_blocks=st.integers(1, 12), seed=st.integers(0, 999))
def test_pooling_properties(n, max_blocks, seed):
    m = torch.rand(n, n, generator=torch.Generator().manual_seed(seed))   # (n, n) in [0, 1)
    mx, blocks = pool(m, max_blocks, "max")
    mean, _ = pool(m, max_blocks, "mean")
    assert mx.shape == (blocks.count, blocks.count) and blocks.count <= max_blocks
    assert (mean <= mx + 1e-6).all()                                       # mean never above max
    assert float(mx.max()) == float(m.max())                               # the max survives
    counts = block_counts(n, blocks).double()
    assert float((mean.double() * counts).sum()) == pytest.approx(float(m.double().sum()), rel=1e-5)


@pytest.mark.parametrize("queries,keys,expected", [
    ((100, 110), (40, 52), (16, (97, 113), (38, 54))),        # 12 wide: a 16 window, centred
    ((110, 100), (52, 40), (16, (97, 113), (38, 54))),        # edges in either order
    ((0, 3), (2040, 2047.9), (16, (0, 16), (2032, 2048))),    # clamped inside 0..n-1
    ((500, 540), (0, 10), (48, (496, 544), (0, 48))),         # the longer side decides
    ((0, 2048), (0, 2048), (64, (992, 1056), (992, 1056))),   # bigger than any: the largest
])
def test_window_from_brush_holds_and_centres_the_box(queries, keys, expected):
    size, q, k = window_from_brush(2048, queries, keys, (16, 24, 32, 48, 64))
    assert (size, (q.start, q.stop), (k.start, k.stop)) == expected
    assert len(q) == len(k) == size


def test_window_from_brush_on_a_short_input_shrinks_to_it():
    size, q, k = window_from_brush(10, (2, 5), (0, 9), (16, 64))
    assert size == 10 and q == range(0, 10) and k == range(0, 10)
