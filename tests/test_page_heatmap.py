"""The Heatmap page in AppTest: its charts carry exactly the analysis' numbers."""
import io
import json

import pandas as pd
import pyarrow as pa
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import frames
from attention.analysis import analyze
from attention.charts.heatmap import BLOCK_COLUMNS
from attention.pooling import pooled_cells
from attention.spec import AttentionSpec
from attention.ui.heatmap_view import DEFAULT_WINDOW, OVERVIEW_BLOCKS
from tests.conftest import ROOT
from tests.test_charts_heatmap import eval_label_expr

PAGE = "pages/1_Heatmap.py"
CAT = AttentionSpec(tokens=tuple("the cat sat on the mat".split()), heads=3, d_k=8, d_model=16,
                    seed=5)


def open_page(spec: AttentionSpec | None = None, **params: str) -> AppTest:
    """A fresh session that opens the Heatmap page on a URL with this spec and view."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(PAGE)
    for key, value in {**(spec.to_query() if spec else {}), **params}.items():
        at.query_params[key] = value
    return at.run()


def datasets(at: AppTest) -> list[list[pd.DataFrame]]:
    """Per vega-lite chart on the page, its datasets as DataFrames."""
    return [[pa.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pandas()
             for d in chart.proto.datasets] for chart in at.get("vega_lite_chart")]


def assert_cells_match(data: pd.DataFrame, a, head: int) -> None:
    w, u = a.scaled.weights[head], a.unscaled.weights[head]
    for row in data.itertuples():
        assert row.head == head
        assert row.weight == pytest.approx(float(w[row.query_pos, row.key_pos]), abs=1e-6)
        assert row.unscaled_weight == pytest.approx(float(u[row.query_pos, row.key_pos]), abs=1e-6)
        assert row.query_token == a.tokens[row.query_pos]
        assert row.key_token == a.tokens[row.key_pos]


def test_chart_data_equals_analyze_for_a_spec_from_the_url():
    at = open_page(CAT)
    assert not at.exception and not at.error
    (data,), = datasets(at)                                   # one chart, one shared dataset
    assert len(data) == 36                                    # 6 x 6 with "the" twice
    assert_cells_match(data, analyze(CAT), head=0)


def test_head_picker_changes_the_data_without_recomputing(monkeypatch):
    import attention.ui.cache as cache

    calls = []
    monkeypatch.setattr(cache, "analyze", lambda spec: calls.append(spec) or analyze(spec))
    at = open_page(CAT)
    at.selectbox(key="view_hm_head").set_value(2).run()
    assert not at.exception
    (data,), = datasets(at)
    assert_cells_match(data, analyze(CAT), head=2)
    assert at.query_params["hm_head"] == "2"                  # kept in the share link
    at.segmented_control(key="view_hm_view").set_value("grid").run()
    assert not at.exception
    assert calls == [CAT]                                     # one analysis for all three runs


def test_head_from_the_url_and_an_invalid_one_falls_back():
    (data,), = datasets(open_page(CAT, hm_head="1"))
    assert set(data["head"]) == {1}
    at = open_page(CAT, hm_head="7")                          # only 3 heads: back to head 0
    assert not at.exception
    (data,), = datasets(at)
    assert set(data["head"]) == {0}


def test_all_heads_grid_and_follow_one_query():
    a = analyze(CAT)
    (grid,), = datasets(open_page(CAT, hm_view="grid", hm_grid="difference"))
    assert len(grid) == 3 * 36
    for row in grid.itertuples():
        expected = a.scaled.weights[row.head, row.query_pos, row.key_pos] \
            - a.unscaled.weights[row.head, row.query_pos, row.key_pos]
        assert row.difference == pytest.approx(float(expected), abs=1e-6)
    at = open_page(CAT, hm_view="row", hm_row="4", hm_head="1")
    assert not at.exception
    (row,), = datasets(at)
    scaled = row[row["kind"] == row["kind"].iloc[0]].sort_values("key_pos")["value"]
    torch.testing.assert_close(torch.tensor(scaled.to_numpy()), a.scaled.weights[1, 4])
    assert [m.value for m in at.metric][:2] == [f"{float(a.scaled.weights[1, 4].max()):.3f}",
                                                f"{float(a.unscaled.weights[1, 4].max()):.3f}"]


def test_2048_tokens_use_the_pooled_overview_with_a_notice_and_small_data():
    spec = AttentionSpec(tokens=tuple(f"w{i % 97}" for i in range(2048)), heads=1, d_k=8,
                         d_model=16, causal=True)
    at = open_page(spec, hm_q="1000", hm_k="990")
    assert not at.exception and not at.error
    assert any("2,048 tokens" in info.value and "40 × 40" in info.value and "52 × 52" in info.value
               and "only 20 positions" in info.value for info in at.info)   # 39 x 52 + 20
    (box, overview), (zoom,) = [sorted(ds, key=len) for ds in datasets(at)]
    assert len(overview) <= OVERVIEW_BLOCKS ** 2 and set(overview.columns) == set(BLOCK_COLUMNS)
    assert box.to_dict("records") == [{"q0": 1000, "q1": 1000 + DEFAULT_WINDOW,
                                       "k0": 990, "k1": 990 + DEFAULT_WINDOW}]
    a = analyze(spec)
    expected = pooled_cells(a, [0], OVERVIEW_BLOCKS, "max")
    assert len(overview) == len(expected)                     # blocks above the diagonal dropped
    torch.testing.assert_close(torch.tensor(overview["weight"].to_numpy()),
                               torch.tensor(expected["weight"].to_numpy()))
    # The zoom window is every cell of queries 1000-1015 x keys 990-1005 (causal: k <= q).
    assert len(zoom) == sum(1 for q in range(1000, 1016) for k in range(990, 1006) if k <= q)
    assert_cells_match(zoom, a, head=0)
    assert set(zoom["query_pos"]) == set(range(1000, 1016))
    # The zoom's axes are those positions, labelled with their own tokens.
    layer = json.loads(at.get("vega_lite_chart")[1].proto.spec)["hconcat"][0]["layer"][0]
    for axis, first in (("y", 1000), ("x", 990)):
        enc = layer["encoding"][axis]
        assert enc["scale"]["domain"] == list(range(first, first + DEFAULT_WINDOW))
        assert [eval_label_expr(enc["axis"]["labelExpr"], p) for p in enc["scale"]["domain"]] \
            == [spec.tokens[p] for p in enc["scale"]["domain"]]


def test_zoom_and_pooling_choice_are_widgets_kept_in_the_url():
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(100)), heads=1)
    at = open_page(spec)
    at.number_input(key="view_hm_q").set_value(50).run()
    at.segmented_control(key="view_hm_pool").set_value("mean").run()
    assert not at.exception
    assert at.query_params["hm_q"] == "50" and at.query_params["hm_pool"] == "mean"
    assert any("mean" in info.value for info in at.info)
    (_, overview), (zoom,) = [sorted(ds, key=len) for ds in datasets(at)]
    a = analyze(spec)
    assert overview["weight"].to_numpy() == pytest.approx(
        pooled_cells(a, [0], OVERVIEW_BLOCKS, "mean")["weight"].to_numpy(), abs=1e-6)
    assert set(zoom["query_pos"]) == set(range(50, 50 + DEFAULT_WINDOW))


def test_bad_input_shows_an_error_and_no_exception():
    at = open_page(CAT)
    at.text_area(key="in_text").set_value('["unclosed').run()
    assert not at.exception
    assert at.error and not at.get("vega_lite_chart")
    at = open_page(CAT, hm_view="nonsense", hm_q="-4", hm_win="abc")
    assert not at.exception and len(datasets(at)) == 1        # bad view params: defaults
