"""The Heatmap page in AppTest: its charts carry exactly the analysis' numbers."""
import base64
import io
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import torch
from PIL import Image
from streamlit.testing.v1 import AppTest

import attention.analysis as analysis_module
from attention.analysis import analyze
from attention.charts.colors import colorize
from attention.i18n import translate
from attention.spec import AttentionSpec
from attention.ui.views.heatmap import DEFAULT_WINDOW
from tests.apptest import TIP, figure_cells, figure_images, figures
from tests.conftest import ROOT

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
    """Per vega-lite chart on the page, its datasets as DataFrames (its main data first)."""
    return [[pa.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pandas()
             for d in chart.proto.datasets] for chart in at.get("vega_lite_chart")]


def main_data(at: AppTest) -> list[pd.DataFrame]:
    """Per vega-lite chart, the data its marks draw (the cells; an overview's image row)."""
    return [charts[0] for charts in datasets(at)]


def cells(at: AppTest) -> list[pd.DataFrame]:
    """Per canvas figure of cells on the page (the comparison, or the zoom window), its cells."""
    return [figure_cells(f) for f in figures(at) if f["kind"] == "cells"]


def assert_cells_match(data: pd.DataFrame, a, head: int) -> None:
    """Every drawn cell carries that head's weights and scores, and its own tokens."""
    w, u = a.scaled.weights[head], a.unscaled.weights[head]
    raw = a.q[head] @ a.k[head].T                                         # (n, n) q.k
    for row in data.itertuples():
        q, k = row.query_pos, row.key_pos
        assert row.weight == pytest.approx(float(w[q, k]), abs=TIP)
        assert row.unscaled_weight == pytest.approx(float(u[q, k]), abs=TIP)
        assert row.difference == pytest.approx(float(w[q, k] - u[q, k]), abs=2 * TIP)
        assert row.scaled_score == pytest.approx(float(a.scaled.scores[head, q, k]), abs=5e-4)
        assert row.raw_score == pytest.approx(float(raw[q, k]), abs=5e-4 + 1e-5 * abs(float(raw[q, k])))
        assert row.query_token == a.tokens[q]
        assert row.key_token == a.tokens[k]


def test_chart_data_equals_analyze_for_a_spec_from_the_url():
    at = open_page(CAT)
    assert not at.exception and not at.error
    (data,) = cells(at)                                       # one figure, every cell
    assert len(data) == 36                                    # 6 x 6 with "the" twice
    assert_cells_match(data, analyze(CAT), head=0)
    assert not at.get("vega_lite_chart")                      # drawn on the canvas only


def test_head_picker_changes_the_data_without_recomputing(monkeypatch):
    calls = []
    # ui.cache imports analyze when it computes: the module's attribute is what it gets
    monkeypatch.setattr(analysis_module, "analyze",
                        lambda spec: calls.append(spec) or analyze(spec))
    at = open_page(CAT)
    at.selectbox(key="view_hm_head").set_value(2).run()
    assert not at.exception
    (data,) = cells(at)
    assert_cells_match(data, analyze(CAT), head=2)
    assert at.query_params["hm_head"] == "2"                  # kept in the share link
    at.segmented_control(key="view_hm_view").set_value("grid").run()
    assert not at.exception
    assert calls == [CAT]                                     # one analysis for all three runs


def test_moving_the_zoom_recomputes_and_repools_nothing(monkeypatch):
    """Zooming a long input only slices the cached analysis: no attention, no pooling."""
    import attention.ui.views.heatmap as view

    analyses, pools = [], []
    monkeypatch.setattr(analysis_module, "analyze",
                        lambda spec: analyses.append(spec) or analyze(spec))
    real = view.pooled_matrices
    monkeypatch.setattr(view, "pooled_matrices", lambda *args: pools.append(args) or real(*args))
    spec = AttentionSpec(tokens=tuple(f"z{i}" for i in range(700)), heads=2, seed=11)
    at = open_page(spec)
    at.session_state["hm_opts"] = True                           # the Options menu, opened
    at.run()
    for q, k in ((100, 40), (300, 600), (684, 0)):
        at.number_input(key="view_hm_q").set_value(q).run()
        at.number_input(key="view_hm_k").set_value(k).run()
        assert not at.exception
        (zoom,) = cells(at)
        assert zoom["query_pos"].min() == q and zoom["key_pos"].min() == k
    at.session_state["view_hm_win"] = 64          # as the zoom's size buttons set it (browser test)
    at.run()
    assert not at.exception and len(cells(at)[0]) == 64 * 64
    assert analyses == [spec] and len(pools) == 1                # once, on the first run


