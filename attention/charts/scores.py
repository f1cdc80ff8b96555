"""Charts of the Score analysis page: why attention divides q.k by sqrt(d_k).

Builders only: the small tables they draw (pre-binned histograms, per-position means, a
bounded sample, the d_k sweep, the saturation curve) come from attention/analysis/scorestats.py,
attention/analysis/ and attention/analysis/saturation.py; the page's written findings from
attention/conclusions/scores.py. No torch here: a chart is restyled without touching the numbers.

Labels come from attention/locales/<lang>/scores.toml through `translate` (no streamlit here).
"""
from __future__ import annotations

import json
import math

import altair as alt
import numpy as np
import pandas as pd

from attention.charts.size import Panels, fit_width, panel_title
from attention.i18n import translate

VARIANTS = ("scaled", "unscaled")        # the two attention results drawn side by side
# the sweep's panels, in order: the score spread, then the row metrics of analysis.dk_sweep
SWEEP_METRICS = ("score_std", "entropy", "effective_tokens", "max_weight", "jacobian_norm", "gini")
FACET_SPACING = {"row": 30, "column": 36}
EVERY_LABEL = 24         # up to this many queries, every position gets its token label
MAX_POSITIONS = 512      # above this many queries, row metrics are shown as distributions
COLORS = {"scaled": "#1f77b4", "unscaled": "#d62728", "raw": "#d62728"}


def _t(lang: str, key: str, **values) -> str:
    return translate(lang, f"scores.{key}", **values)


# ---- (a) raw vs scaled score distributions ------------------------------------------------

def _score_panels(hist: pd.DataFrame, stats: pd.DataFrame, lang: str) -> list[tuple[str, alt.LayerChart]]:
    """(title, unsized layer) of the raw and the scaled histograms."""
    panels = []
    for row in stats.itertuples():
        data = hist[hist["series"] == row.series]
        title = _t(lang, f"hist_title_{row.series}", std=row.std, expected=row.expected_std)
        base = alt.Chart(data).encode(
            x=alt.X("bin_start:Q", title=_t(lang, f"axis_{row.series}"),
                    scale=alt.Scale(nice=False)),
            x2=alt.X2("bin_end"))
        bars = base.mark_rect(color=COLORS[row.series], opacity=0.85).encode(
            y=alt.Y("share:Q", title=_t(lang, "axis_share"), axis=alt.Axis(format="%")),
            y2=alt.Y2Datum(0),
            tooltip=[alt.Tooltip("bin_start:Q", title=_t(lang, "tip_from"), format=".3f"),
                     alt.Tooltip("bin_end:Q", title=_t(lang, "tip_to"), format=".3f"),
                     alt.Tooltip("count:Q", title=_t(lang, "tip_count"), format=","),
                     alt.Tooltip("share:Q", title=_t(lang, "axis_share"), format=".2%")])
        marks = pd.DataFrame({
            "x": [row.mean - row.std, row.mean + row.std, -row.expected_std, row.expected_std],
            "kind": [_t(lang, "rule_measured")] * 2 + [_t(lang, "rule_expected")] * 2,
        })
        marks = marks[marks["x"].between(row.min, row.max)]       # keep the x range the data's
        rules = alt.Chart(marks).mark_rule(strokeWidth=2).encode(
            x=alt.X("x:Q"),
            strokeDash=alt.StrokeDash("kind:N", title=None, scale=alt.Scale(
                domain=[_t(lang, "rule_measured"), _t(lang, "rule_expected")],
                range=[[1, 0], [6, 4]]), legend=alt.Legend(orient="top")),
            color=alt.ColorValue("#333333"),
            tooltip=[alt.Tooltip("kind:N", title=" "),
                     alt.Tooltip("x:Q", title=_t(lang, "tip_value"), format=".3f")])
        panels.append((title, alt.layer(bars, rules)))
    return panels


def score_distribution_chart(hist: pd.DataFrame, stats: pd.DataFrame, lang: str,
                             width: int = 370, height: int = 220) -> alt.HConcatChart:
    """Raw q.k next to the scaled logits, each with its measured std (solid rules at
    mean +- std) and the std the theory expects (dashed rules at +- expected)."""
    return alt.hconcat(*[layer.properties(title=title, width=width, height=height)
                         for title, layer in _score_panels(hist, stats, lang)]
                       ).resolve_scale(x="independent", y="independent")


