"""Charts of the Model heads page: every head at a glance, the per-head statistics, rollout
and the value-weighted view.

Builders turn small tidy tables into altair charts; the tables come from attention/headstats.py
(the per-head table and the 6 x 12 grid, pooled to at most GRID_CELLS x GRID_CELLS blocks per
head, so it stays a few thousand rects whatever the text length) or from `matrix_frame` and
`norm_frame` here, which only reshape an array they are given. No torch here. Labels come from
attention/locales/<lang>/model.toml through `translate` (no streamlit here).
"""
from __future__ import annotations

import json

import altair as alt
import numpy as np
import pandas as pd

from ..i18n import translate
from .scores import position_label_expr
from .size import natural_size
from .vega import CANVAS, NO_ARIA, Figure, layout

GRID_PICK = "pick"  # name of the grid's click selection (fields layer, head)


def _t(lang: str, key: str, **values) -> str:
    return translate(lang, f"model.{key}", **values)


def _js(value) -> str:
    return json.dumps(value, ensure_ascii=False)


# ---- the 6 x 12 grid -------------------------------------------------------------------

GRID_COLUMNS = {"layer": "int8", "head": "int16", "qb": "int8", "kb": "int8", "weight": "float32"}


def grid_chart(frame: pd.DataFrame, lang: str, *, current: tuple[int, int] | None = None,
               cell_px: int = 5) -> Figure:
    """Every head as a small square, layers down and heads across; click one to pick it.
    `current` (layer, head) gets a red frame (data: another head is the same layout).

    frame: headstats.grid_frame. Only its numbers travel to the browser, in small types
    (positions and the block labels of the tooltip are worked out there from the layout),
    since every layer or head click sends the grid again."""
    b = int(frame["qb"].max()) + 1
    labels = tuple(frame.drop_duplicates("qb").sort_values("qb")["query"])     # one per block
    heads, layers = int(frame["head"].max()) + 1, int(frame["layer"].max()) + 1
    cells = frame[list(GRID_COLUMNS)].astype(GRID_COLUMNS).reset_index(drop=True)
    return Figure(_grid_layout(layers, heads, labels, lang, cell_px),
                  {"cells": cells, "box": _current_box(current, b + 1, b)})


def _current_box(current: tuple[int, int] | None, step: int, blocks: int) -> pd.DataFrame:
    """The frame around head `current` (layer, head) of a grid with `step` units per head."""
    layer, head = current if current is not None else (-1, -1)
    return pd.DataFrame({"x": [head * step - 0.25], "x2": [head * step + blocks + 0.25],
                         "y": [layer * step - 0.25], "y2": [layer * step + blocks + 0.25]})


def _box(scale_x: alt.Scale | None = None, scale_y: alt.Scale | None = None) -> alt.Chart:
    """The red frame of the "box" data set (`_current_box`)."""
    xs = {"scale": scale_x} if scale_x is not None else {}
    ys = {"scale": scale_y} if scale_y is not None else {}
    return alt.Chart(alt.NamedData(name="box")).mark_rect(
        fill=None, stroke="#d62728", strokeWidth=2).encode(
        x=alt.X("x:Q", **xs), x2="x2:Q", y=alt.Y("y:Q", **ys), y2="y2:Q")


def _pick() -> alt.Parameter:
    return alt.selection_point(name=GRID_PICK, fields=["layer", "head"], on="click",
                               clear=False, empty=False)


@layout
def _grid_layout(layers: int, heads: int, labels: tuple[str, ...], lang: str,
                 cell_px: int) -> alt.LayerChart:
    b = len(labels)
    step = b + 1                                                         # one blank block between heads

    def axis(count: int, key: str) -> alt.Axis:
        return alt.Axis(values=[i * step + b / 2 for i in range(count)], grid=False, ticks=False,
                        domain=False, labelExpr=f"{_js(_t(lang, key))} + floor(datum.value / {step})",
                        labelAngle=0)

    names = json.dumps(list(labels), ensure_ascii=True)      # a valid literal for any token
    cells = alt.Chart(alt.NamedData(name="cells")).transform_calculate(
        x=f"datum.head * {step} + datum.kb", y=f"datum.layer * {step} + datum.qb",
        query=f"{names}[datum.qb]", key=f"{names}[datum.kb]",
    ).transform_calculate(x2="datum.x + 1", y2="datum.y + 1").mark_rect().encode(
        x=alt.X("x:Q", title=_t(lang, "grid_heads"), axis=axis(heads, "grid_head"),
                scale=alt.Scale(domain=[0, heads * step - 1], nice=False, zero=False)),
        x2="x2:Q",
        y=alt.Y("y:Q", title=_t(lang, "grid_layers"), axis=axis(layers, "grid_layer"),
                scale=alt.Scale(domain=[0, layers * step - 1], nice=False, zero=False,
                                reverse=True)),
        y2="y2:Q",
        color=alt.Color("weight:Q", title=_t(lang, "weight"),
                        scale=alt.Scale(scheme="blues", domain=[0, 1])),
        tooltip=[alt.Tooltip("layer:Q", title=_t(lang, "layer")),
                 alt.Tooltip("head:Q", title=_t(lang, "head")),
                 alt.Tooltip("query:N", title=_t(lang, "query")),
                 alt.Tooltip("key:N", title=_t(lang, "key")),
                 alt.Tooltip("weight:Q", title=_t(lang, "weight"), format=".3f")],
    ).add_params(_pick())
    # Canvas and no per-mark ARIA, as Streamlit picks for thousands of rects when it can
    # count them (it cannot through the calculate transform).
    return natural_size(alt.layer(cells, _box(), usermeta=CANVAS, config=NO_ARIA).properties(
        width=heads * step * cell_px, height=layers * step * cell_px))


