"""Charts of the real-models section of "Is sharper better?": the sweeps' summaries
(attention.sweeps.stats) in, altair out, no torch. Every point carries its 95% interval."""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from attention.conclusions.sweeps import setting_name, short_name
from attention.charts.size import fit_width, with_properties
from attention.charts.vega import NO_ARIA
from attention.i18n import translate

TRAINED = "#d62728"
OTHER = "#1f77b4"
TAU_COLORS = {"0.5": "#ff7f0e", "2": "#1f77b4"}
SCALE_COLORS = {"none": "#8c564b", "inv_d": "#9467bd", "ssmax": "#2ca02c"}   # per layer


def _t(lang: str, key: str, **values) -> str:
    return translate(lang, f"realsharp.{key}", **values)


def _tip(shorthand: str, lang: str, fmt: str | None = None) -> alt.Tooltip:
    """A tooltip titled in words (realsharp.col_<field>), never its field's id."""
    field = shorthand.split(":")[0]
    extra = {"format": fmt} if fmt else {}
    return alt.Tooltip(shorthand, title=_t(lang, f"col_{field}"), **extra)


def _named(table: pd.DataFrame, lang: str) -> pd.DataFrame:
    data = table.copy()
    data["setting"] = [setting_name(r, lang) for _, r in data.iterrows()]
    data["short"] = [short_name(r, lang) for _, r in data.iterrows()]
    data["kind"] = [_t(lang, "legend_trained") if f == "base" else _t(lang, "legend_other")
                    for f in data["family"]]
    return data


def _colour(lang: str, below: bool = False) -> alt.Color:
    """Trained in red, every other setting in blue; below: the legend under the plot, one
    entry a line (on top of a phone's narrow plot it ran past the chart's edge)."""
    legend = (alt.Legend(orient="bottom", direction="vertical") if below
              else alt.Legend(orient="top"))
    return alt.Color("kind:N", title=None, legend=legend,
                     scale=alt.Scale(domain=[_t(lang, "legend_trained"), _t(lang, "legend_other")],
                                     range=[TRAINED, OTHER]))


# The quality on the y axis per kind of model: (value, low, high, axis title key, log, count)
PERPLEXITY = ("ppl", "ppl_lo", "ppl_hi", "axis_ppl", True, "texts")
ACCURACY = ("accuracy", "acc_lo", "acc_hi", "axis_accuracy", False, "pairs")


def quality_chart(g: pd.DataFrame, lang: str, measure: str = "max_weight",
                  quality: tuple = PERPLEXITY) -> alt.LayerChart:
    """Quality (perplexity of a causal LM, retrieval accuracy of a sentence model) against
    sharpness, one point per global setting, both intervals."""
    data = _named(g, lang)
    value, qlo, qhi, title, log, count = quality
    lo, hi = ("mw_lo", "mw_hi") if measure == "max_weight" else ("ent_lo", "ent_hi")
    x_title = _t(lang, "axis_max_weight" if measure == "max_weight" else "axis_entropy")
    xscale = alt.Scale(zero=False)
    yscale = alt.Scale(type="log") if log else alt.Scale(zero=False)
    x = alt.X(f"{measure}:Q", title=x_title, scale=xscale)
    y = alt.Y(f"{value}:Q", title=_t(lang, title), scale=yscale)
    tips = [alt.Tooltip("setting:N", title=_t(lang, "axis_setting")),
            _tip(f"{value}:Q", lang, ".3f"), _tip(f"{qlo}:Q", lang, ".3f"),
            _tip(f"{qhi}:Q", lang, ".3f"), _tip(f"{measure}:Q", lang, ".3f"),
            _tip(f"{count}:Q", lang)]
    base = alt.Chart(data)
    points = base.mark_point(filled=True, size=70).encode(x=x, y=y, color=_colour(lang),
                                                          tooltip=tips)
    ybars = base.mark_rule().encode(x=x, y=alt.Y(f"{qlo}:Q", scale=yscale), y2=alt.Y2(f"{qhi}:Q"),
                                    color=_colour(lang))
    xbars = base.mark_rule().encode(x=alt.X(f"{lo}:Q", scale=xscale), x2=alt.X2(f"{hi}:Q"), y=y,
                                    color=_colour(lang))
    trained = float(data.loc[data["family"] == "base", measure].iloc[0])
    flatter = (data[measure] < trained) if measure == "max_weight" else (data[measure] > trained)
    # labels below flatter temperatures and the trained point, above the rest,
    # so the settings crowded around the trained point keep their labels apart
    place = np.where(data["family"] == "base", "base",
                     np.where(flatter & (data["family"] == "tau"), "below", "above"))
    # the points in the last tenth of the x range have their label on their left: on a
    # phone's narrow plot "no scale" on the right of the sharpest point ran past the chart
    span = data[measure].max() - data[measure].min()
    left = (data[measure] > data[measure].max() - 0.1 * span).to_numpy()
    labels = [alt.Chart(data[(place == where) & (left == on_left)]).mark_text(
        align="right" if on_left else "left", dx=-dx if on_left else dx, dy=dy,
        fontSize=11).encode(x=x, y=y, text=alt.Text("short:N"))
        for where, dx, dy in (("below", 7, 12), ("above", 7, -8), ("base", 7, 14))
        for on_left in (False, True)]
    return fit_width(with_properties(alt.layer(ybars, xbars, points, *labels), height=340))