def score_distribution_panels(hist: pd.DataFrame, stats: pd.DataFrame, lang: str,
                              height: int = 220) -> Panels:
    """score_distribution_chart as two panels as wide as their columns (a phone stacks them)."""
    charts = tuple(fit_width(layer.properties(title=panel_title(title), height=height))
                   for title, layer in _score_panels(hist, stats, lang))
    return Panels(charts, 2, lambda: score_distribution_chart(hist, stats, lang))


# ---- (b) per-query row metrics ---------------------------------------------------------

def position_label_expr(tokens: tuple[str, ...] | list[str]) -> str:
    """Vega expression that labels an integer position axis with `token ·pos`; the axis is
    keyed by position, so repeated tokens keep their own tick. ASCII-escaped: Vega's
    expression parser rejects a raw U+2028/U+2029 inside a string literal (the whole chart
    then fails to draw), and a JSON token list can carry them."""
    table = json.dumps(list(tokens), ensure_ascii=True)
    return (f"datum.value == floor(datum.value) && datum.value >= 0 && "
            f"datum.value < {len(tokens)} ? {table}[datum.value] + ' ·' + datum.value : ''")


def _variant_color(lang: str) -> alt.Color:
    return alt.Color("variant:N", title=None, legend=alt.Legend(orient="top", labelExpr=(
        f"datum.value == 'scaled' ? {json.dumps(_t(lang, 'variant_scaled'), ensure_ascii=False)}"
        f" : {json.dumps(_t(lang, 'variant_unscaled'), ensure_ascii=False)}")),
        scale=alt.Scale(domain=list(VARIANTS), range=[COLORS[v] for v in VARIANTS]))


def _small_multiples(chart: alt.Chart, names: tuple[str, ...], labels: dict[str, str],
                     columns: int) -> alt.FacetChart:
    """One panel per metric name, in `names` order, headed by its label in the user's language."""
    facet = alt.Facet("metric:N", sort=list(names), title=None,
                      header=alt.Header(labelExpr=_lookup_expr(labels), labelFontSize=13,
                                        labelFontWeight="bold"))
    return chart.facet(facet, columns=columns, spacing=FACET_SPACING)


def _metric_names(frame: pd.DataFrame) -> tuple[str, ...]:
    """The metrics of a long table, in the order they first appear: one panel each."""
    return tuple(pd.unique(frame["metric"]))


def _metric_labels(lang: str, names: tuple[str, ...]) -> dict[str, str]:
    return {name: _t(lang, f"metric_{name}") for name in names}


def _lookup_expr(labels: dict[str, str]) -> str:
    return f"{json.dumps(labels, ensure_ascii=False)}[datum.value]"


def _row_metric_view(frame: pd.DataFrame, tokens: tuple[str, ...], lang: str) -> alt.Chart:
    """The row metrics' line chart against the query position, without size or facet."""
    n = len(tokens)
    tooltip = [alt.Tooltip("query_token:N", title=_t(lang, "tip_token")),
               alt.Tooltip("query_pos:Q", title=_t(lang, "tip_position")),
               alt.Tooltip("variant:N", title=" "),
               alt.Tooltip("value:Q", title=_t(lang, "tip_value"), format=".4f")]
    base = alt.Chart(frame).encode(
        x=alt.X("query_pos:Q", title=_t(lang, "axis_query"),
                scale=alt.Scale(domain=[0, max(n - 1, 1)], nice=False),
                axis=alt.Axis(labelExpr=position_label_expr(tokens), tickMinStep=1,
                              values=list(range(n)) if n <= EVERY_LABEL else alt.Undefined,
                              labelOverlap=n > EVERY_LABEL, labelAngle=-45 if n <= 40 else 0,
                              labelLimit=90)),
        y=alt.Y("value:Q", title=None),
        color=_variant_color(lang), tooltip=tooltip)
    return base.mark_line(strokeWidth=1.5, point=n <= 64)


def row_metric_chart(frame: pd.DataFrame, tokens: tuple[str, ...], lang: str,
                     width: int = 380, height: int = 170) -> alt.FacetChart:
    """One small multiple per metric of the frame (scorestats.row_metric_frame: entropy,
    effective tokens, max weight, Jacobian norm) against the query position, scaled vs
    unscaled."""
    chart = _row_metric_view(frame, tokens, lang).properties(width=width, height=height)
    names = _metric_names(frame)
    return (_small_multiples(chart, names, _metric_labels(lang, names), 2)
            .resolve_scale(y="independent"))