def test_head_from_the_url_and_an_invalid_one_falls_back():
    a = analyze(CAT)
    (data,) = cells(open_page(CAT, hm_head="1"))
    assert_cells_match(data, a, head=1)
    at = open_page(CAT, hm_head="7")                          # only 3 heads: back to head 0
    assert not at.exception
    (data,) = cells(at)
    assert_cells_match(data, a, head=0)


def test_all_heads_grid_and_follow_one_query():
    a = analyze(CAT)
    (grid,) = main_data(open_page(CAT, hm_view="grid", hm_grid="difference"))
    assert len(grid) == 3 * 36
    for row in grid.itertuples():
        expected = a.scaled.weights[row.head, row.query_pos, row.key_pos] \
            - a.unscaled.weights[row.head, row.query_pos, row.key_pos]
        assert row.difference == pytest.approx(float(expected), abs=1e-6)
    at = open_page(CAT, hm_view="row", hm_row="4", hm_head="1")
    assert not at.exception
    (row,) = main_data(at)
    scaled = row[row["kind"] == row["kind"].iloc[0]].sort_values("key_pos")["value"]
    torch.testing.assert_close(torch.tensor(scaled.to_numpy()), a.scaled.weights[1, 4])
    assert [m.value for m in at.metric][:2] == [f"{float(a.scaled.weights[1, 4].max()):.3f}",
                                                f"{float(a.unscaled.weights[1, 4].max()):.3f}"]


def test_following_one_query_of_a_long_input_draws_two_lines_on_the_canvas():
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(300)), heads=2, seed=8)
    at = open_page(spec, hm_view="row", hm_row="17", hm_head="1")
    assert not at.exception and not at.get("vega_lite_chart")
    (figure,) = figures(at)
    assert figure["kind"] == "row" and figure["n"] == 300
    a = analyze(spec)
    scaled, unscaled = (torch.tensor(s["values"], dtype=torch.float64) for s in figure["series"])
    torch.testing.assert_close(scaled, a.scaled.weights[1, 17].double(), atol=TIP, rtol=0)
    torch.testing.assert_close(unscaled, a.unscaled.weights[1, 17].double(), atol=TIP, rtol=0)
    # past ROW_OPTIONS_MAX tokens the row is a position (no 300-option list), and the figure
    # names the query's token
    assert not [s for s in at.selectbox if s.key == "view_hm_row"]
    assert at.number_input(key="view_hm_row").value == 17
    lines = translate("en", "heatmap.row_lines", n="300")          # why lines, not bars
    assert figure["title"] == f"Query 17 · w17 · {lines}"
    at.number_input(key="view_hm_row").increment().run()
    (figure,) = figures(at)
    assert figure["title"] == f"Query 18 · w18 · {lines}" and at.query_params["hm_row"] == "18"
    torch.testing.assert_close(torch.tensor(figure["series"][0]["values"], dtype=torch.float64),
                               a.scaled.weights[1, 18].double(), atol=TIP, rtol=0)


def overview(at: AppTest) -> tuple[dict[str, np.ndarray], list[dict]]:
    """The overview figure's panel images ({value: (b, b, 4) RGBA}) and its zoom outline
    (q0, q1, k0, k1)."""
    (figure,) = [f for f in figures(at) if f["kind"] == "blocks"]
    return figure_images(figure), figure["box"]


def block_value(m: torch.Tensor, q: range, k: range, how: str, causal: bool) -> float:
    """One block of an (n, n) matrix pooled by hand (NaN when the mask forbids every cell)."""
    cells = [float(m[i, j]) for i in q for j in k if not causal or j <= i]
    if not cells:
        return math.nan
    if how == "mean":
        return sum(cells) / len(cells)
    return max(cells, key=abs) if how == "extreme" else max(cells)


