"""Charts of the Heatmap page: the attention matrix, scaled vs unscaled, and their difference.

Three kinds of grid (a browser's time to draw one rect per cell grows with the cell count and
reaches seconds at a few hundred tokens: docs/decisions.md, "Long inputs"; so only small
grids are drawn rect by rect):

- cells (`CellAxes`): one rect per (query, key) cell of a window, from `frames.cells`. Axes
  are ordinal on POSITION, labelled with the token text through labelExpr, so repeated
  tokens keep their own row and column; tooltips carry tokens, positions, raw and scaled
  scores and both weights; numbers are printed in the cells when the grid is small.
- images (`BlockAxes`): past that, each panel (or head) is one PNG of pooled blocks
  (`pooled_images`), coloured in numpy exactly as Vega would colour rects (charts.colors),
  spanning positions 0..n on quantitative axes, with a Vega legend beside it. This is what
  keeps 2048 tokens as fast to show as 16; the exact numbers are in the zoom window (cells,
  with tooltips) and in the blocks' CSV (analysis.pooled.pooled_cells).

Colour: the scaled and unscaled panels share one sequential scale (same explicit domain and
scheme), the difference panel has a diverging scale centred on 0. No streamlit here; labels
come from attention/locales/<lang>/heatmap.toml through `translate`.

On the page, the scaled | unscaled | difference comparison and the overview are drawn by the
canvas component (attention/charts/canvas.py builds them from the same pieces: domains,
pooled images, number labels); `comparison_chart` and `overview_chart` are their PNG and SVG
downloads. The all-heads grid and the one-query row are drawn by Vega from here.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from attention.i18n import translate
from attention.charts import colors
from attention.charts.vega import CANVAS, NO_ARIA, Figure, layout

if TYPE_CHECKING:                 # pooling imports torch; a chart only reads n and size
    from attention.measures.pooling import Blocks

VALUES = ("weight", "unscaled_weight", "difference")   # the three panels, left to right
WEIGHT_SCHEME, DIFF_SCHEME = "blues", "redblue"
PANEL = 250            # px: side of one square panel (three fit a 1400 px window)
GRID_PANEL = 170       # px: side of one head in the all-heads grid
LEGEND_TITLE_PAD = 16  # px between a legend's title and its bar: the first tick label ("0.0"),
                       # centred on the bar's start, must not run into the title ("Weight0.0")
NUMBERS_MAX = 16       # print the weights in the cells when a side has at most this many cells
LABEL_CHARS = 12       # axis labels cut long tokens to this many characters
BOX_COLOR = "#e4572e"  # the zoom window's outline on the overview


def scheme_for(value: str) -> str:
    """A panel's colour scheme: diverging for the difference, sequential for the weights."""
    return DIFF_SCHEME if value == "difference" else WEIGHT_SCHEME


def text(lang: str, key: str, **values) -> str:
    return translate(lang, f"heatmap.{key}", **values)


@dataclass(frozen=True)
class CellAxes:
    """A full-resolution grid: rows are the query positions, columns the key positions."""
    queries: range
    keys: range
    query_tokens: tuple[str, ...]   # token at each position of `queries`, in order
    key_tokens: tuple[str, ...]

    @property
    def side(self) -> int:
        return max(len(self.queries), len(self.keys))


@dataclass(frozen=True)
class BlockAxes:
    """A pooled grid over 0..n positions on both axes, blocks of `size` positions."""
    n: int
    size: int
    how: str   # "max" or "mean"

    @property
    def side(self) -> int:
        return math.ceil(self.n / self.size)


def block_axes(blocks: Blocks, how: str) -> BlockAxes:
    return BlockAxes(n=blocks.n, size=blocks.size, how=how)


def cell_axes(tokens: Sequence[str], queries: range, keys: range) -> CellAxes:
    return CellAxes(queries, keys, tuple(tokens[queries.start:queries.stop]),
                    tuple(tokens[keys.start:keys.stop]))


