"""The Heatmap page's Vega figures beside the comparison: every head as small multiples (cell by
cell, or one pooled image per head) and one query's row, scaled vs unscaled. They share the
axes, colours and labels of attention.charts.heatmap."""
from __future__ import annotations

import json
from typing import Sequence

import altair as alt
import pandas as pd

from attention.charts.heatmap import (GRID_PANEL, BlockAxes, CellAxes, cell_tooltip, color_domain,
                                      color_scale, image_scale, label_expr, text, top_level, xy)
from attention.charts.vega import CANVAS, NO_ARIA


def heads_grid_chart(frame: pd.DataFrame, axes: CellAxes, value: str = "weight",
                     lang: str = "en", columns: int = 4,
                     current: int | None = None) -> alt.FacetChart:
    """Small multiples: one panel per head, one colour scale for all heads, cell by cell;
    the `current` head's title says it is the one picked."""
    lo, hi = color_domain(frame, value)
    scale = color_scale(value)
    scale.domain = [lo, hi]          # every head in one chart: no click changes its domain
    rects = alt.Chart().mark_rect().encode(
        **xy(axes, lang, show_y=True),
        color=alt.Color(f"{value}:Q", scale=scale, legend=alt.Legend(title=text(lang, f"legend_{value}"))),
        tooltip=[alt.Tooltip("head:O", title=text(lang, "tip_head")), *cell_tooltip(lang)],
    ).properties(width=GRID_PANEL, height=GRID_PANEL)
    return rects.facet(facet=_head_facet(lang, current), columns=columns, spacing=20,
                       **top_level(frame, axes))


def heads_grid_image_chart(image: dict, axes: BlockAxes, value: str = "weight",
                           lang: str = "en", columns: int = 4,
                           current: int | None = None) -> alt.FacetChart:
    """Small multiples of pooled heads: one image per head (`pooled_images(...)[value]`), one
    colour scale for all heads, on 0..n position axes; the `current` head's title marked."""
    lo, _ = image["domain"]
    heads = len(image["urls"])
    frame = pd.DataFrame({"head": range(heads), "url": image["urls"],
                          "key_start": 0, "key_stop": axes.n, "query_start": 0,
                          "query_stop": axes.n, value: lo})
    picture = alt.Chart().mark_image(aspect=False, smooth=False).encode(
        url=alt.Url("url:N"), **xy(axes, lang, show_y=True))
    # Every row carries the domain's low end: with the explicit domain, the legend is whole.
    legend = alt.Chart().mark_point(opacity=0, size=0).encode(
        color=alt.Color(f"{value}:Q", scale=image_scale(image, value),
                        legend=alt.Legend(title=text(lang, f"legend_{value}"))))
    return alt.layer(picture, legend, width=GRID_PANEL, height=GRID_PANEL).facet(
        facet=_head_facet(lang, current), columns=columns, spacing=20, data=frame, usermeta=CANVAS,
        config=NO_ARIA)


def _head_facet(lang: str, current: int | None = None) -> alt.Facet:
    return alt.Facet("head:O", title=None, header=alt.Header(labelExpr=_head_expr(lang, current)))


def _head_expr(lang: str, current: int | None = None) -> str:
    """A head's panel title: "Head 2", and "Head 2 (picked)" for the `current` head."""
    word = json.dumps(text(lang, "head_word"), ensure_ascii=True)
    if current is None:
        return f"{word} + ' ' + datum.value"
    picked = json.dumps(text(lang, "head_picked"), ensure_ascii=True)
    return f"{word} + ' ' + datum.value + (datum.value == {int(current)} ? {picked} : '')"


def head_title(lang: str, head: int, current: int | None = None) -> str:
    """The title _head_expr gives `head`'s panel, for the canvas's figure of the same grid."""
    picked = text(lang, "head_picked") if head == current else ""
    return f"{text(lang, 'head_word')} {head}{picked}"


def row_frame(cells: pd.DataFrame, lang: str = "en") -> pd.DataFrame:
    """frames.cells rows of one query -> long form: one row per (key, scaled or unscaled)."""
    keep = ["key_pos", "key_token", "raw_score", "scaled_score"]
    parts = []
    for column, kind in (("weight", "scaled"), ("unscaled_weight", "unscaled")):
        part = cells[keep].copy()
        part["value"] = cells[column].to_numpy()
        part["kind"] = text(lang, f"kind_{kind}")
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


BARS_MAX = 64  # up to this many keys the row is drawn as grouped bars, beyond as two lines


def row_chart(frame: pd.DataFrame, tokens: Sequence[str], lang: str = "en") -> alt.Chart:
    """One query's attention over every key, scaled vs unscaled (frame from `row_frame`)."""
    kinds = [text(lang, "kind_scaled"), text(lang, "kind_unscaled")]
    color = alt.Color("kind:N", title=None, scale=alt.Scale(domain=kinds, range=["#2b6cb0", "#d1495b"]),
                      legend=alt.Legend(orient="top"))
    y = alt.Y("value:Q", title=text(lang, "axis_weight"), scale=alt.Scale(domain=[0, 1]))
    tooltip = [alt.Tooltip("key_token:N", title=text(lang, "tip_key_token")),
               alt.Tooltip("key_pos:Q", title=text(lang, "tip_key_pos")),
               alt.Tooltip("kind:N", title=text(lang, "tip_kind")),
               alt.Tooltip("value:Q", title=text(lang, "tip_value"), format=".4f"),
               alt.Tooltip("raw_score:Q", title=text(lang, "tip_raw_score"), format=".3f")]
    n = len(tokens)
    if n <= BARS_MAX:
        x = alt.X("key_pos:O", scale=alt.Scale(domain=list(range(n))),
                  axis=alt.Axis(title=text(lang, "axis_key"), labelExpr=label_expr(tokens, 0),
                                labelAngle=-60, labelOverlap="greedy"))
        chart = alt.Chart(frame).mark_bar().encode(x=x, xOffset=alt.XOffset("kind:N", sort=kinds),
                                                   y=y, color=color, tooltip=tooltip)
    else:
        x = alt.X("key_pos:Q", scale=alt.Scale(domain=[0, n - 1], nice=False),
                  axis=alt.Axis(title=text(lang, "axis_key_position"), format="d"))
        chart = alt.Chart(frame).mark_line(interpolate="step-after", strokeWidth=1.2).encode(
            x=x, y=y, color=color, tooltip=tooltip)
    return chart.properties(height=340)
