"""The Score analysis page's sections: raw vs scaled scores, each query row with and without
1/sqrt(d_k), the d_k sweep, saturation, and why the sharper attention is not the better one.

Everything is drawn from the cached Analysis and d_k sweep of the sidebar's spec; the head
picker (kept in the URL as ?sc_head=) only re-slices them. One figure of FIGURES is drawn at
a time, chosen by the Figure buttons (kept in the URL as ?sc_figure=): all four on first
paint were 13 Vega views, most of a cold link's time in the browser. The page script stays a
few calls:

    draw_scores(spec, page.view)
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import pandas as pd
import streamlit as st

from attention.analysis import frames

from attention.analysis import saturation

from attention.analysis import scorestats
from attention.analysis import SWEEP_MAX_HEADS, SWEEP_MAX_TOKENS, Analysis
from attention.charts import scores as charts
from attention.conclusions.scores import score_findings
from attention.spec import AttentionSpec
from attention.ui import cache
from attention.ui.chart import place, show
from attention.ui.explain import explanation
from attention.ui.export import chart_buttons
from attention.ui.state import view_widget
from attention.ui.text import lang, t

HEAD_VIEW = "sc_head"    # URL key: sc_<name> on this page (docs/architecture.md)
FIGURE_VIEW = "sc_figure"   # URL key of the figure shown
FIGURES = ("scores", "rows", "sweep", "saturation")   # the Figure buttons, in page order
MENU = "sc_menu_"        # a figure's Download menu: its files made only while it is open
ONE_AHEAD_FORMAT = "%.3e"   # the one-logit-ahead table's weights and norms, one format
METRIC_FORMATS = {"entropy": "{:.3f}", "effective_tokens": "{:.2f}", "max_weight": "{:.3f}",
                  "jacobian_norm": "{:.4f}", "saturated": "{:.1%}"}

# (interface-text key of the sentence before it, LaTeX) for the collapsible formulas
FORMULAS = (
    ("scores.f_softmax",
     r"p_{ij} = \frac{\exp(s\,q_i\cdot k_j / T)}{\sum_l \exp(s\,q_i\cdot k_l / T)},"
     r"\qquad s = \tfrac{1}{\sqrt{d_k}}\ \text{or}\ 1"),
    ("scores.f_jacobian",
     r"J = \frac{\partial p}{\partial z} = \operatorname{diag}(p) - p\,p^{\top},\qquad"
     r"\|J\|_F^2 = \sum_i p_i^2 - 2\sum_i p_i^3 + \Big(\sum_i p_i^2\Big)^2"),
    ("scores.f_entropy",
     r"H(p) = -\sum_j p_j \ln p_j,\qquad n_{\text{eff}} = e^{H(p)}"),
    ("scores.f_variance",
     r"\operatorname{Var}(q\cdot k) = \sum_{i=1}^{d_k} \operatorname{Var}(q_i k_i) = d_k,"
     r"\qquad \operatorname{Var}\!\Big(\frac{q\cdot k}{\sqrt{d_k}}\Big) = 1"),
)


def draw_scores(spec: AttentionSpec,
                view: Callable[..., None] = lambda draw, *args: draw(*args)) -> None:
    """Every section of the page, in order, for the sidebar's spec; the figure section is
    drawn by `view` (layout.Page.view: a click on the Figure buttons reruns only it)."""
    analysis = cache.analysis(spec)
    if analysis.n < 2:    # every row is one weight of 1: no spread, no saturation to measure
        st.info(t("scores.one_token"), icon=":material/info:")
        draw_why()
        return
    sweep = cache.sweep(spec)                                   # spinners while they compute
    d_k = analysis.q.shape[-1]
    head = pick_head(analysis)
    heads = scorestats.head_list(analysis, head)
    stats, hist = cache.score_distribution(spec, head)
    summary = scorestats.summary(analysis, heads)
    draw_summary(summary, stats)
    draw_findings(summary, stats, sweep, d_k)
    view(draw_figure, spec, head)
    draw_why()


def pick_head(analysis: Analysis) -> int | None:
    """One head or all of them (None), kept in the URL as ?sc_head= ("all" or the head's index)."""
    choice = view_widget(
        HEAD_VIEW, st.selectbox, default="all", cast=lambda raw: raw if raw == "all" else int(raw),
        valid=lambda v: v == "all" or (isinstance(v, int) and 0 <= v < analysis.heads),
        label=t("scores.head"), options=["all", *range(analysis.heads)], help=t("scores.head_help"),
        format_func=lambda v: t("scores.head_all") if v == "all" else t("scores.head_one", head=v),
        width=260)
    return None if choice == "all" else choice


def pick_figure() -> str:
    """Which figure is drawn, kept in the URL as ?sc_figure= (an unknown value: the first)."""
    return view_widget(FIGURE_VIEW, st.segmented_control, default=FIGURES[0], cast=str,
                       valid=FIGURES.__contains__, label=t("scores.figure"), options=FIGURES,
                       required=True, format_func=lambda f: t(f"scores.figure_{f}"),
                       help=t("scores.figure_help"))


def draw_figure(spec: AttentionSpec, head: int | None) -> None:
    """The Figure buttons and the one figure they name, from the cached results (lookups)."""
    figure = pick_figure()
    analysis = cache.analysis(spec)
    heads = scorestats.head_list(analysis, head)
    if figure == "scores":
        draw_distributions(*cache.score_distribution(spec, head))
    elif figure == "rows":
        draw_row_metrics(analysis, heads)
    elif figure == "sweep":
        draw_sweep(spec, cache.sweep(spec), analysis.q.shape[-1])
    else:
        draw_saturation(analysis, heads)


def draw_summary(summary: pd.DataFrame, stats: pd.DataFrame) -> None:
    """The score stds against sqrt(d_k), then each row metric scaled and unscaled."""
    st.subheader(t("scores.summary"))
    std = stats.set_index("series")
    top = st.columns(3)
    top[0].metric(t("scores.m_raw_std"), f"{std.loc['raw', 'std']:.3f}",
                  help=t("scores.m_raw_std_help", sqrt=std.loc["raw", "expected_std"]))
    top[1].metric(t("scores.m_sqrt_dk"), f"{std.loc['raw', 'expected_std']:.3f}",
                  help=t("scores.m_sqrt_dk_help"))
    top[2].metric(t("scores.m_scaled_std"), f"{std.loc['scaled', 'std']:.3f}",
                  help=t("scores.m_scaled_std_help", expected=std.loc["scaled", "expected_std"]))
    for col, (name, fmt) in zip(st.columns(len(METRIC_FORMATS)), METRIC_FORMATS.items()):
        col.markdown(f"**{t(f'scores.short_{name}')}**",
                     help=t(f"scores.help_{name}", threshold=scorestats.SATURATED))
        scaled, unscaled = summary.loc["scaled", name], summary.loc["unscaled", name]
        col.metric(t("scores.m_scaled"), fmt.format(scaled))
        col.metric(t("scores.m_unscaled"), fmt.format(unscaled),
                   delta=fmt.format(unscaled - scaled), delta_color="off",
                   help=t("scores.m_delta_help"))


def draw_findings(summary: pd.DataFrame, stats: pd.DataFrame, sweep: pd.DataFrame,
                  d_k: int) -> None:
    """What the numbers mean for this input, written from them, in a framed box."""
    with st.container(border=True):
        st.markdown(f"**{t('scores.findings')}**")
        st.markdown("\n".join(f"- {line}" for line in
                              score_findings(summary, stats, sweep, d_k, lang())))


def draw_distributions(stats: pd.DataFrame, hist: pd.DataFrame) -> None:
    """(a) Histograms of the raw and the scaled scores, with their measured and expected std."""
    st.subheader(t("scores.sec_scores"))
    std = stats.set_index("series")
    st.caption(t("scores.scores_caption", count=int(std.loc["raw", "count"]),
                 bins=len(hist) // len(scorestats.SERIES)))
    chart = charts.score_distribution_panels(hist, stats, lang())
    show(chart)
    chart_buttons(chart, "score_distribution", hist, key=MENU + "score_distribution")


def draw_row_metrics(analysis: Analysis, heads: list[int]) -> None:
    """(b) Every query row's metrics scaled and unscaled: one point per position, or their
    distributions when there are more positions than a chart can label."""
    st.subheader(t("scores.sec_rows"))
    if analysis.n <= charts.MAX_POSITIONS:
        st.caption(t("scores.rows_caption"))
        chart = charts.row_metric_panels(scorestats.row_metric_frame(analysis, heads),
                                         analysis.tokens, lang())
    else:
        st.caption(t("scores.rows_hist_caption", n=analysis.n, rows=len(heads) * analysis.n))
        chart = charts.row_metric_hist_panels(scorestats.row_metric_bins(analysis, heads), lang())
    show(chart)
    chart_buttons(chart, "row_metrics", partial(_rows_of, analysis, heads),
                  key=MENU + "row_metrics")


def draw_sweep(spec: AttentionSpec, sweep: pd.DataFrame, d_k: int) -> None:
    """(c) The same input projected with every d_k from 1 to 1024, the current one marked."""
    st.subheader(t("scores.sec_sweep"))
    st.caption(t("scores.sweep_caption", n=min(spec.n, SWEEP_MAX_TOKENS),
                 heads=min(spec.heads, SWEEP_MAX_HEADS), d_k=d_k))
    if spec.source == "pretrained":
        st.caption(t("scores.sweep_pretrained"))
    chart = charts.sweep_panels(sweep, lang(), temperature=spec.temperature, current_dk=d_k)
    show(chart)
    chart_buttons(chart, "dk_sweep", sweep, key=MENU + "dk_sweep")


def draw_saturation(analysis: Analysis, heads: list[int]) -> None:
    """(d) Each row's Jacobian norm against its max weight (sampled when there are many rows),
    over the curve of a row with one score ahead of the rest."""
    st.subheader(t("scores.sec_saturation"))
    st.caption(t("scores.saturation_caption", n=analysis.n - 1))
    points = scorestats.saturation_frame(analysis, heads)
    rows = len(heads) * analysis.n
    with place():                   # one head's rows may need no sample: the chart stays put
        if rows > scorestats.MAX_POINTS:
            st.caption(t("scores.saturation_sample", shown=scorestats.MAX_POINTS, rows=rows))
    chart = charts.saturation_chart(points, saturation.saturation_curve(analysis.n), analysis.n,
                                    lang())
    show(chart, width="stretch")
    chart_buttons(chart, "saturation", points, key=MENU + "saturation")


def draw_why() -> None:
    """Why higher attention is not better, beside a live one-logit-ahead table, then the
    collapsible formulas."""
    st.subheader(t("scores.sec_why"))
    why, demo = st.columns([3, 2], gap="large")
    why.markdown(t("scores.why_body"))
    demo.caption(t("scores.one_ahead"))
    demo.table(one_ahead_table(saturation.one_logit_ahead()), hide_index=True)
    explanation("scores.formulas", FORMULAS)


def one_ahead_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The one-logit-ahead rows as the static table shows them: five rows need no sorting or
    scrolling, and st.dataframe's grid cost a cold link ~250 ms of its own script in the
    browser. One number format for both weight columns: the Jacobian falls to 1e-8 as the
    weight nears 1. Cells are text, escaped by st.table."""
    return pd.DataFrame({
        t("scores.col_gap"): [f"{g:.0f}" for g in frame["gap"]],
        **{t(f"scores.col_{key}"): [ONE_AHEAD_FORMAT % v for v in frame[name]]
           for name, key in (("max_weight", "max_weight"), ("jacobian_norm", "jacobian"))},
    })


def _rows_of(analysis: Analysis, heads: list[int]) -> pd.DataFrame:
    """The chosen heads' per-row metrics (the rows figure's CSV, made on a click: every query
    of them, whether the figure draws them as points or as distributions)."""
    table = frames.row_metrics(analysis)
    return table[table["head"].isin(heads)]
