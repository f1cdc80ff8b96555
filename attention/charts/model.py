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

GRID_PICK = "pick"  # name of the grid's click selection (fields layer, head)


def _t(lang: str, key: str, **values) -> str:
    return translate(lang, f"model.{key}", **values)


def _js(value) -> str:
    return json.dumps(value, ensure_ascii=False)


# ---- the 6 x 12 grid -------------------------------------------------------------------

def grid_chart(frame: pd.DataFrame, lang: str, *, current: tuple[int, int] | None = None,
               cell_px: int = 5) -> alt.LayerChart:
    """Every head as a small square, layers down and heads across; click one to pick it.
    `current` (layer, head) gets a red frame."""
    b = int(frame["qb"].max()) + 1
    step = b + 1                                                         # one blank block between heads
    data = frame.assign(x=frame["head"] * step + frame["kb"],
                        y=frame["layer"] * step + frame["qb"])
    data = data.assign(x2=data["x"] + 1, y2=data["y"] + 1)
    heads, layers = int(frame["head"].max()) + 1, int(frame["layer"].max()) + 1
    pick = alt.selection_point(name=GRID_PICK, fields=["layer", "head"], on="click",
                               clear=False, empty=False)

    def axis(count: int, key: str) -> alt.Axis:
        return alt.Axis(values=[i * step + b / 2 for i in range(count)], grid=False, ticks=False,
                        domain=False, labelExpr=f"{_js(_t(lang, key))} + floor(datum.value / {step})",
                        labelAngle=0)

    cells = alt.Chart(data).mark_rect().encode(
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
    ).add_params(pick)
    layer, head = current if current is not None else (-1, -1)
    frame_box = pd.DataFrame({"x": [head * step - 0.25], "x2": [head * step + b + 0.25],
                              "y": [layer * step - 0.25], "y2": [layer * step + b + 0.25]})
    box = alt.Chart(frame_box).mark_rect(fill=None, stroke="#d62728", strokeWidth=2).encode(
        x="x:Q", x2="x2:Q", y="y:Q", y2="y2:Q")
    return natural_size(alt.layer(cells, box).properties(width=heads * step * cell_px,
                                                         height=layers * step * cell_px))


def grid_image_chart(url: str, layers: int, heads: int, blocks: int, lang: str, *,
                     current: tuple[int, int] | None = None, cell_px: int = 2) -> alt.LayerChart:
    """The same grid for many heads (a BERT-base's 144, a 32 x 32 model's 1,024): one image
    (headstats.grid_image coloured by charts.colors, 'blues' on [0, 1]) under one transparent
    rect per head that carries the tooltip and the click selection GRID_PICK."""
    step = blocks + 1
    width, height = heads * step, layers * step
    scale_x = alt.Scale(domain=[0, width], nice=False, zero=False)
    scale_y = alt.Scale(domain=[0, height], nice=False, zero=False, reverse=True)

    def axis(count: int, key: str) -> alt.Axis:
        every = max(1, count // 16)                                      # at most ~16 labels
        return alt.Axis(values=[i * step + blocks / 2 for i in range(0, count, every)],
                        grid=False, ticks=False, domain=False, labelAngle=0,
                        labelExpr=f"{_js(_t(lang, key))} + floor(datum.value / {step})")

    span = alt.InlineData(values=[{"x": 0, "x2": width, "y": 0, "y2": height}])
    picture = alt.Chart(span).mark_image(url=url, aspect=False, smooth=False).encode(
        x=alt.X("x:Q", title=_t(lang, "grid_heads"), axis=axis(heads, "grid_head"), scale=scale_x),
        x2="x2:Q",
        y=alt.Y("y:Q", title=_t(lang, "grid_layers"), axis=axis(layers, "grid_layer"),
                scale=scale_y),
        y2="y2:Q")
    ll, hh = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    cells = pd.DataFrame({"layer": ll.ravel(), "head": hh.ravel()})
    cells = cells.assign(x=cells["head"] * step, x2=cells["head"] * step + blocks,
                         y=cells["layer"] * step, y2=cells["layer"] * step + blocks)
    pick = alt.selection_point(name=GRID_PICK, fields=["layer", "head"], on="click",
                               clear=False, empty=False)
    hits = alt.Chart(cells).mark_rect(opacity=0.0).encode(
        x=alt.X("x:Q", scale=scale_x), x2="x2:Q", y=alt.Y("y:Q", scale=scale_y), y2="y2:Q",
        tooltip=[alt.Tooltip("layer:Q", title=_t(lang, "layer")),
                 alt.Tooltip("head:Q", title=_t(lang, "head"))]).add_params(pick)
    layer, head = current if current is not None else (-1, -1)
    frame_box = pd.DataFrame({"x": [head * step - 0.25], "x2": [head * step + blocks + 0.25],
                              "y": [layer * step - 0.25], "y2": [layer * step + blocks + 0.25]})
    box = alt.Chart(frame_box).mark_rect(fill=None, stroke="#d62728", strokeWidth=2).encode(
        x=alt.X("x:Q", scale=scale_x), x2="x2:Q", y=alt.Y("y:Q", scale=scale_y), y2="y2:Q")
    px = max(cell_px, min(8, 900 // max(width, 1)))
    return natural_size(alt.layer(picture, hits, box).properties(
        width=width * px, height=height * px))


# ---- per-head statistics ------------------------------------------------------------------

def head_stat_chart(table: pd.DataFrame, column: str, lang: str) -> alt.Chart:
    """One statistic of the per-head table (headstats.head_table) as a layers x heads
    heatmap; the tooltip shows every statistic of the table."""
    stats = [c for c in table.columns if c not in ("layer", "head")]
    if column not in stats:
        raise ValueError(f"unknown head statistic {column!r}")
    heads = int(table["head"].max()) + 1
    layers = int(table["layer"].max()) + 1
    scale = (alt.Scale(scheme="viridis") if column == "entropy"      # nats: no fixed top
             else alt.Scale(scheme="viridis", domain=[0, 1]))
    return natural_size(alt.Chart(table).mark_rect().encode(
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
                 scheme: str = "blues", max_size: int = 720) -> alt.Chart:
    """A query x key heatmap whose axes are positions labelled with their tokens (every
    label while each gets 10 px or more, else as many as fit)."""
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

    return natural_size(alt.Chart(frame).mark_rect().encode(
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


def norm_chart(frame: pd.DataFrame, tokens, lang: str, *, width: int = 740) -> alt.Chart:
    """Bars of ||f(x_j)|| per key: a large weight on a key with a short vector moves little."""
    n = len(tokens)
    return natural_size(alt.Chart(frame).mark_bar().encode(
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
