"""Charts of the "Does the model use it?" page, built from the frames of attention.importance.
Labels come from attention/locales/<lang>/importance.toml; rows with NaN are left out (flow
past its cap), so no chart ever draws NaN."""
from __future__ import annotations

import altair as alt
import pandas as pd

from attention.i18n import translate
from attention.charts.model import natural_size


def _t(lang: str, key: str, **values) -> str:
    return translate(lang, f"importance.{key}", **values)


def agreement_chart(agreement: pd.DataFrame, lang: str) -> alt.Chart:
    """Spearman per layer: one line per attention-based score, dashed for gradient x input."""
    data = agreement.dropna(subset=["spearman"]).assign(
        score_label=lambda f: [_t(lang, f"score_{s}") for s in f["score"]],
        target_label=lambda f: [_t(lang, f"target_{s}") for s in f["target"]])
    base = alt.Chart(data).encode(
        x=alt.X("layer:O", title=_t(lang, "axis_layer")),
        y=alt.Y("spearman:Q", title=_t(lang, "axis_spearman"), scale=alt.Scale(domain=[-1, 1])),
        # labels in full (the longest, "raw attention (readout query)", was cut at 160 px)
        color=alt.Color("score_label:N", title=_t(lang, "axis_score"),
                        legend=alt.Legend(labelLimit=320)),
        tooltip=["layer:O", "score_label:N", "target_label:N", alt.Tooltip("spearman:Q", format=".2f")])
    # Lines and points as two layers: with mark_line(point=True) the dash legend draws
    # circles, which cannot show a dash, and its two entries looked empty.
    lines = base.mark_line().encode(
        strokeDash=alt.StrokeDash("target_label:N", title=_t(lang, "axis_target"),
                                  legend=alt.Legend(symbolType="stroke", symbolStrokeColor="#555",
                                                    symbolStrokeWidth=2, labelLimit=320)))
    chart = alt.layer(lines, base.mark_circle(size=30)).properties(width=420, height=260)
    return natural_size(chart)


def heads_chart(heads: pd.DataFrame, lang: str) -> alt.Chart:
    """Each head: ablation importance against mean max weight, coloured by layer."""
    data = heads.dropna(subset=["ablation", "max_weight"])
    chart = alt.Chart(data).mark_circle(size=60).encode(
        x=alt.X("max_weight:Q", title=_t(lang, "axis_max_weight")),
        y=alt.Y("ablation:Q", title=_t(lang, "axis_ablation")),
        # viridis: layer 0 stays visible (the default blues drew it near white)
        color=alt.Color("layer:O", title=_t(lang, "axis_layer"), scale=alt.Scale(scheme="viridis")),
        tooltip=["layer:O", "head:O", alt.Tooltip("ablation:Q", format=".4f"),
                 alt.Tooltip("gradient:Q", format=".4f"), alt.Tooltip("max_weight:Q", format=".3f"),
                 alt.Tooltip("entropy:Q", format=".3f")],
    ).properties(width=420, height=260)
    return natural_size(chart)


def pruning_chart(pruning: pd.DataFrame, lang: str) -> alt.Chart:
    chart = alt.Chart(pruning.dropna(subset=["metric"])).mark_line(point=True).encode(
        x=alt.X("removed:Q", title=_t(lang, "axis_removed")),
        y=alt.Y("metric:Q", title=_t(lang, "axis_metric"), scale=alt.Scale(zero=False)),
        tooltip=["removed:Q", alt.Tooltip("metric:Q", format=".3f")],
    ).properties(width=420, height=220)
    return natural_size(chart)


def sweep_chart(sweep: pd.DataFrame, lang: str) -> alt.Chart:
    """Metric against the layer's mean max weight, one point per temperature, in tau order."""
    data = sweep.dropna(subset=["metric", "max_weight"])
    base = alt.Chart(data).encode(
        x=alt.X("max_weight:Q", title=_t(lang, "axis_max_weight")),
        y=alt.Y("metric:Q", title=_t(lang, "axis_metric"), scale=alt.Scale(zero=False)),
        order=alt.Order("tau:Q"),
        tooltip=[alt.Tooltip("tau:Q", format=".2f", title=_t(lang, "axis_tau")),
                 alt.Tooltip("metric:Q", format=".3f"), alt.Tooltip("max_weight:Q", format=".3f")])
    labels = base.mark_text(dy=-10).encode(text=alt.Text("tau:Q", format=".2f"))
    return natural_size((base.mark_line(point=True) + labels).properties(width=420, height=240))