def interval_bars(data: pd.DataFrame, lang: str, value: str, lo: str, hi: str, title: str,
                  log: bool = False, count: str = "texts") -> alt.LayerChart:
    """One row per setting (named), a point with its interval; the trained model in red."""
    data = _named(data, lang)
    y = alt.Y("setting:N", title=None, sort=None, axis=alt.Axis(labelLimit=320))
    scale = alt.Scale(type="log") if log else alt.Scale(zero=False)
    # the title ends where the plot ends: centred under a phone's narrow plot (the names
    # take most of the width) it ran past the chart's right edge
    axis = alt.Axis(titleAnchor="end")
    x = alt.X(f"{value}:Q", title=title, scale=scale, axis=axis)
    base = alt.Chart(data)
    tips = [alt.Tooltip("setting:N", title=_t(lang, "axis_setting")),
            _tip(f"{value}:Q", lang, ".3f"), _tip(f"{lo}:Q", lang, ".3f"),
            _tip(f"{hi}:Q", lang, ".3f"), _tip(f"{count}:Q", lang)]
    rules = base.mark_rule().encode(y=y, x=alt.X(f"{lo}:Q", title=title, scale=scale, axis=axis),
                                    x2=alt.X2(f"{hi}:Q"), color=_colour(lang, below=True))
    points = base.mark_point(filled=True, size=60).encode(
        y=y, x=x, color=_colour(lang, below=True), tooltip=tips)
    return fit_width(with_properties(alt.layer(rules, points), height=alt.Step(26)))


def layer_chart(layers: pd.DataFrame, family: str, lang: str,
                change: tuple = ("d_nll", "d_lo", "d_hi", "axis_dnll", "texts")) -> alt.LayerChart:
    """The change against the trained model (ΔNLL, or Δ accuracy: `change` = value, low,
    high, axis title key, count) per layer for one family of per-layer settings (colour:
    τ, or the scale variant; one colour for the sinks), with intervals."""
    value, lo, hi, title, count = change
    data = layers[layers["family"] == family].copy()
    data["setting"] = [setting_name(r, lang) for _, r in data.iterrows()]
    data["label"] = data["variant"] if family == "tau" else \
        [short_name(r, lang) for _, r in data.iterrows()]           # under its legend's title
    palette = {"tau": dict(TAU_COLORS),
               "scale": {_t(lang, f"short_scale_{v}"): c for v, c in SCALE_COLORS.items()}
               }.get(family)
    if palette:
        shown = set(data["label"])
        palette = {k: c for k, c in palette.items() if k in shown}
        colour = alt.Color("label:N", title=_t(lang, f"axis_{family}"),
                           legend=alt.Legend(orient="top"),
                           scale=alt.Scale(domain=list(palette), range=list(palette.values())))
        offset = alt.XOffset("label:N")
    else:
        colour, offset = alt.Color("label:N", legend=None, scale=alt.Scale(range=[OTHER])), \
            alt.XOffset()
    x = alt.X("layer:O", title=_t(lang, "axis_layer"))
    y = alt.Y(f"{value}:Q", title=_t(lang, title))
    base = alt.Chart(data)
    tips = [alt.Tooltip("setting:N", title=_t(lang, "axis_setting")),
            _tip(f"{value}:Q", lang, "+.4f"), _tip(f"{lo}:Q", lang, "+.4f"),
            _tip(f"{hi}:Q", lang, "+.4f"), _tip(f"{count}:Q", lang)]
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color="#555", strokeDash=[4, 3]) \
        .encode(y=alt.Y("y:Q"))
    rules = base.mark_rule().encode(x=x, xOffset=offset, y=alt.Y(f"{lo}:Q"), y2=alt.Y2(f"{hi}:Q"),
                                    color=colour)
    points = base.mark_point(filled=True, size=40).encode(x=x, xOffset=offset, y=y, color=colour,
                                                          tooltip=tips)
    return fit_width(with_properties(alt.layer(zero, rules, points), height=260))


