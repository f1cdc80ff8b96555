"""The Score analysis page (AppTest): its numbers are analyze(spec)'s and dk_sweep(spec)'s."""
import numpy as np
import pandas as pd
import pytest
import torch

from attention.analysis import analyze, dk_sweep
from attention.analysis import scorestats
from attention.spec import AttentionSpec
from attention.ui.views.scores import FIGURES
from tests.apptest import chart_frames, chart_places, open_page

PAGE = "pages/2_Score_analysis.py"
SPEC = AttentionSpec(tokens=("the", "cat", "sat", "on", "the", "mat"), d_k=8, heads=2)
METRICS = ("entropy", "effective_tokens", "max_weight", "jacobian_norm")
# Half the last digit each metric is shown with (ui/views/scores.py METRIC_FORMATS), plus float slack.
DISPLAYED = {"entropy": 5.01e-4, "effective_tokens": 5.01e-3, "max_weight": 5.01e-4,
             "jacobian_norm": 5.01e-5}


_datasets = chart_frames


def _find(frames, *columns) -> pd.DataFrame:
    """Every dataset with these columns (a chart may split its data by panel), stacked."""
    hits = [f for f in frames if set(columns) <= set(f.columns)]
    assert hits, [list(f.columns) for f in frames]
    return pd.concat(hits, ignore_index=True)


def _param(at, name):
    value = at.query_params[name]
    return value[-1] if isinstance(value, list) else value


def _metric_values(at) -> list[float]:
    return [float(m.value.rstrip("%")) / (100 if m.value.endswith("%") else 1) for m in at.metric]


def _raw_std(a, heads) -> float:
    raw = a.q[heads] @ a.k[heads].transpose(-2, -1)                      # (h, n, n)
    if a.mask is not None:
        return raw[:, a.mask].std().item()
    return raw.std().item()


def test_metrics_and_charts_equal_analyze_and_sweep():
    at = open_page(PAGE, SPEC)
    assert not at.exception
    a = analyze(SPEC)
    values = _metric_values(at)
    assert values[0] == pytest.approx(_raw_std(a, slice(None)), abs=1e-3)
    assert values[1] == pytest.approx(8 ** 0.5, abs=1e-3)
    assert values[2] == pytest.approx(_raw_std(a, slice(None)) / 8 ** 0.5, abs=1e-3)
    for i, name in enumerate(METRICS):                                   # scaled, unscaled pairs
        shown = DISPLAYED[name]                                          # the page's rounding
        assert values[3 + 2 * i] == pytest.approx(a.scaled_metrics[name].mean().item(), abs=shown)
        assert values[4 + 2 * i] == pytest.approx(a.unscaled_metrics[name].mean().item(), abs=shown)

    # one figure at a time (the Figure buttons): the score distributions first
    hist = _find(_datasets(at), "series", "bin_start", "count")
    assert hist.groupby("series")["count"].sum().tolist() == [2 * 36, 2 * 36]

    at.segmented_control(key="view_sc_figure").set_value("rows").run()
    assert not at.exception
    rows = _find(_datasets(at), "query_pos", "metric", "variant", "value")
    for variant, m in (("scaled", a.scaled_metrics), ("unscaled", a.unscaled_metrics)):
        for name in METRICS:
            got = rows.query("variant == @variant and metric == @name").sort_values("query_pos")
            np.testing.assert_allclose(got["value"], m[name].mean(0).numpy(), rtol=1e-5)
    # six positions, so "the" at 0 and at 4 keep separate points
    assert sorted(rows["query_pos"].unique()) == list(range(6))

    sweep = dk_sweep(SPEC)
    at.segmented_control(key="view_sc_figure").set_value("sweep").run()
    assert not at.exception
    drawn = _find(_datasets(at), "d_k", "variant", "metric", "is_ref")
    drawn = drawn[~drawn["is_ref"]]
    for row in sweep.itertuples():
        variant = "scaled" if row.scaled else "unscaled"
        got = drawn.query("d_k == @row.d_k and variant == @variant").set_index("metric")["value"]
        for name in ("score_std", "entropy", "max_weight", "jacobian_norm", "gini"):
            assert got[name] == pytest.approx(getattr(row, name), rel=1e-6)

    text = " ".join(m.value for m in at.markdown)
    assert f"{a.unscaled_metrics['max_weight'].mean().item():.2f}" in text
    assert f"{sweep.query('d_k == 1024 and not scaled')['max_weight'].item():.2f}" in text


def test_head_choice_lives_in_the_url():
    at = open_page(PAGE, SPEC, sc_head="1")
    assert not at.exception
    assert at.selectbox(key="view_sc_head").value == 1 and _param(at, "sc_head") == "1"
    a = analyze(SPEC)
    values = _metric_values(at)
    assert values[0] == pytest.approx(_raw_std(a, 1), abs=1e-3)
    assert values[5] == pytest.approx(a.scaled_metrics["effective_tokens"][1].mean().item(),
                                      abs=1e-2)
    at.selectbox(key="view_sc_head").set_value("all").run()
    assert not at.exception and _param(at, "sc_head") == "all"
    assert _metric_values(at)[0] == pytest.approx(_raw_std(a, slice(None)), abs=1e-3)