def clip_label(token: str) -> str:
    """An axis label: the token, cut to LABEL_CHARS with an ellipsis."""
    return token if len(token) <= LABEL_CHARS else token[: LABEL_CHARS - 1] + "…"


def label_expr(labels: Sequence[str], start: int) -> str:
    """Vega expression that maps a position (datum.value) to its token text.

    The labels are a JSON array (ASCII-escaped, so any token is a valid string literal);
    position p reads element p - start."""
    clipped = [clip_label(tok) for tok in labels]
    return f"{json.dumps(clipped, ensure_ascii=True)}[datum.value - {int(start)}]"


def _font(step: float) -> float:
    return max(7.0, min(12.0, step * 0.6))


def _token_axis(axis: CellAxes, which: str, lang: str, show: bool) -> dict:
    rng = axis.queries if which == "query" else axis.keys
    labels = axis.query_tokens if which == "query" else axis.key_tokens
    step = PANEL / max(1, len(rng))
    if not show:
        return {"axis": alt.Axis(labels=False, ticks=False, title=None, domain=False)}
    return {"axis": alt.Axis(title=text(lang, f"axis_{which}"), labelExpr=label_expr(labels, rng.start),
                             labelFontSize=_font(step), labelLimit=90,
                             labelOverlap="greedy" if step < 11 else False,   # room: every label
                             labelAngle=-90 if which == "key" else 0, ticks=False)}


def _position_axis(which: str, lang: str, show: bool) -> alt.Axis:
    if not show:
        return alt.Axis(labels=False, ticks=False, title=None, grid=False)
    return alt.Axis(title=text(lang, f"axis_{which}_position"), format="d", tickCount=8, grid=False,
                    labelFlush=True)   # end labels inside: panels side by side do not collide


def xy(axes: CellAxes | BlockAxes, lang: str, show_y: bool, show_x: bool = True) -> dict:
    """x/y (and x2/y2 for blocks) encodings of one panel."""
    if isinstance(axes, CellAxes):
        return {
            "x": alt.X("key_pos:O", scale=alt.Scale(domain=list(axes.keys)),
                       **_token_axis(axes, "key", lang, show_x)),
            "y": alt.Y("query_pos:O", scale=alt.Scale(domain=list(axes.queries)),
                       **_token_axis(axes, "query", lang, show_y)),
        }
    domain = alt.Scale(domain=[0, axes.n], nice=False, zero=False)
    return {
        "x": alt.X("key_start:Q", scale=domain, axis=_position_axis("key", lang, show_x)),
        "x2": alt.X2("key_stop:Q"),
        "y": alt.Y("query_start:Q", axis=_position_axis("query", lang, show_y),
                   scale=alt.Scale(domain=[0, axes.n], nice=False, zero=False, reverse=True)),
        "y2": alt.Y2("query_stop:Q"),
    }


def cell_tooltip(lang: str) -> list[alt.Tooltip]:
    """A cell's tokens, positions, scores and weights."""
    return [
        alt.Tooltip("query_token:N", title=text(lang, "tip_query_token")),
        alt.Tooltip("query_pos:Q", title=text(lang, "tip_query_pos")),
        alt.Tooltip("key_token:N", title=text(lang, "tip_key_token")),
        alt.Tooltip("key_pos:Q", title=text(lang, "tip_key_pos")),
        alt.Tooltip("raw_score:Q", title=text(lang, "tip_raw_score"), format=".3f"),
        alt.Tooltip("scaled_score:Q", title=text(lang, "tip_scaled_score"), format=".3f"),
        *[alt.Tooltip(f"{v}:Q", title=text(lang, f"tip_{v}"), format=".4f") for v in VALUES],
    ]