def assert_overview_matches(images, a, head: int, how: str, causal: bool, picks) -> None:
    """Sampled blocks of each panel image have the colour of that block pooled by hand."""
    side = images["weight"].shape[0]
    size = math.ceil(a.n / side)
    w, u = a.scaled.weights[head], a.unscaled.weights[head]
    shared_top = max(float(w.max()), float(u.max()))         # max pooling keeps the global max
    for bq, bk in picks:
        q = range(bq * size, min(a.n, (bq + 1) * size))
        k = range(bk * size, min(a.n, (bk + 1) * size))
        expected = {"weight": block_value(w, q, k, how, causal),
                    "unscaled_weight": block_value(u, q, k, how, causal),
                    "difference": block_value(w - u, q, k, "extreme" if how == "max" else how,
                                              causal)}
        for value, image in images.items():
            pixel = image[bq, bk]
            if math.isnan(expected[value]):
                assert pixel[3] == 0                          # no allowed cell: transparent
                continue
            if how == "max" and value != "difference":
                domain = (0.0, shared_top)
            else:
                continue                                      # mean / difference: own domains
            colour = colorize(np.array([[expected[value]]]), domain, "blues")[0, 0]
            np.testing.assert_allclose(pixel, colour, atol=1)


def test_2048_tokens_draw_an_overview_image_with_a_notice_and_a_zoom_window():
    spec = AttentionSpec(tokens=tuple(f"w{i % 97}" for i in range(2048)), heads=1, d_k=8,
                         d_model=16, causal=True)
    at = open_page(spec, hm_q="1000", hm_k="990")
    assert not at.exception and not at.error
    assert any("2,048 tokens" in info.value and "256 × 256" in info.value
               and "8 × 8" in info.value for info in at.info)
    images, box = overview(at)
    assert all(image.shape == (256, 256, 4) for image in images.values())
    assert box == [1000, 1000 + DEFAULT_WINDOW, 990, 990 + DEFAULT_WINDOW]
    a = analyze(spec)
    # Causal: blocks wholly above the diagonal are transparent, the diagonal's are drawn.
    alpha = images["weight"][..., 3]
    assert (alpha[np.triu_indices(256, k=1)] == 0).all() and (alpha[np.tril_indices(256)] == 255).all()
    rng = np.random.default_rng(1)
    picks = [(0, 0), (255, 255), (255, 0), (3, 200), *rng.integers(0, 256, (40, 2)).tolist()]
    assert_overview_matches(images, a, 0, "max", True, picks)
    # The zoom window is every cell of queries 1000-1015 x keys 990-1005 (causal: k <= q).
    (zoom,) = cells(at)
    assert len(zoom) == sum(1 for q in range(1000, 1016) for k in range(990, 1006) if k <= q)
    assert_cells_match(zoom, a, head=0)
    assert set(zoom["query_pos"]) == set(range(1000, 1016))
    # The zoom's axes are those positions' own tokens; masked cells are transparent.
    (figure,) = [f for f in figures(at) if f["kind"] == "cells"]
    assert figure["y"]["labels"] == list(spec.tokens[1000:1016])
    assert figure["x"]["labels"] == list(spec.tokens[990:1006])
    # Its size buttons are the figure's own, the current size marked (a click: the browser test)
    sizes = figure["choices"]
    assert sizes["event"] == "size" and sizes["current"] == 16
    assert sizes["options"] == [[w, str(w)] for w in (16, 24, 32, 48, 64)]
    alpha = figure_images(figure)["weight"][..., 3]                     # (16, 16)
    allowed = np.array([[990 + j <= 1000 + i for j in range(16)] for i in range(16)])
    assert ((alpha == 255) == allowed).all()


