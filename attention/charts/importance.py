"""Charts of the "Does the model use it?" page, built from the frames of attention.importance
(agreement, faithfulness, curves). Labels come from attention/locales/<lang>/importance.toml;
rows with NaN are left out (flow past its cap, a layer without an interval), so no chart ever
draws NaN. Intervals are black bars, null bands and random orders grey."""
from __future__ import annotations

import math

import altair as alt
import pandas as pd

from attention.charts.size import fit_width
from attention.i18n import translate

GREY = "#bbbbbb"


def _t(lang: str, key: str, **values) -> str:
    return translate(lang, f"importance.{key}", **values)


def method_label(lang: str, method: str, layer, mean: bool = False) -> str:
    """A row's name as the page shows it: "rollout, layer 5", "raw attention, mean over
    layers", "gradient × input"."""
    try:
        name = _t(lang, f"method_{method}")
    except KeyError:
        name = method
    if mean:
        return _t(lang, "label_mean", method=name)
    if layer is None or (isinstance(layer, float) and math.isnan(layer)):
        return name
    return _t(lang, "label_layer", method=name, layer=int(layer))


def labelled(frame: pd.DataFrame, lang: str) -> pd.DataFrame:
    """frame plus `label` (method_label of each row) and `order` (its row number)."""
    mean = frame["layer_mean"] if "layer_mean" in frame else [False] * len(frame)
    return frame.assign(label=[method_label(lang, m, layer, bool(x)) for m, layer, x in
                               zip(frame["method"], frame["layer"], mean)],
                        order=range(len(frame)))


def _tips(lang: str, columns, fmt: str) -> list[alt.Tooltip]:
    """Tooltips of interval columns, each titled by its locale key col_<column>."""
    return [alt.Tooltip(f"{c}:Q", title=_t(lang, f"col_{c}"), format=fmt) for c in columns]


def interval_chart(frame: pd.DataFrame, lang: str, *, x_title: str, value: str = "spearman",
                   y: str = "label", y_title: str | None = None) -> alt.Chart:
    """One row per entry of `frame` (label, value, ci_low, ci_high, null_low, null_high):
    a grey bar for the null band, a black bar for the interval, a point for the value."""
    data = frame.dropna(subset=[value, "ci_low", "ci_high"])
    data = data[[y, value, "ci_low", "ci_high", "null_low", "null_high"]].copy()  # no NaN layer
    data["null_low"] = data["null_low"].fillna(data[value])
    data["null_high"] = data["null_high"].fillna(data[value])
    sort = list(dict.fromkeys(data[y]))
    ycode = alt.Y(f"{y}:N", sort=sort, title=y_title,
                  axis=alt.Axis(labelLimit=320))
    tips = [alt.Tooltip(f"{y}:N", title=_t(lang, "col_method")),
            alt.Tooltip(f"{value}:Q", title=_t(lang, "col_rho"), format=".3f"),
            *_tips(lang, ("ci_low", "ci_high", "null_low", "null_high"), ".3f")]
    base = alt.Chart(data).encode(y=ycode, tooltip=tips)
    null = base.mark_bar(color=GREY, opacity=0.6, size=10).encode(
        # the title ends where the plot ends: centred under a phone's narrow plot (the labels
        # take most of the width) it ran past the chart's right edge
        x=alt.X("null_low:Q", title=x_title, axis=alt.Axis(titleAnchor="end")),
        x2="null_high:Q")
    ci = base.mark_rule(color="black", strokeWidth=2).encode(x="ci_low:Q", x2="ci_high:Q")
    point = base.mark_circle(size=50, color="#1f77b4", opacity=1).encode(x=f"{value}:Q")
    # One row per label at a fixed step, so every label is drawn (a fixed height thinned them)
    return fit_width(alt.layer(null, ci, point).properties(height=alt.Step(20)))



def agreement_chart(agreement: pd.DataFrame, lang: str) -> alt.Chart:
    """Every row of the agreement table: mean rho, its interval and its null band."""
    return interval_chart(labelled(agreement, lang), lang, x_title=_t(lang, "axis_spearman"))


def sharpness_chart(sharpness: pd.DataFrame, lang: str) -> alt.Chart:
    """Spearman of importance and sharpness per layer and pooled, with intervals and nulls."""
    data = sharpness.assign(label=[
        _t(lang, "label_layer", method=method_label(lang, imp, None), layer=int(layer))
        if not math.isnan(layer) else _t(lang, "label_mean", method=method_label(lang, imp, None))
        for imp, layer in zip(sharpness["importance"], sharpness["layer"])])
    title = f"ρ ({method_label(lang, sharpness['importance'].iloc[0], None)}, " \
            f"{method_label(lang, sharpness['sharpness'].iloc[0], None)})"
    return interval_chart(data, lang, x_title=title)