def color_domain(columns: pd.DataFrame | Mapping[str, np.ndarray], value: str,
                 shared: bool = True) -> tuple[float, float]:
    """Weights: [0, the larger max of the scaled and unscaled columns], so both panels share
    one scale (shared=False: the column's own max). Differences: symmetric around 0.
    columns: a frame of cells, or {column: array} (NaN, a masked cell, is skipped)."""
    def largest(name: str) -> float:
        values = np.asarray(columns[name], dtype=np.float64).ravel()
        values = np.abs(values) if value == "difference" else values
        values = values[~np.isnan(values)]
        return float(values.max()) if values.size else 0.0

    if value == "difference":
        m = largest("difference")
        m = m if m > 0 else 1e-6
        return (-m, m)
    top = max(largest(name) for name in (["weight", "unscaled_weight"] if shared else [value]))
    return (0.0, top if top > 0 else 1.0)


def color_scale(value: str) -> alt.Scale:
    """A panel's colour scale, with no domain in the spec: Vega takes it from the data, which
    spans exactly `color_domain` through the panel's two `extent_frame` rows (so a new head
    is new data under the same spec, drawn in place). Differences diverge around 0."""
    if value == "difference":
        return alt.Scale(scheme=DIFF_SCHEME, domainMid=0, nice=False, zero=False)
    return alt.Scale(scheme=WEIGHT_SCHEME, nice=False, zero=False)


