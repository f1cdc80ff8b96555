"""Charts of the "Is sharper better?" page: DataFrame in (attention/experiment/training.py's tables),
altair chart out, no torch. The sentence under each chart is written from the same tables by
attention/conclusions/scores.py. Text comes from attention/locales/<lang>/sharper.toml through
`translate` (no streamlit here).
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from attention.i18n import translate
from attention.experiment.task import ARGMAX, CEILING, ONE_TOKEN, m_label, multiplier_label
from attention.charts.size import Panels, fit_width, panel_title, with_properties
from attention.charts.vega import NO_ARIA

SCALED_COLORS = {True: "#1f77b4", False: "#d62728"}
RELEVANT_COLORS = {True: "#2ca02c", False: "#9e9e9e"}
POINT_COLOR = "#1f77b4"
ACCURACY_DOMAIN = (0.5, 0.9)    # the sharpening curves' accuracy axis
LABEL_LINE_PX = 14              # the height of a 12 px "m = ..." label's line


def _t(lang: str, key: str, **values) -> str:
    return translate(lang, f"sharper.{key}", **values)


def _ceilings(lang: str) -> pd.DataFrame:
    return pd.DataFrame({"accuracy": [CEILING, ONE_TOKEN],
                         "reference": [_t(lang, "ref_ceiling", value=CEILING),
                                       _t(lang, "ref_one_token", value=ONE_TOKEN)]})


def _reference_rules(lang: str) -> alt.Chart:
    """Dashed horizontal lines at Phi(1) (averaging the 4 relevant tokens) and Phi(0.5),
    named in a legend so no label sits on the data."""
    data = _ceilings(lang)
    return alt.Chart(data).mark_rule(color="#555555").encode(
        y=alt.Y("accuracy:Q"),
        strokeDash=alt.StrokeDash("reference:N", title=None,
                                  # below the plot, one entry a line: in a row on top the
                                  # two long labels ran past a phone's screen
                                  legend=alt.Legend(orient="bottom", direction="vertical",
                                                    labelLimit=400),
                                  scale=alt.Scale(domain=data["reference"].tolist(),
                                                  range=[[6, 3], [2, 3]])),
        tooltip=[alt.Tooltip("reference:N", title=" "),
                 alt.Tooltip("accuracy:Q", title=_t(lang, "axis_accuracy"), format=".3f")])


def _sweep_points(sweep: pd.DataFrame, lang: str) -> pd.DataFrame:
    data = sweep.copy()
    data["order"] = np.arange(len(data))
    data["label"] = [m_label(m, lang) for m in data["multiplier"]]
    return data


def _labelled_curve(data: pd.DataFrame, x: alt.X, lang: str, title: str,
                    width: int | None, height: int, left_from: float) -> alt.LayerChart:
    """accuracy against one sharpness measure: a line in m order, points, "m = ..." labels.

    A point whose right-hand neighbour (along x) is higher has its label below the line, so
    labels on a rising stretch do not run into the next point's. A point at x >= left_from
    has its label on its left: on a phone's narrow plot "argmax" on the right of a point at
    the axis's end ran past the chart's edge. A left-hand label facing its neighbour's
    right-hand label above the line, the two points less than a line of text apart, goes
    below (against effective tokens "m = 1" and "m = 0.5" were drawn over each other)."""
    field = x.shorthand.split(":")[0]
    by_x = data.sort_values(field)
    accuracy = by_x["accuracy"].to_numpy()
    below = accuracy < np.r_[accuracy[1:], -np.inf]
    left = (by_x[field] >= left_from).to_numpy()
    px = height / (ACCURACY_DOMAIN[1] - ACCURACY_DOMAIN[0])      # pixels per unit of accuracy
    for i in range(1, len(by_x)):
        if (left[i] and not left[i - 1] and not below[i - 1] and not below[i]
                and abs(accuracy[i] - accuracy[i - 1]) * px < LABEL_LINE_PX):
            below[i] = True
    data = data.assign(below=pd.Series(below, index=by_x.index),
                       left=pd.Series(left, index=by_x.index))
    tooltip = [alt.Tooltip("label:N", title=_t(lang, "axis_multiplier")),
               alt.Tooltip("accuracy:Q", title=_t(lang, "axis_accuracy"), format=".3f"),
               alt.Tooltip("max_weight:Q", title=_t(lang, "axis_max_weight"), format=".3f"),
               alt.Tooltip("effective_tokens:Q", title=_t(lang, "axis_effective"), format=".2f"),
               alt.Tooltip("relevant_mass:Q", title=_t(lang, "axis_relevant_mass"), format=".1%")]
    y = alt.Y("accuracy:Q", title=_t(lang, "axis_accuracy"),
              scale=alt.Scale(domain=list(ACCURACY_DOMAIN)))
    base = alt.Chart(data).encode(x=x, y=y, order=alt.Order("order:Q"), tooltip=tooltip)
    text = base.mark_text(align="left", dx=7, fontSize=12).encode(text=alt.Text("label:N"))
    labels = [text.transform_filter(f"{'' if below else '!'}datum.below && "
                                    f"{'' if left else '!'}datum.left").mark_text(
        align="right" if left else "left", dx=-6 if left else 6, dy=12 if below else -9,
        fontSize=12) for below in (True, False) for left in (False, True)]
    curve = alt.layer(
        base.mark_line(color=POINT_COLOR, opacity=0.5),
        base.mark_circle(size=90, color=POINT_COLOR, opacity=1),
        *labels,
        _reference_rules(lang),
    )
    if width is None:                  # as wide as its column
        return fit_width(with_properties(curve, title=panel_title(title), height=height))
    return with_properties(curve, title=title, width=width, height=height)


def _sharpening_views(sweep: pd.DataFrame, lang: str, width: int | None,
                      height: int) -> tuple[alt.LayerChart, alt.LayerChart]:
    data = _sweep_points(sweep, lang)
    by_max = _labelled_curve(
        data, alt.X("max_weight:Q", title=_t(lang, "axis_max_weight"),
                    scale=alt.Scale(domain=[0, 1.12], nice=False),
                    axis=alt.Axis(values=[0, 0.2, 0.4, 0.6, 0.8, 1.0])),
        lang, _t(lang, "title_vs_max"), width, height, left_from=0.95)
    by_eff = _labelled_curve(
        data, alt.X("effective_tokens:Q", title=_t(lang, "axis_effective"),
                    scale=alt.Scale(type="log", base=2, domain=[0.8, 20], nice=False),
                    axis=alt.Axis(values=[1, 2, 4, 8, 16])),
        lang, _t(lang, "title_vs_effective"), width, height, left_from=12)
    return by_max, by_eff


def sharpening_chart(sweep: pd.DataFrame, lang: str, width: int = 360,
                     height: int = 260) -> alt.HConcatChart:
    """The inverted U: accuracy against max weight and against effective tokens, one point
    per test-time multiplier m."""
    return alt.hconcat(*_sharpening_views(sweep, lang, width, height))


def sharpening_panels(sweep: pd.DataFrame, lang: str, height: int = 260) -> Panels:
    """sharpening_chart as two panels as wide as their columns (a phone stacks them); the
    whole figure (the downloads') is built only when a Download menu asks for it."""
    return Panels(_sharpening_views(sweep, lang, None, height), 2,
                  lambda: sharpening_chart(sweep, lang))


def mass_chart(sweep: pd.DataFrame, lang: str, height: int = 260) -> alt.LayerChart:
    """Share of attention on the 4 relevant tokens against accuracy, labelled by m; as wide
    as the page gives it (draw it with width=FIT_PX)."""
    data = _sweep_points(sweep, lang)
    return _labelled_curve(
        data, alt.X("relevant_mass:Q", title=_t(lang, "axis_relevant_mass"),
                    scale=alt.Scale(domain=[0, 1.12], nice=False),
                    axis=alt.Axis(format="%", values=[0, 0.2, 0.4, 0.6, 0.8, 1.0])),
        lang, _t(lang, "title_mass"), None, height, left_from=0.95)


def _variant(table: pd.DataFrame, lang: str) -> pd.DataFrame:
    data = table.copy()
    data["variant"] = [_t(lang, "variant_scaled" if s else "variant_unscaled")
                       for s in data["scaled"]]
    return data


def _scaling_views(table: pd.DataFrame, lang: str, width: int | None,
                   height: int) -> tuple[alt.LayerChart, alt.LayerChart]:
    data = _variant(table, lang)
    names = [_t(lang, "variant_scaled"), _t(lang, "variant_unscaled")]
    color = alt.Color("variant:N", title=None, legend=alt.Legend(orient="top"),
                      scale=alt.Scale(domain=names, range=[SCALED_COLORS[True],
                                                           SCALED_COLORS[False]]))
    x = alt.X("d_k:O", title=_t(lang, "axis_dk"), axis=alt.Axis(labelAngle=0))
    offset = alt.XOffset("variant:N", scale=alt.Scale(domain=names))
    tooltip = [alt.Tooltip("d_k:O", title=_t(lang, "axis_dk")),
               alt.Tooltip("variant:N", title=" "),
               alt.Tooltip("seed:Q", title=_t(lang, "tip_seed")),
               alt.Tooltip("accuracy:Q", title=_t(lang, "axis_accuracy"), format=".3f"),
               alt.Tooltip("max_weight:Q", title=_t(lang, "axis_max_weight"), format=".3f"),
               alt.Tooltip("effective_tokens:Q", title=_t(lang, "axis_effective"), format=".2f")]

    def panel(field: str, title: str, domain: list[float], refs: bool) -> alt.LayerChart:
        y = alt.Y(f"{field}:Q", title=_t(lang, f"axis_{field}"), scale=alt.Scale(domain=domain))
        base = alt.Chart(data).encode(x=x, xOffset=offset, color=color)
        layers = [
            base.mark_errorbar(extent="stdev", ticks=True).encode(y=y),
            base.mark_tick(thickness=3, size=18).encode(y=alt.Y(f"mean({field}):Q")),
            base.mark_circle(size=55, opacity=0.75).encode(y=y, tooltip=tooltip),
        ]
        if refs:
            layers.append(_reference_rules(lang))
        if width is None:              # as wide as its column
            return fit_width(with_properties(alt.layer(*layers), title=panel_title(title),
                                             height=height))
        return with_properties(alt.layer(*layers), title=title, width=width, height=height)

    return (panel("accuracy", _t(lang, "title_scaling_accuracy"), [0.5, 0.9], True),
            panel("max_weight", _t(lang, "title_scaling_max"), [0, 1.05], False))


def scaling_chart(table: pd.DataFrame, lang: str, width: int = 300,
                  height: int = 260) -> alt.HConcatChart:
    """Scaled vs unscaled training by d_k: every seed as a point, the mean as a tick with
    +-1 std error bars; accuracy on the left, max weight of the trained head on the right."""
    return alt.hconcat(*_scaling_views(table, lang, width, height))


def scaling_panels(table: pd.DataFrame, lang: str, height: int = 260) -> Panels:
    """scaling_chart as two panels as wide as their columns (a phone stacks them)."""
    return Panels(_scaling_views(table, lang, None, height), 2,
                  lambda: scaling_chart(table, lang))


def _relevance(frame: pd.DataFrame, lang: str) -> tuple[pd.DataFrame, alt.Color]:
    """The frame with a `kind` column (relevant token / other token) and its colour."""
    data = frame.copy()
    data["kind"] = [_t(lang, "token_relevant" if r else "token_noise") for r in data["relevant"]]
    kinds = [_t(lang, "token_relevant"), _t(lang, "token_noise")]
    return data, alt.Color("kind:N", title=None, legend=alt.Legend(orient="top"),
                           scale=alt.Scale(domain=kinds, range=[RELEVANT_COLORS[True],
                                                                RELEVANT_COLORS[False]]))


def _sample_views(sample: pd.DataFrame, lang: str, width: int | None,
                  height: int) -> tuple[alt.Chart, ...]:
    data, color = _relevance(sample, lang)
    panels = []
    for multiplier in (multiplier_label(1.0), ARGMAX):
        part = data[data["multiplier"] == multiplier]
        bars = alt.Chart(part).mark_bar().encode(
            x=alt.X("position:O", title=_t(lang, "axis_position"), axis=alt.Axis(labelAngle=0)),
            y=alt.Y("weight:Q", title=_t(lang, "axis_weight"), scale=alt.Scale(domain=[0, 1])),
            color=color,
            tooltip=[alt.Tooltip("position:O", title=_t(lang, "axis_position")),
                     alt.Tooltip("kind:N", title=" "),
                     alt.Tooltip("weight:Q", title=_t(lang, "axis_weight"), format=".3f")])
        title = m_label(multiplier, lang)
        panels.append(fit_width(with_properties(bars, title=panel_title(title), height=height))
                      if width is None else
                      with_properties(bars, title=title, width=width, height=height))
    return tuple(panels)


def sample_chart(sample: pd.DataFrame, lang: str, width: int = 330,
                 height: int = 200) -> alt.HConcatChart:
    """One eval sample's attention over its 16 tokens at m = 1 and at argmax; relevant
    tokens in green. Bars are keyed by position."""
    return alt.hconcat(*_sample_views(sample, lang, width, height))


def sample_panels(sample: pd.DataFrame, lang: str, height: int = 200) -> Panels:
    """sample_chart as two panels as wide as their columns (a phone stacks them)."""
    return Panels(_sample_views(sample, lang, None, height), 2,
                  lambda: sample_chart(sample, lang))


def leave_one_out_chart(leave_one_out: pd.DataFrame, lang: str, height: int = 320) -> alt.Chart:
    """Each token's attention weight against its leave-one-out effect on the output; as wide
    as the page gives it (draw it with width=FIT_PX)."""
    data, color = _relevance(leave_one_out, lang)
    chart = alt.Chart(data).mark_circle(size=28, opacity=0.6).encode(
        x=alt.X("weight:Q", title=_t(lang, "axis_weight")),
        y=alt.Y("effect:Q", title=_t(lang, "axis_effect")),
        color=color,
        tooltip=[alt.Tooltip("sample:Q", title=_t(lang, "tip_sample")),
                 alt.Tooltip("position:Q", title=_t(lang, "axis_position")),
                 alt.Tooltip("kind:N", title=" "),
                 alt.Tooltip("weight:Q", title=_t(lang, "axis_weight"), format=".3f"),
                 alt.Tooltip("effect:Q", title=_t(lang, "axis_effect"), format=".3f")],
    )
    # 1,024 points: no per-point ARIA description (Vega evaluates one per mark; charts/vega.py)
    return fit_width(with_properties(chart, height=height, config=NO_ARIA))