def tau_chart(g: pd.DataFrame, lang: str, quality: tuple = PERPLEXITY) -> alt.LayerChart:
    """Quality (PERPLEXITY or ACCURACY) against τ in every layer (τ = 1 is the trained
    model), intervals."""
    value, lo, hi, title, log, count = quality
    data = g[g["family"].isin(["tau", "base"])].copy()
    data["tau"] = [1.0 if f == "base" else float(v) for f, v in zip(data["family"], data["variant"])]
    data = data.sort_values("tau")
    yscale = alt.Scale(type="log") if log else alt.Scale(zero=False)
    x = alt.X("tau:Q", title=_t(lang, "axis_tau"), scale=alt.Scale(type="log", base=2))
    y = alt.Y(f"{value}:Q", title=_t(lang, title), scale=yscale)
    base = alt.Chart(data)
    tips = [_tip("tau:Q", lang), _tip(f"{value}:Q", lang, ".3f"),
            _tip(f"{lo}:Q", lang, ".3f"), _tip(f"{hi}:Q", lang, ".3f"),
            _tip("max_weight:Q", lang, ".3f"), _tip(f"{count}:Q", lang)]
    rules = base.mark_rule(color=OTHER).encode(
        x=x, y=alt.Y(f"{lo}:Q", title=_t(lang, title), scale=yscale), y2=alt.Y2(f"{hi}:Q"))
    points = base.mark_point(filled=True, color=OTHER, size=50).encode(x=x, y=y, tooltip=tips)
    return fit_width(with_properties(alt.layer(base.mark_line(color=OTHER), rules, points)
                                     .encode(x=x, y=y), height=260))


def heads_chart(per_head: pd.DataFrame, lang: str, measure: str = "max_weight") -> alt.LayerChart:
    """Each head's zero-ablation ΔNLL (interval) against its own sharpness, colour: layer."""
    x = alt.X(f"{measure}:Q", title=_t(lang, "axis_max_weight" if measure == "max_weight"
                                         else "axis_entropy"), scale=alt.Scale(zero=False))
    y = alt.Y("zero:Q", title=_t(lang, "axis_dnll"))
    colour = alt.Color("layer:O", title=_t(lang, "axis_layer"), scale=alt.Scale(scheme="viridis"),
                       # below the plot: on its right it took a phone's width
                       legend=alt.Legend(orient="bottom", columns=6, symbolLimit=40))
    base = alt.Chart(per_head)
    tips = [_tip("layer:O", lang), _tip("head:Q", lang), _tip("zero:Q", lang, "+.4f"),
            _tip("zero_lo:Q", lang, "+.4f"), _tip("zero_hi:Q", lang, "+.4f"),
            _tip("mean:Q", lang, "+.4f"), _tip(f"{measure}:Q", lang, ".3f"),
            _tip("texts:Q", lang)]
    rules = base.mark_rule(opacity=0.5).encode(x=x, y=alt.Y("zero_lo:Q"), y2=alt.Y2("zero_hi:Q"),
                                               color=colour)
    points = base.mark_point(filled=True, size=35).encode(x=x, y=y, color=colour, tooltip=tips)
    # a point and a rule per head (540 marks for SmolLM2): no per-mark ARIA description
    return fit_width(with_properties(alt.layer(rules, points), height=320, config=NO_ARIA))


def agreement_chart(agree: pd.DataFrame, lang: str) -> alt.LayerChart:
    """Spearman ρ (zero ablation against max weight) per layer and pooled, with its interval
    and the grey null band."""
    data = agree[(agree["importance"] == "zero") & (agree["sharpness"] == "max_weight")].copy()
    data["scope"] = [_t(lang, "pooled") if pd.isna(v) else str(int(v)) for v in data["layer"]]
    data = data.drop(columns="layer")          # the pooled row's layer is NaN: drawn as its scope
    order = [s for s in data["scope"] if s != _t(lang, "pooled")] + [_t(lang, "pooled")]
    x = alt.X("scope:N", title=_t(lang, "axis_scope"), sort=order)
    base = alt.Chart(data)
    tips = [alt.Tooltip("scope:N", title=_t(lang, "axis_scope")),
            _tip("spearman:Q", lang, "+.2f"), _tip("ci_low:Q", lang, "+.2f"),
            _tip("ci_high:Q", lang, "+.2f"), _tip("null_low:Q", lang, "+.2f"),
            _tip("null_high:Q", lang, "+.2f"), _tip("heads:Q", lang)]
    null = base.mark_bar(color="#cccccc", width=10).encode(x=x, y=alt.Y("null_low:Q"),
                                                          y2=alt.Y2("null_high:Q"))
    rules = base.mark_rule(color=OTHER).encode(x=x, y=alt.Y("ci_low:Q"), y2=alt.Y2("ci_high:Q"))
    points = base.mark_point(filled=True, color=OTHER).encode(
        x=x, y=alt.Y("spearman:Q", title=_t(lang, "axis_rho")), tooltip=tips)
    return fit_width(with_properties(alt.layer(null, rules, points), height=200))