def row_metric_panels(frame: pd.DataFrame, tokens: tuple[str, ...], lang: str,
                      height: int = 170) -> Panels:
    """row_metric_chart as one panel per metric, two to a row, each as wide as its column."""
    names = _metric_names(frame)
    labels = _metric_labels(lang, names)
    charts = tuple(fit_width(_row_metric_view(frame[frame["metric"] == name], tokens, lang)
                             .properties(title=panel_title(labels[name]), height=height))
                   for name in names)
    return Panels(charts, 2, lambda: row_metric_chart(frame, tokens, lang))


def _row_metric_hist_view(bins: pd.DataFrame, lang: str) -> alt.Chart:
    return alt.Chart(bins).mark_rect(opacity=0.6).encode(
        x=alt.X("bin_start:Q", title=None, scale=alt.Scale(nice=False)), x2=alt.X2("bin_end"),
        y=alt.Y("count:Q", title=_t(lang, "axis_rows"), stack=None), y2=alt.Y2Datum(0),
        color=_variant_color(lang),
        tooltip=[alt.Tooltip("variant:N", title=" "),
                 alt.Tooltip("bin_start:Q", title=_t(lang, "tip_from"), format=".3f"),
                 alt.Tooltip("bin_end:Q", title=_t(lang, "tip_to"), format=".3f"),
                 alt.Tooltip("count:Q", title=_t(lang, "tip_count"), format=",")])


def row_metric_hist_chart(bins: pd.DataFrame, lang: str, width: int = 380,
                          height: int = 180) -> alt.FacetChart:
    """The same metrics as distributions over all rows (scorestats.row_metric_bins, for long
    inputs)."""
    chart = _row_metric_hist_view(bins, lang).properties(width=width, height=height)
    names = _metric_names(bins)
    return (_small_multiples(chart, names, _metric_labels(lang, names), 2)
            .resolve_scale(x="independent", y="independent"))


def row_metric_hist_panels(bins: pd.DataFrame, lang: str, height: int = 180) -> Panels:
    """row_metric_hist_chart as one panel per metric, two to a row."""
    names = _metric_names(bins)
    labels = _metric_labels(lang, names)
    charts = tuple(fit_width(_row_metric_hist_view(bins[bins["metric"] == name], lang)
                             .properties(title=panel_title(labels[name]), height=height))
                   for name in names)
    return Panels(charts, 2, lambda: row_metric_hist_chart(bins, lang))


# ---- (c) the d_k sweep ----------------------------------------------------------------

def sweep_long(sweep: pd.DataFrame) -> pd.DataFrame:
    """dk_sweep's wide table -> d_k, variant, metric, value (one row per point drawn)."""
    frame = sweep.assign(variant=np.where(sweep["scaled"], "scaled", "unscaled"))
    return frame.melt(id_vars=["d_k", "variant"], value_vars=list(SWEEP_METRICS),
                      var_name="metric", value_name="value")


def sweep_reference(d_ks, temperature: float) -> pd.DataFrame:
    """The std of unscaled q.k that unit-variance components give: sqrt(d_k) / temperature."""
    d_ks = np.asarray(sorted(set(d_ks)), dtype=float)
    return pd.DataFrame({"d_k": d_ks, "metric": "score_std",
                         "value": np.sqrt(d_ks) / temperature})


def _sweep_view(sweep: pd.DataFrame, lang: str, temperature: float, current_dk: int | None,
                metric: str | None = None) -> alt.LayerChart:
    """The d_k sweep's layers over its long table (one metric's rows, or all of them for a
    facet), without size."""
    long = sweep_long(sweep)
    ref = sweep_reference(sweep["d_k"], temperature)
    ref_label = _t(lang, "ref_sqrt_dk" if temperature == 1.0 else "ref_sqrt_dk_t")
    ref = ref.assign(variant="reference", reference=ref_label)
    data = pd.concat([long, ref], ignore_index=True)
    data["is_ref"] = data["reference"].notna()
    data["reference"] = data["reference"].fillna("")
    if metric is not None:
        data = data[data["metric"] == metric].reset_index(drop=True)
    x = alt.X("d_k:Q", title=_t(lang, "axis_dk"), scale=alt.Scale(type="log", base=2, nice=False),
              axis=alt.Axis(values=[d for d in sorted(set(sweep["d_k"].tolist()))
                                    if math.log2(d) % 2 == 0], format="d"))
    tooltip = [alt.Tooltip("d_k:Q", title=_t(lang, "axis_dk"), format="d"),
               alt.Tooltip("variant:N", title=" "),
               alt.Tooltip("value:Q", title=_t(lang, "tip_value"), format=".4f")]
    lines = alt.Chart().transform_filter("!datum.is_ref").mark_line(point=True).encode(
        x=x, y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
        color=_variant_color(lang), tooltip=tooltip)
    refline = alt.Chart().transform_filter("datum.is_ref").mark_line(
        strokeDash=[6, 4], color="#555555").encode(
        x=x, y=alt.Y("value:Q", title=None),
        tooltip=[alt.Tooltip("d_k:Q", title=_t(lang, "axis_dk"), format="d"),
                 alt.Tooltip("reference:N", title=" "),
                 alt.Tooltip("value:Q", title=_t(lang, "tip_value"), format=".3f")])
    layers = [lines, refline]
    if current_dk is not None:
        layers.append(alt.Chart().mark_rule(color="#999999", strokeDash=[2, 2]).encode(
            x=alt.XDatum(current_dk)))
    return alt.layer(*layers, data=data)


