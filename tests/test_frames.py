"""frames.cells: one row per (head, query, key) with repeated tokens kept apart."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attention.analysis import analyze
from attention.analysis.frames import CELL_COLUMNS, WINDOW_COLUMNS, cells, row_metrics, window
from attention.spec import AttentionSpec

TOKENS = ("the", "cat", "sat", "on", "the", "mat")


@pytest.fixture(scope="module")
def a():
    return analyze(AttentionSpec(tokens=TOKENS, heads=3))


def tensor_at(t: torch.Tensor, frame) -> np.ndarray:
    """t[head, query, key] for every row of the frame."""
    return t.numpy()[frame["head"], frame["query_pos"], frame["key_pos"]]


def assert_same(column, expected: np.ndarray) -> None:
    """A frame's column equals the all-heads tensors to float rounding: cells() recomputes
    only the window's query rows, whose matmul may round in another order (CPU-dependent)."""
    np.testing.assert_allclose(column.to_numpy(), expected, rtol=1e-5, atol=1e-7)


def test_every_cell_with_repeated_tokens_kept(a):
    frame = cells(a)
    assert list(frame.columns) == CELL_COLUMNS
    assert len(frame) == 3 * 36
    assert (frame.groupby("head").size() == 36).all()
    the_rows = frame[(frame["head"] == 0) & (frame["query_token"] == "the")]
    assert sorted(set(the_rows["query_pos"])) == [0, 4]
    assert len(the_rows) == 12
    assert (frame.groupby(["head", "query_pos", "key_pos"]).size() == 1).all()  # no cell twice
    assert list(frame["key_token"][:6]) == list(TOKENS)
    assert (frame["query_token"] == np.array(TOKENS)[frame["query_pos"]]).all()
    assert (frame["key_token"] == np.array(TOKENS)[frame["key_pos"]]).all()


def test_values_are_the_analysis_tensors(a):
    frame = cells(a)
    assert_same(frame["weight"], tensor_at(a.scaled.weights, frame))
    assert_same(frame["unscaled_weight"], tensor_at(a.unscaled.weights, frame))
    assert_same(frame["scaled_score"], tensor_at(a.scaled.scores, frame))
    assert np.allclose(frame["raw_score"], tensor_at(a.raw_scores(), frame), atol=1e-5)
    assert np.allclose(frame["raw_score"], tensor_at(a.unscaled.scores, frame), atol=1e-5)
    assert np.allclose(frame["difference"], frame["weight"] - frame["unscaled_weight"])
    sums = frame.groupby(["head", "query_pos"])["weight"].sum()
    assert np.allclose(sums, 1.0, atol=1e-5)


def test_causal_drops_masked_cells():
    a = analyze(AttentionSpec(tokens=TOKENS, heads=2, causal=True))
    frame = cells(a)
    assert len(frame) == 2 * 21  # 6 * 7 / 2 allowed cells per head
    assert (frame["key_pos"] <= frame["query_pos"]).all()
    assert np.isfinite(frame.select_dtypes("number").to_numpy()).all()
    assert_same(frame["weight"], tensor_at(a.scaled.weights, frame))


def test_windows_and_head_choice(a):
    frame = cells(a, heads=[2, 0], queries=range(2, 5), keys=range(3, 6))
    assert len(frame) == 2 * 3 * 3
    assert set(frame["head"]) == {0, 2} and list(frame["head"][:9]) == [2] * 9
    assert set(frame["query_pos"]) == {2, 3, 4} and set(frame["key_pos"]) == {3, 4, 5}
    assert list(frame["key_token"][:3]) == ["on", "the", "mat"]
    assert_same(frame["weight"], tensor_at(a.scaled.weights, frame))
    assert np.allclose(frame["raw_score"], tensor_at(a.raw_scores(), frame), atol=1e-5)
    # a zoom window past the end is clipped
    assert set(cells(a, heads=[1], queries=range(4, 99))["query_pos"]) == {4, 5}


def test_row_metrics_frame(a):
    frame = row_metrics(a)
    assert len(frame) == 2 * 3 * 6
    one = frame[frame["scaled"] & (frame["head"] == 1) & (frame["query_pos"] == 4)]
    assert one["query_token"].item() == "the"
    assert one["entropy"].item() == pytest.approx(a.scaled_metrics["entropy"][1, 4].item())


@pytest.mark.parametrize("causal", [False, True])
def test_window_holds_the_cells_numbers_as_matrices_nan_where_masked(causal):
    spec = AttentionSpec(tokens=tuple(f"t{i}" for i in range(30)), heads=3, causal=causal, seed=9)
    a = analyze(spec)
    queries, keys = range(8, 20), range(5, 30)
    grids = window(a, 2, queries, keys)
    table = cells(a, heads=[2], queries=queries, keys=keys)
    for name in WINDOW_COLUMNS:
        assert grids[name].shape == (12, 25)
        for row in table.itertuples():
            assert grids[name][row.query_pos - 8, row.key_pos - 5] == pytest.approx(
                getattr(row, name), abs=1e-6)
    drawn = ~np.isnan(grids["weight"])
    assert drawn.sum() == len(table)
    if causal:
        assert not drawn[0, 4]                     # query 8 cannot see key 9
    # the weights are the head's own softmax rows, cut to the window
    torch.testing.assert_close(torch.tensor(grids["weight"][drawn]),
                               a.scaled.weights[2, 8:20, 5:30].double()[torch.tensor(drawn)])