def test_all_heads_grid_of_a_long_input_is_one_image_per_head_on_one_scale():
    spec = AttentionSpec(tokens=tuple(f"w{i % 50}" for i in range(600)), heads=6, d_model=48,
                         d_k=8, causal=True)
    at = open_page(spec, hm_view="grid", hm_grid="unscaled_weight", hm_head="2")
    assert not at.exception and not at.error
    assert any("600 tokens" in info.value and "120 × 120" in info.value and "5 × 5" in info.value
               for info in at.info)
    assert not main_data(at)                                    # on the canvas, not Vega
    (grid,) = figures(at)
    assert grid["kind"] == "blocks" and grid["brush"] is False and grid["n"] == 600
    # the bar keeps the head picker, Options and Download menus in every view (a view change
    # then mounts none of them again); the picked head is framed and its title says so
    assert at.selectbox(key="view_hm_head").value == 2 and [
        p.proto.popover.label for p in at.main.get("popover")] == ["Options", "Download"]
    assert [p["title"] for p in grid["panels"]] == [
        f"Head {h}" + (" (picked)" if h == 2 else "") for h in range(6)]
    assert [p["current"] for p in grid["panels"]] == [h == 2 for h in range(6)]
    assert [p["legend"] is not None for p in grid["panels"]] == [False] * 5 + [True]
    # its value buttons are the figure's own (no Streamlit widget), the link's value checked
    assert not at.get("segmented_control") or all(c.key != "view_hm_grid"
                                                  for c in at.get("segmented_control"))
    words = [translate("en", f"heatmap.panel_{v}") for v in ("weight", "unscaled_weight",
                                                           "difference")]
    assert words[1] == "Unscaled: softmax(QKᵀ)" and grid["choices"] == {
        "event": "value", "label": translate("en", "heatmap.grid_value"), "help": "",
        "current": "unscaled_weight",
        "options": [list(pair) for pair in zip(("weight", "unscaled_weight", "difference"),
                                               words)]}
    a = analyze(spec)
    u, w = a.unscaled.weights, a.scaled.weights                           # (6, 600, 600)
    top = max(float(u.max()), float(w.max()))                             # one scale, all heads
    for head, panel in enumerate(grid["panels"]):
        url = panel["image"]
        pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
        assert pixels.shape == (120, 120, 4)
        assert (pixels[np.triu_indices(120, k=1)][:, 3] == 0).all()      # causal: transparent
        for bq, bk in [(0, 0), (119, 0), (60, 59), (119, 119)]:
            value = block_value(u[head], range(5 * bq, 5 * bq + 5), range(5 * bk, 5 * bk + 5),
                                "max", True)
            colour = colorize(np.array([[value]]), (0.0, top), "blues")[0, 0]
            np.testing.assert_allclose(pixels[bq, bk], colour, atol=1)


def test_up_to_256_tokens_the_overview_has_a_pixel_per_cell_and_no_pooling():
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(100)), heads=1)
    at = open_page(spec)
    assert not at.exception
    assert any("one pixel per cell" in info.value for info in at.info)
    assert not at.get("segmented_control") or all(c.key != "view_hm_pool"
                                                  for c in at.get("segmented_control"))
    images, _ = overview(at)
    a = analyze(spec)
    w = a.scaled.weights[0]
    top = max(float(w.max()), float(a.unscaled.weights[0].max()))
    expected = colorize(w.numpy(), (0.0, top), "blues")
    assert images["weight"].shape == (100, 100, 4)
    np.testing.assert_allclose(images["weight"], expected, atol=1)


def test_zoom_and_pooling_choice_are_widgets_kept_in_the_url():
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(300)), heads=1)
    at = open_page(spec)
    assert not at.main.get("number_input")          # the starts wait in the closed Options menu
    at.session_state["hm_opts"] = True
    at.run()
    at.number_input(key="view_hm_q").set_value(50).run()
    at.segmented_control(key="view_hm_pool").set_value("mean").run()
    assert not at.exception
    assert at.query_params["hm_q"] == "50" and at.query_params["hm_pool"] == "mean"
    assert any("mean" in info.value and "150 × 150" in info.value for info in at.info)
    images, box = overview(at)
    assert images["weight"].shape == (150, 150, 4) and box[0] == 50
    # Mean pooling: a block's colour is its mean's, on the scale of the pooled means.
    a = analyze(spec)
    w, u = a.scaled.weights[0], a.unscaled.weights[0]
    means = w.reshape(150, 2, 150, 2).mean(dim=(1, 3))
    top = max(float(means.max()), float(u.reshape(150, 2, 150, 2).mean(dim=(1, 3)).max()))
    for bq, bk in [(0, 0), (7, 120), (149, 3)]:
        assert block_value(w, range(2 * bq, 2 * bq + 2), range(2 * bk, 2 * bk + 2), "mean",
                           False) == pytest.approx(float(means[bq, bk]), abs=1e-6)
        colour = colorize(np.array([[float(means[bq, bk])]]), (0.0, top), "blues")[0, 0]
        np.testing.assert_allclose(images["weight"][bq, bk], colour, atol=1)
    (zoom,) = cells(at)
    assert set(zoom["query_pos"]) == set(range(50, 50 + DEFAULT_WINDOW))


def popover(at: AppTest, key: str):
    """The popover (menu) element of the main area labelled by the locale key `key`."""
    (menu,) = [p for p in at.main.get("popover")
               if p.proto.popover.label == translate("en", key)]
    return menu