def _sweep_labels(lang: str, temperature: float) -> dict[str, str]:
    labels = _metric_labels(lang, SWEEP_METRICS)
    labels["score_std"] = _t(lang, "metric_score_std", ref=_t(
        lang, "ref_sqrt_dk" if temperature == 1.0 else "ref_sqrt_dk_t"))
    return labels


def sweep_chart(sweep: pd.DataFrame, lang: str, *, temperature: float = 1.0,
                current_dk: int | None = None, width: int = 235,
                height: int = 170) -> alt.FacetChart:
    """Six small multiples against d_k on a log2 axis, scaled vs unscaled; the score-std panel
    carries the sqrt(d_k) reference (dashed) and a vertical rule marks the spec's d_k."""
    chart = _sweep_view(sweep, lang, temperature, current_dk).properties(width=width,
                                                                          height=height)
    return _small_multiples(chart, SWEEP_METRICS, _sweep_labels(lang, temperature),
                            3).resolve_scale(y="independent")


def sweep_panels(sweep: pd.DataFrame, lang: str, *, temperature: float = 1.0,
                 current_dk: int | None = None, height: int = 170) -> Panels:
    """sweep_chart as six panels, three to a row, each as wide as its column."""
    labels = _sweep_labels(lang, temperature)
    charts = tuple(fit_width(_sweep_view(sweep, lang, temperature, current_dk, metric)
                             .properties(title=panel_title(labels[metric]), height=height))
                   for metric in SWEEP_METRICS)
    return Panels(charts, 3, lambda: sweep_chart(sweep, lang, temperature=temperature,
                                                 current_dk=current_dk))


# ---- (d) saturation: the gradient that survives ----------------------------------------

def saturation_chart(points: pd.DataFrame, curve: pd.DataFrame, n_keys: int,
                     lang: str, height: int = 320) -> alt.LayerChart:
    """Jacobian norm against max weight: as a row saturates (max weight -> 1) the gradient
    it passes back goes to 0. The grey curve is the one-peak row of saturation.saturation_curve."""
    tooltip = [alt.Tooltip("query_token:N", title=_t(lang, "tip_token")),
               alt.Tooltip("query_pos:Q", title=_t(lang, "tip_position")),
               alt.Tooltip("head:Q", title=_t(lang, "tip_head")),
               alt.Tooltip("variant:N", title=" "),
               alt.Tooltip("max_weight:Q", title=_t(lang, "metric_max_weight"), format=".4f"),
               alt.Tooltip("jacobian_norm:Q", title=_t(lang, "metric_jacobian_norm"),
                           format=".2e")]
    x = alt.X("max_weight:Q", title=_t(lang, "metric_max_weight"),
              scale=alt.Scale(domain=[0, 1]))
    y = alt.Y("jacobian_norm:Q", title=_t(lang, "axis_jacobian"), scale=alt.Scale(zero=True))
    dots = alt.Chart(points).mark_circle(size=28, opacity=0.55).encode(
        x=x, y=y, color=_variant_color(lang), tooltip=tooltip)
    line = alt.Chart(curve.assign(label=_t(lang, "curve_label", n=n_keys))).mark_line(
        color="#777777", strokeDash=[5, 3]).encode(
        x=x, y=y, tooltip=[alt.Tooltip("label:N", title=" "),
                           alt.Tooltip("max_weight:Q", title=_t(lang, "metric_max_weight"),
                                       format=".3f"),
                           alt.Tooltip("jacobian_norm:Q", title=_t(lang, "metric_jacobian_norm"),
                                       format=".3e")])
    return alt.layer(line, dots).properties(height=height)