def faithfulness_chart(faith: pd.DataFrame, lang: str, methods=None) -> alt.Chart:
    """Change of the target against the share of pieces removed, one line per method with its
    interval as bars; random dashed."""
    data = labelled(faith, lang)
    if methods is not None:
        data = data[[(m, None if math.isnan(layer) else int(layer)) in methods
                     for m, layer in zip(data["method"], data["layer"])]]
    data = data.dropna(subset=["change", "ci_low", "ci_high"])
    data = data.assign(dash=data["method"] == "random")[
        ["label", "fraction", "change", "ci_low", "ci_high", "aopc", "dash"]]   # no NaN layer
    base = alt.Chart(data).encode(
        x=alt.X("fraction:Q", title=_t(lang, "axis_fraction"), axis=alt.Axis(format="%")),
        color=alt.Color("label:N", title=_t(lang, "axis_method"),
                        # below the plot, one entry a line: on its right it took a phone's width
                        legend=alt.Legend(orient="bottom", direction="vertical",
                                          labelLimit=300)),
        tooltip=[alt.Tooltip("label:N", title=_t(lang, "col_method")),
                 alt.Tooltip("fraction:Q", title=_t(lang, "axis_fraction"), format=".0%"),
                 alt.Tooltip("change:Q", title=_t(lang, "axis_change"), format=".4f"),
                 *_tips(lang, ("ci_low", "ci_high", "aopc"), ".4f")])
    lines = base.mark_line(point=True).encode(
        y=alt.Y("change:Q", title=_t(lang, "axis_change")),
        strokeDash=alt.StrokeDash("dash:N", legend=None))
    bars = base.mark_rule(opacity=0.6).encode(y="ci_low:Q", y2="ci_high:Q")
    return fit_width(alt.layer(bars, lines).properties(height=280))


def heads_chart(heads: pd.DataFrame, lang: str, value: str = "ablation") -> alt.Chart:
    """Head importance per layer: one cell per (layer, head)."""
    data = heads.dropna(subset=[value])
    chart = alt.Chart(data).mark_rect().encode(
        x=alt.X("head:O", title=_t(lang, "axis_head")),
        y=alt.Y("layer:O", title=_t(lang, "axis_layer")),
        color=alt.Color(f"{value}:Q", title=_t(lang, "axis_importance"),
                        scale=alt.Scale(scheme="viridis")),
        tooltip=[alt.Tooltip("layer:O", title=_t(lang, "axis_layer")),
                 alt.Tooltip("head:O", title=_t(lang, "axis_head")),
                 *[alt.Tooltip(f"{c}:Q", title=method_label(lang, c, None), format=".4f")
                   for c in ("ablation", "mean_ablation", "gradient", "max_weight", "entropy")
                   if c in data]],
    ).properties(height=30 * max(1, data["layer"].nunique()))
    return fit_width(chart)


def pruning_chart(pruning: pd.DataFrame, lang: str) -> alt.Chart:
    """The metric with heads removed in importance order (line, its interval shaded) and the
    random orders' mean (dashed grey) and 95% band (grey)."""
    data = pruning.dropna(subset=["metric", "ci_low", "ci_high", "random_low", "random_high"])
    base = alt.Chart(data).encode(x=alt.X("removed:Q", title=_t(lang, "axis_removed")))
    band = base.mark_area(color=GREY, opacity=0.5).encode(
        y=alt.Y("random_low:Q", title=_t(lang, "axis_metric"), scale=alt.Scale(zero=False)),
        y2="random_high:Q")
    random_mean = base.mark_line(color="#777777", strokeDash=[4, 3]).encode(
        y=alt.Y("random_mean:Q", title=None))
    ci = base.mark_area(color="#1f77b4", opacity=0.2).encode(y="ci_low:Q", y2="ci_high:Q")
    line = base.mark_line(point=True, color="#1f77b4").encode(
        y="metric:Q", tooltip=[alt.Tooltip("removed:Q", title=_t(lang, "axis_removed")),
                               alt.Tooltip("metric:Q", title=_t(lang, "axis_metric"),
                                           format=".3f"),
                               *_tips(lang, ("ci_low", "ci_high", "random_mean", "random_low",
                                             "random_high"), ".3f")])
    return fit_width(alt.layer(band, random_mean, ci, line).properties(height=240))


def sweep_chart(sweep: pd.DataFrame, lang: str) -> alt.Chart:
    """The metric's paired difference from tau = 1 against tau (log scale), with intervals."""
    data = sweep.dropna(subset=["diff", "diff_low", "diff_high"])
    base = alt.Chart(data).encode(
        x=alt.X("tau:Q", title=_t(lang, "axis_tau"), scale=alt.Scale(type="log", base=2)),
        tooltip=[alt.Tooltip("tau:Q", title=_t(lang, "axis_tau"), format=".2f"),
                 alt.Tooltip("metric:Q", title=_t(lang, "axis_metric"), format=".3f"),
                 alt.Tooltip("diff:Q", title=_t(lang, "axis_diff"), format=".3f"),
                 *_tips(lang, ("diff_low", "diff_high"), ".3f"),
                 alt.Tooltip("max_weight:Q", title=_t(lang, "axis_max_weight"), format=".3f")])
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color=GREY).encode(
        y=alt.Y("y:Q", title=None))
    bars = base.mark_rule(color="black").encode(
        y=alt.Y("diff_low:Q", title=_t(lang, "axis_diff")), y2="diff_high:Q")
    points = base.mark_line(point=True).encode(y="diff:Q")
    return fit_width(alt.layer(zero, bars, points).properties(height=220))