def test_the_options_menu_holds_the_comparison_settings_and_keeps_them_closed():
    """Closed, the Options menu draws none of its widgets (a view change mounts one button);
    opened, it holds the colour-scale toggle, block value and both starts of the zoom window
    (its size buttons are the zoom figure's own); a setting made there stays when it closes
    (session and URL)."""
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(300)), heads=1)
    at = open_page(spec)
    assert not at.exception
    assert [c.key for c in at.main.get("segmented_control")] == ["view_hm_view"]
    assert not at.main.get("toggle") and not at.main.get("number_input")
    at.session_state["hm_opts"] = True
    at.run()
    menu = popover(at, "heatmap.options")
    assert [c.key for c in menu.get("toggle")] == ["view_hm_shared"]
    assert [c.key for c in menu.get("segmented_control")] == ["view_hm_pool"]
    assert [c.key for c in menu.get("number_input")] == ["view_hm_q", "view_hm_k"]
    at.toggle(key="view_hm_shared").set_value(False).run()
    at.session_state["hm_opts"] = False                       # closed again
    at.run()
    assert not at.exception and not at.main.get("toggle")
    assert at.query_params["hm_shared"] == "False"
    # Each panel on its own colour scale: the scaled panel's blocks reach its own maximum.
    a = analyze(spec)
    w = a.scaled.weights[0]
    images, _ = overview(at)
    means = w.reshape(150, 2, 150, 2).amax(dim=(1, 3))
    for bq, bk in [(0, 0), (75, 10), (149, 149)]:
        colour = colorize(np.array([[float(means[bq, bk])]]), (0.0, float(w.max())), "blues")
        np.testing.assert_allclose(images["weight"][bq, bk], colour[0, 0], atol=1)


@pytest.mark.parametrize("view, n, why", [("compare", 3, None), ("compare", 300, None),
                                          ("row", 300, "row"), ("grid", 3, "grid"),
                                          ("grid", 300, None)])
def test_the_options_menu_says_so_where_a_view_has_no_settings(view, n, why):
    """The comparison always has its colour scale; All heads a block value only once its
    images pool cells (past 128 tokens for one head); the one-row view has nothing. The
    menu stays the same enabled button in every view (disabled, it would be another widget
    to mount); opened where there is nothing to set, it says why."""
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(n)), heads=1)
    at = open_page(spec, hm_view=view)
    assert not at.exception and not popover(at, "heatmap.options").proto.popover.disabled
    at.session_state["hm_opts"] = True
    at.run()
    menu = popover(at, "heatmap.options")
    widgets = menu.get("toggle") + menu.get("segmented_control") + menu.get("number_input")
    captions = [c.value for c in menu.get("caption")]
    assert not at.exception
    if why is None:
        assert widgets and not captions
    else:
        assert not widgets and captions == [translate("en", f"heatmap.options_none_{why}")]


def test_bad_input_shows_an_error_and_no_exception():
    at = open_page(CAT)
    at.text_area(key="in_text").set_value('["unclosed').run()
    assert not at.exception
    assert at.error and not at.get("vega_lite_chart") and not figures(at)
    at = open_page(CAT, hm_view="nonsense", hm_q="-4", hm_win="abc")
    assert not at.exception and len(cells(at)) == 1          # bad view params: defaults


def test_a_download_menu_draws_its_buttons_only_while_open():
    """Inside a view section the comparison's Download menu is drawn closed, without its
    buttons (a click on the head then sends one element, not seven); opened, as a click opens
    it, it holds the CSV, PNG and SVG of the overview and then of the zoom window, each under
    its heading, for the chosen head and window."""
    long = AttentionSpec(tokens=tuple(f"t{i}" for i in range(100)), heads=2, d_k=8,
                         d_model=16, seed=1)
    at = open_page(long, hm_head="1")
    assert not at.exception
    labels = lambda: [b.label for b in at.main.get("download_button")]   # noqa: E731
    download = lambda: [p for p in at.main.get("popover")                # noqa: E731
                        if p.proto.popover.label == translate("en", "export.download")]
    assert labels() == [] and len(download()) == 1
    at.session_state["hm_dl"] = True
    at.run()
    assert not at.exception and labels() == ["CSV", "PNG", "SVG"] * 2
    names = [b.proto.id for b in at.main.get("download_button")]
    assert "hm_csv_overview" in names[0] and "hm_csv_cells" in names[3]
    assert all("hm_overview_head1_max" in name for name in names[1:3])
    assert all("hm_attention_head1_q0-15_k0-15" in name for name in names[4:])
    captions = [c.value for c in download()[0].get("caption")]
    assert captions == [translate("en", "heatmap.download_overview"),
                        translate("en", "heatmap.download_window")]