def grid_image_chart(url: str, layers: int, heads: int, blocks: int, lang: str, *,
                     current: tuple[int, int] | None = None, cell_px: int = 2) -> Figure:
    """The same grid for many heads (a BERT-base's 144, a 32 x 32 model's 1,024): one image
    (headstats.grid_image coloured by charts.colors, 'blues' on [0, 1]) under one transparent
    rect per head that carries the tooltip and the click selection GRID_PICK."""
    step = blocks + 1
    width, height = heads * step, layers * step
    span = pd.DataFrame({"x": [0], "x2": [width], "y": [0], "y2": [height], "url": [url]})
    ll, hh = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    cells = pd.DataFrame({"layer": ll.ravel(), "head": hh.ravel()})
    cells = cells.assign(x=cells["head"] * step, x2=cells["head"] * step + blocks,
                         y=cells["layer"] * step, y2=cells["layer"] * step + blocks)
    return Figure(_grid_image_layout(layers, heads, blocks, lang, cell_px),
                  {"span": span, "heads": cells, "box": _current_box(current, step, blocks)})


@layout
def _grid_image_layout(layers: int, heads: int, blocks: int, lang: str,
                       cell_px: int) -> alt.LayerChart:
    step = blocks + 1
    width, height = heads * step, layers * step
    scale_x = alt.Scale(domain=[0, width], nice=False, zero=False)
    scale_y = alt.Scale(domain=[0, height], nice=False, zero=False, reverse=True)

    def axis(count: int, key: str) -> alt.Axis:
        every = max(1, count // 16)                                      # at most ~16 labels
        return alt.Axis(values=[i * step + blocks / 2 for i in range(0, count, every)],
                        grid=False, ticks=False, domain=False, labelAngle=0,
                        labelExpr=f"{_js(_t(lang, key))} + floor(datum.value / {step})")

    picture = alt.Chart(alt.NamedData(name="span")).mark_image(aspect=False, smooth=False).encode(
        url=alt.Url("url:N"),
        x=alt.X("x:Q", title=_t(lang, "grid_heads"), axis=axis(heads, "grid_head"), scale=scale_x),
        x2="x2:Q",
        y=alt.Y("y:Q", title=_t(lang, "grid_layers"), axis=axis(layers, "grid_layer"),
                scale=scale_y),
        y2="y2:Q")
    hits = alt.Chart(alt.NamedData(name="heads")).mark_rect(opacity=0.0).encode(
        x=alt.X("x:Q", scale=scale_x), x2="x2:Q", y=alt.Y("y:Q", scale=scale_y), y2="y2:Q",
        tooltip=[alt.Tooltip("layer:Q", title=_t(lang, "layer")),
                 alt.Tooltip("head:Q", title=_t(lang, "head"))]).add_params(_pick())
    px = max(cell_px, min(8, 900 // max(width, 1)))
    return natural_size(alt.layer(picture, hits, _box(scale_x, scale_y)).properties(
        width=width * px, height=height * px))


# ---- per-head statistics ------------------------------------------------------------------

def head_stat_chart(table: pd.DataFrame, column: str, lang: str) -> Figure:
    """One statistic of the per-head table (headstats.head_table) as a layers x heads
    heatmap; the tooltip shows every statistic of the table."""
    stats = tuple(c for c in table.columns if c not in ("layer", "head"))
    if column not in stats:
        raise ValueError(f"unknown head statistic {column!r}")
    heads = int(table["head"].max()) + 1
    layers = int(table["layer"].max()) + 1
    return Figure(_head_stat_layout(stats, column, layers, heads, lang), {"table": table})


@layout
def _head_stat_layout(stats: tuple[str, ...], column: str, layers: int, heads: int,
                      lang: str) -> alt.Chart:
    scale = (alt.Scale(scheme="viridis") if column == "entropy"      # nats: no fixed top
             else alt.Scale(scheme="viridis", domain=[0, 1]))
    return natural_size(alt.Chart(alt.NamedData(name="table")).mark_rect().encode(
        x=alt.X("head:O", title=_t(lang, "head")),
        y=alt.Y("layer:O", title=_t(lang, "layer")),
        color=alt.Color(f"{column}:Q", title=_t(lang, f"col_{column}"),
                        scale=scale),
        tooltip=[alt.Tooltip("layer:Q", title=_t(lang, "layer")),
                 alt.Tooltip("head:Q", title=_t(lang, "head")),
                 *[alt.Tooltip(f"{c}:Q", title=_t(lang, f"col_{c}"), format=".3f")
                   for c in stats]],
    ).properties(width=heads * 34, height=layers * 30))


# ---- token x token matrices (rollout, value-weighted) -------------------------------------

def matrix_frame(matrix, tokens) -> pd.DataFrame:
    """(n, n) array (numpy or a CPU tensor) -> one row per cell: query_pos, query_token,
    key_pos, key_token, value."""
    values = np.asarray(matrix)                                          # (n, n)
    n = values.shape[0]
    qq, kk = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    frame = pd.DataFrame({"query_pos": qq.ravel(), "key_pos": kk.ravel(),
                          "value": values.ravel()})
    toks = pd.Series(list(tokens), dtype="string")
    frame.insert(1, "query_token", toks.iloc[frame["query_pos"]].to_numpy())
    frame.insert(3, "key_token", toks.iloc[frame["key_pos"]].to_numpy())
    return frame


def matrix_chart(frame: pd.DataFrame, tokens, lang: str, *, value_title: str,
                 scheme: str = "blues", max_size: int = 720) -> Figure:
    """A query x key heatmap whose axes are positions labelled with their tokens (every
    label while each gets 10 px or more, else as many as fit); the colour domain comes from
    the data, so another layer or head of the same text is the same layout."""
    return Figure(_matrix_layout(tuple(tokens), lang, value_title, scheme, max_size),
                  {"cells": frame})


@layout
def _matrix_layout(tokens: tuple[str, ...], lang: str, value_title: str, scheme: str,
                   max_size: int) -> alt.Chart:
    n = len(tokens)
    size = min(max(300, 14 * n), max_size)                # 14 px per token, within bounds
    labels = n <= 128
    every_label = size / n >= 10

    def axis(field: str, title_key: str, orient: str) -> alt.X | alt.Y:
        enc = alt.X if orient == "x" else alt.Y
        return enc(f"{field}:O", title=_t(lang, title_key), sort="ascending",
                   axis=alt.Axis(labelExpr=position_label_expr(tokens), labels=labels,
                                 ticks=labels, labelLimit=100, labelOverlap=not every_label,
                                 **({"labelAngle": -50} if orient == "x" else {})))

    return natural_size(alt.Chart(alt.NamedData(name="cells")).mark_rect().encode(
        x=axis("key_pos", "key", "x"),
        y=axis("query_pos", "query", "y"),
        color=alt.Color("value:Q", title=value_title, scale=alt.Scale(scheme=scheme, zero=True)),
        tooltip=[alt.Tooltip("query_token:N", title=_t(lang, "query")),
                 alt.Tooltip("query_pos:Q", title=_t(lang, "query_pos")),
                 alt.Tooltip("key_token:N", title=_t(lang, "key")),
                 alt.Tooltip("key_pos:Q", title=_t(lang, "key_pos")),
                 alt.Tooltip("value:Q", title=value_title, format=".4f")],
    ).properties(width=size, height=size))


def norm_frame(f_norm, weight_in, tokens) -> pd.DataFrame:
    """Per key position: ||f(x_j)|| and the mean weight the head gives to j ((n,) arrays,
    numpy or CPU tensors)."""
    return pd.DataFrame({"key_pos": range(len(tokens)),
                         "key_token": pd.Series(list(tokens), dtype="string"),
                         "f_norm": np.asarray(f_norm), "mean_weight": np.asarray(weight_in)})


def norm_chart(frame: pd.DataFrame, tokens, lang: str, *, width: int = 740) -> Figure:
    """Bars of ||f(x_j)|| per key: a large weight on a key with a short vector moves little."""
    return Figure(_norm_layout(tuple(tokens), lang, width), {"norms": frame})


@layout
def _norm_layout(tokens: tuple[str, ...], lang: str, width: int) -> alt.Chart:
    n = len(tokens)
    return natural_size(alt.Chart(alt.NamedData(name="norms")).mark_bar().encode(
        x=alt.X("key_pos:O", title=_t(lang, "key"),
                axis=alt.Axis(labelExpr=position_label_expr(tokens), labels=n <= 64,
                              labelAngle=-50, labelLimit=100, labelOverlap=width / n < 10)),
        y=alt.Y("f_norm:Q", title=_t(lang, "f_norm")),
        color=alt.Color("mean_weight:Q", title=_t(lang, "mean_weight"),
                        scale=alt.Scale(scheme="blues", domain=[0, 1])),
        tooltip=[alt.Tooltip("key_token:N", title=_t(lang, "key")),
                 alt.Tooltip("key_pos:Q", title=_t(lang, "key_pos")),
                 alt.Tooltip("f_norm:Q", title=_t(lang, "f_norm"), format=".3f"),
                 alt.Tooltip("mean_weight:Q", title=_t(lang, "mean_weight"), format=".3f")],
    ).properties(width=width, height=200))