def test_a_link_with_the_old_head_name_opens_that_head():
    """?head= (before the sc_ prefix) still picks the head; the address bar then says sc_head."""
    at = open_page(PAGE, SPEC, head="1")
    assert not at.exception
    assert at.selectbox(key="view_sc_head").value == 1 and _param(at, "sc_head") == "1"
    assert "head" not in dict(at.query_params)


@pytest.mark.parametrize("bad", ["7", "-1", "x"])
def test_a_head_the_spec_does_not_have_falls_back_to_all(bad):
    at = open_page(PAGE, SPEC, sc_head=bad)
    assert not at.exception
    assert at.selectbox(key="view_sc_head").value == "all" and _param(at, "sc_head") == "all"


def _every_figure(spec, **params) -> list[pd.DataFrame]:
    """The datasets of every figure of the page (each opened by its own link)."""
    frames = []
    for figure in FIGURES:
        at = open_page(PAGE, spec, sc_figure=figure, **params)
        assert not at.exception, figure
        frames += _datasets(at)
    return frames


def test_a_head_pick_moves_no_chart():
    """All heads' rows are sampled on the saturation chart, one head's are not: the sample's
    note sits in a place there either way (ui.chart.place), so the chart keeps its place and
    is updated, not embedded again."""
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(400)), d_k=8, heads=4)
    at = open_page(PAGE, spec, sc_figure="saturation")
    places = chart_places(at)
    sampled = lambda: any("Showing a sample" in c.value for c in at.caption)   # noqa: E731
    assert places and sampled()
    at.selectbox(key="view_sc_head").set_value(1).run()
    assert not at.exception and not sampled() and chart_places(at) == places


def test_causal_mask_leaves_no_nan_or_inf_in_any_chart():
    spec = AttentionSpec(tokens=SPEC.tokens * 3, d_k=64, heads=3, causal=True)
    frames = _every_figure(spec)
    assert len(frames) >= 5
    for frame in frames:
        numbers = frame.select_dtypes("number").to_numpy(dtype=float)
        assert np.isfinite(numbers).all(), list(frame.columns)
    hist = _find(frames, "series", "bin_start", "count")
    assert hist.groupby("series")["count"].sum().tolist() == [3 * 171, 3 * 171]  # 18*19/2 cells


def test_a_2048_token_input_keeps_chart_data_small():
    tokens = tuple(f"w{i % 97}" for i in range(2048))
    spec = AttentionSpec(tokens=tokens, d_k=8, heads=1, causal=True)
    frames = _every_figure(spec)
    # 2048 rows x 2 variants would be 4096 saturation points: sampled to 1500 per variant
    assert all(len(f) <= 2 * scorestats.MAX_POINTS for f in frames), [len(f) for f in frames]
    assert sum(len(f) for f in frames) < 5000       # all four figures together
    hist = _find(frames, "series", "bin_start", "count")
    assert hist.groupby("series")["count"].sum().tolist() == [2048 * 2049 // 2] * 2
    # long inputs show the row metrics as distributions over every row
    dist = _find(frames, "metric", "variant", "bin_start", "count")
    assert (dist.groupby(["metric", "variant"])["count"].sum() == 2048).all()


@pytest.mark.parametrize("text", ["", '["a"', " ".join(["t"] * 2049)])
def test_bad_input_shows_an_error_not_a_traceback(text):
    at = open_page(PAGE, SPEC)
    at.sidebar.text_area(key="in_text").input(text).run()
    assert not at.exception
    assert len(at.error) == 1 and not at.get("vega_lite_chart")


def test_chinese_interface_text():
    at = open_page(PAGE, SPEC, lang="zh")
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert labels[0] == "原始 q·k 的标准差" and "不缩放" in labels
    assert any("当 d_k = 8 时" in m.value for m in at.markdown)


def test_temperature_does_not_change_the_raw_scores():
    spec = AttentionSpec(tokens=SPEC.tokens, d_k=8, heads=2, temperature=0.5)
    at = open_page(PAGE, spec)
    assert not at.exception
    a = analyze(spec)
    values = _metric_values(at)
    assert values[0] == pytest.approx(_raw_std(a, slice(None)), abs=1e-3)
    assert values[2] == pytest.approx(a.scaled.scores.std().item(), abs=1e-3)
    assert torch.isfinite(a.scaled.scores).all()


def test_sweep_caption_states_the_heads_and_tokens_the_sweep_used():
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(300)), heads=8, d_model=64, d_k=8)
    at = open_page(PAGE, spec, sc_figure="sweep")
    assert not at.exception
    assert any("first 256 tokens, 4 heads" in c.value for c in at.caption)
    drawn = _find(chart_frames(at), "d_k", "variant", "metric", "is_ref")
    drawn = drawn[~drawn["is_ref"] & (drawn["metric"] == "max_weight")]
    capped = dk_sweep(AttentionSpec(tokens=spec.tokens[:256], heads=4, d_model=64, d_k=8))
    for row in capped.itertuples():                               # what the caption says
        variant = "scaled" if row.scaled else "unscaled"
        got = drawn.query("d_k == @row.d_k and variant == @variant")["value"].item()
        assert got == pytest.approx(row.max_weight, rel=1e-6)