def extent_frame(domains: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """Two rows, the low and the high end of each value's colour domain."""
    return pd.DataFrame({value: list(domains[value]) for value in VALUES})


EXTENT = alt.NamedData(name="extent")   # a layout's data set of `extent_frame` rows


def _ends(color: alt.Color) -> alt.Chart:
    """Invisible points at the colour domain's two ends (the EXTENT rows): the scale (and its
    legend) spans them."""
    return alt.Chart(EXTENT).mark_point(filled=True, opacity=0, size=0).encode(color=color)


def _numbers(base: alt.Chart, value: str, step: float) -> alt.Chart:
    """The value printed in each cell (the `label_<value>` column of `cell_labels`), white on
    dark cells (its `dark_<value>` column). Channels are given as typed objects: altair
    validates dict-shaped ones (alt.condition) against the JSON schema, a cost paid again for
    every panel."""
    return base.mark_text(fontSize=min(10.0, step * 0.55)).encode(
        text=alt.Text(f"label_{value}:N"),
        color=alt.ColorValue(value="#1f2430", condition={"test": f"datum.dark_{value}",
                                                         "value": "white"}))


def label_decimals(values: np.ndarray) -> int:
    """Decimals a grid's cells print: 2, or as many as give its largest |value| two significant
    digits (at most 4), so a zoom window of a long input, weights near 1/n, is not all ".00"."""
    v = np.abs(np.asarray(values, dtype=np.float64))
    top = float(np.nanmax(v)) if v.size and not np.isnan(v).all() else 0.0
    if not 0 < top < 0.1:
        return 2
    return int(min(4, max(2, 1 - math.floor(math.log10(top)))))


def number_labels(values: np.ndarray, decimals: int | None = None) -> list[str]:
    """Each value with `decimals` (label_decimals of the values if None) and no leading zero
    (".37", "-.05", "1.00", ".0049"; a value that rounds to zero is ".00", never "-.00"): what
    a cell prints."""
    d = label_decimals(values) if decimals is None else decimals
    rounded = np.round(np.asarray(values, dtype=np.float64).ravel(), d) + 0.0   # -0.0 -> 0.0
    return [f"{x:.{d}f}".replace("0.", ".", 1) if abs(x) < 1 else f"{x:.{d}f}" for x in rounded]


def on_dark(values: np.ndarray, value: str, domain: tuple[float, float]) -> np.ndarray:
    """Whether a cell's colour is dark enough for white text: past 55% of the weight scale,
    60% of either half of the difference scale."""
    values = np.asarray(values, dtype=np.float64)
    if value == "difference":
        return np.abs(values) > domain[1] * 0.6
    return values > domain[1] * 0.55


def cell_labels(frame: pd.DataFrame, domains: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """frame plus `label_<value>` columns (`number_labels`), made here rather than by a Vega
    expression per cell, and `dark_<value>` (`on_dark`)."""
    labels = {f"label_{v}": number_labels(frame[v].to_numpy()) for v in VALUES}
    dark = {f"dark_{v}": on_dark(frame[v].to_numpy(), v, domains[v]) for v in VALUES}
    return frame.assign(**labels, **dark)


def panel(axes: CellAxes, value: str, lang: str, *, show_y: bool = True, legend: bool = True,
          shared: bool = True, size: int = PANEL) -> alt.LayerChart:
    """One heatmap panel (the cells come from the caller's concat, the ends of its colour
    domain from EXTENT)."""
    color = _color(value, color_scale(value), lang, shared, legend, size)
    base = alt.Chart().encode(**xy(axes, lang, show_y))
    layers = [base.mark_rect().encode(color=color, tooltip=cell_tooltip(lang))]
    if isinstance(axes, CellAxes) and axes.side <= NUMBERS_MAX:
        layers.append(_numbers(base, value, size / axes.side))
    layers.append(_ends(color))
    return alt.layer(*layers, width=size, height=size, title=text(lang, f"panel_{value}"))


def _color(value: str, scale: alt.Scale, lang: str, shared: bool, legend: bool,
           size: int) -> alt.Color:
    """The colour channel of a panel, with its horizontal legend below (or none)."""
    title = "legend_shared" if shared and value == "unscaled_weight" else f"legend_{value}"
    return alt.Color(f"{value}:Q", scale=scale,
                     legend=alt.Legend(title=text(lang, title), orient="bottom", type="gradient",
                                       direction="horizontal", gradientLength=size * 0.6,
                                       titleOrient="left", titleBaseline="middle",
                                       titlePadding=LEGEND_TITLE_PAD)
                     if legend else None)


def _box_layer() -> alt.Chart:
    """The zoom window (the "box" data set's q0, q1, k0, k1) outlined on an overview."""
    return (alt.Chart(alt.NamedData(name="box"))
            .mark_rect(fill=None, stroke=BOX_COLOR, strokeWidth=2)
            .encode(x="k0:Q", x2="k1:Q", y="q0:Q", y2="q1:Q"))


def comparison_chart(frame: pd.DataFrame, axes: CellAxes, lang: str = "en", *,
                     shared: bool = True) -> Figure:
    """Scaled | unscaled (one shared colour scale) | difference (diverging, centred on 0).

    The PNG and SVG downloads of a comparison (the page draws it with attention/charts/
    canvas.py, in the same colours). frame: frames.cells rows of ONE head; all three panels
    read the same rows, so the chart carries each cell once. shared=False gives the scaled
    and unscaled panels each its own scale (and legend)."""
    domains = {v: color_domain(frame, v, shared) for v in VALUES}
    small = axes.side <= NUMBERS_MAX
    data = {"cells": cell_labels(frame, domains) if small else frame,
            "extent": extent_frame(domains)}
    return Figure(_comparison_layout(axes, lang, shared), data)


@layout
def _comparison_layout(axes: CellAxes, lang: str, shared: bool) -> alt.HConcatChart:
    panels = [
        panel(axes, "weight", lang, legend=not shared, shared=shared),
        panel(axes, "unscaled_weight", lang, show_y=False, shared=shared),
        panel(axes, "difference", lang, show_y=False),
    ]
    independent = alt.Resolve(scale=alt.ScaleResolveMap(color="independent"))
    return alt.hconcat(*panels, data=alt.NamedData(name="cells"), spacing=12,
                       resolve=independent, config=NO_ARIA)


def pooled_images(pooled: dict[str, np.ndarray], shared: bool = True,
                  values: Sequence[str] = VALUES) -> dict[str, dict]:
    """Pooled matrices as PNGs: {value: {"urls": one per head, "domain", "scheme"}}.

    pooled: {"weight", "unscaled_weight", "difference"} -> (h, b, b) pooled matrices
    (analysis.pooled.pooled_matrices), NaN for empty blocks (drawn transparent). Colours: the domains
    of `color_domain` over all heads, mapped as Vega maps them (charts.colors), so a legend
    drawn by Vega next to the image is right."""
    frame = pd.DataFrame({v: np.asarray(pooled[v], dtype=np.float64).ravel() for v in VALUES})
    images = {}
    for value in values:
        domain = color_domain(frame, value, shared)
        scheme = scheme_for(value)
        rgba = colors.colorize(pooled[value], domain, scheme)                # (h, b, b, 4)
        images[value] = {"urls": [colors.png_data_url(head) for head in rgba],
                         "domain": domain, "scheme": scheme}
    return images


def image_scale(image: dict, value: str) -> alt.Scale:
    lo, hi = image["domain"]
    return alt.Scale(scheme=image["scheme"], domain=[lo, hi],
                     **({"domainMid": 0} if value == "difference" else {}))


def overview_chart(images: dict[str, dict], axes: BlockAxes, lang: str = "en", *,
                   box: tuple[int, int, int, int] | None = None,
                   shared: bool = True, head: int = 0) -> Figure:
    """Scaled | unscaled | difference of one head, each panel one image (from `pooled_images`;
    `head`: which of its heads) spanning positions 0..n on both axes, with its colour legend
    and the zoom window (query_start, query_stop, key_start, key_stop) outlined: the PNG and
    SVG downloads of the overview the page draws with attention/charts/canvas.py. One image mark
    per panel instead of one rect per block: at 256 x 256 blocks the browser draws it in a
    fraction of the time 40 x 40 rects took. The images' URLs, the legends' domains and the
    box are data, so another head or box is the same layout. A box dragged on a panel is the
    selection BRUSHES[panel], in positions (pooling.window_from_brush turns it into a zoom
    window)."""
    span = pd.DataFrame({"key_start": [0], "key_stop": [axes.n], "query_start": [0],
                         "query_stop": [axes.n],
                         **{f"url_{v}": [images[v]["urls"][head]] for v in VALUES}})
    data = {"span": span, "extent": extent_frame({v: images[v]["domain"] for v in VALUES})}
    if box is not None:
        q0, q1, k0, k1 = box
        data["box"] = pd.DataFrame({"q0": [q0], "q1": [q1], "k0": [k0], "k1": [k1]})
    return Figure(_overview_layout(axes, lang, shared, box is not None), data)


@layout
def _overview_layout(axes: BlockAxes, lang: str, shared: bool, boxed: bool) -> alt.HConcatChart:
    panels = []
    for i, value in enumerate(VALUES):
        picture = alt.Chart().mark_image(aspect=False, smooth=False) \
            .encode(url=alt.Url(f"url_{value}:N"), **xy(axes, lang, show_y=i == 0))
        # The legend comes from a colour channel: two invisible points at the domain's ends.
        legend = _ends(_color(value, color_scale(value), lang, shared,
                              value != "weight" or not shared, PANEL))
        layers = [picture, legend] + ([_box_layer()] if boxed else [])
        panels.append(alt.layer(*layers, width=PANEL, height=PANEL, title=text(lang, f"panel_{value}")))
    independent = alt.Resolve(scale=alt.ScaleResolveMap(color="independent"))
    return alt.hconcat(*panels, data=alt.NamedData(name="span"), spacing=12, resolve=independent,
                       usermeta=CANVAS, config=NO_ARIA)


def top_level(frame: pd.DataFrame, axes: CellAxes) -> dict:
    """Top-level chart properties, given at construction (each altair method call deep-copies
    the whole chart, so on a big chart every call costs as much as building it): the data, no
    per-mark ARIA, and for big grids the canvas renderer, which draws thousands of rects
    faster than SVG."""
    props = {"data": frame, "config": NO_ARIA}
    if axes.side > NUMBERS_MAX * 2:
        props["usermeta"] = CANVAS
    return props