def test_a_figures_download_menu_makes_its_buttons_only_when_opened():
    """The Download menu under a figure is lazy: closed on first paint (no buttons, no
    one-chart figure built), its PNG and SVG buttons there once it is opened."""
    from tests.apptest import open_menu

    at = open_page(PAGE, SPEC)
    assert not at.exception
    ids = lambda: " ".join(b.proto.id for b in at.get("download_button"))   # noqa: E731
    assert "png_score_distribution" not in ids()
    at = open_menu(at, "sc_menu_score_distribution")
    assert not at.exception
    assert "png_score_distribution" in ids() and "svg_score_distribution" in ids()
    assert "csv_score_distribution" in ids()


@pytest.mark.parametrize("figure, files", [("rows", "row_metrics"), ("sweep", "dk_sweep"),
                                           ("saturation", "saturation")])
def test_a_figures_numbers_are_in_its_own_download_menu(figure, files):
    """Each figure's menu offers the CSV of its numbers beside its PNG and SVG (the page has
    no downloads section of its own: a cold link draws no buttons nobody opened)."""
    from tests.apptest import open_menu

    at = open_page(PAGE, SPEC, sc_figure=figure)
    assert not at.exception and not at.get("download_button")
    at = open_menu(at, f"sc_menu_{files}")
    assert not at.exception
    names = [b.proto.id for b in at.get("download_button")]
    assert len(names) == 3
    assert all(any(f"{kind}_{files}" in name for name in names) for kind in ("csv", "png", "svg"))


# The columns each figure's charts are drawn from, and how many charts (panels) it has.
FIGURE_DATA = {"scores": (("series", "bin_start", "count"), 2),
               "rows": (("query_pos", "metric", "variant", "value"), 4),
               "sweep": (("d_k", "variant", "metric", "is_ref"), 6),
               "saturation": (("max_weight", "jacobian_norm", "variant"), 1)}


def _figure_shown(at) -> str:
    """The one figure on the page, told by its charts' columns (and no other figure's)."""
    frames = _datasets(at)
    shown = [name for name, (columns, _) in FIGURE_DATA.items()
             if any(set(columns) <= set(f.columns) for f in frames)]
    assert len(shown) == 1, shown
    assert len(at.get("vega_lite_chart")) == FIGURE_DATA[shown[0]][1]
    return shown[0]


def test_the_figure_buttons_draw_each_figure_and_keep_it_in_the_url():
    """A click on each Figure button draws that figure alone (its panels, with data) and
    writes it to the address bar; a link with ?sc_figure= reopens it."""
    assert set(FIGURE_DATA) == set(FIGURES)
    at = open_page(PAGE, SPEC)
    assert not at.exception
    assert at.segmented_control(key="view_sc_figure").value == "scores"
    assert _figure_shown(at) == "scores" and _param(at, "sc_figure") == "scores"
    for figure in ("rows", "sweep", "saturation", "scores"):
        at.segmented_control(key="view_sc_figure").set_value(figure).run()
        assert not at.exception
        assert _figure_shown(at) == figure and _param(at, "sc_figure") == figure
        assert all(len(f) for f in _datasets(at))                      # no empty chart
    for figure in FIGURES:                                              # the shared link
        link = open_page(PAGE, SPEC, sc_figure=figure)
        assert not link.exception
        assert link.segmented_control(key="view_sc_figure").value == figure
        assert _figure_shown(link) == figure and _param(link, "sc_figure") == figure


def test_the_figure_and_head_choices_travel_together():
    at = open_page(PAGE, SPEC, sc_figure="saturation", sc_head="1")
    assert not at.exception
    assert _figure_shown(at) == "saturation"
    points = _find(_datasets(at), "max_weight", "jacobian_norm", "head")
    assert set(points["head"]) == {1}
    assert _param(at, "sc_head") == "1" and _param(at, "sc_figure") == "saturation"


@pytest.mark.parametrize("bad", ["heatmap", "", "SWEEP", "0", "<script>"])
def test_an_unknown_figure_falls_back_to_the_first(bad):
    at = open_page(PAGE, SPEC, sc_figure=bad)
    assert not at.exception and not at.error
    assert at.segmented_control(key="view_sc_figure").value == "scores"
    assert _figure_shown(at) == "scores" and _param(at, "sc_figure") == "scores"


def test_the_figure_buttons_speak_chinese():
    from attention.i18n import translate

    at = open_page(PAGE, SPEC, lang="zh", sc_figure="sweep")
    assert not at.exception
    control = at.segmented_control(key="view_sc_figure")
    assert control.label == translate("zh", "scores.figure") == "图表"
    shown = [option.content for option in control.proto.options]      # as the page writes them
    assert shown == [translate("zh", f"scores.figure_{f}") for f in FIGURES]
    assert "分数分布" in shown and _figure_shown(at) == "sweep"
