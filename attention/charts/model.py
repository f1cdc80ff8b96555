"""Charts of the Model heads page drawn by Vega: the per-head statistics and the downloads
of the rollout and the value norms (the all-heads grid, the token x token matrices and the
value norms on the page are drawn by the canvas component: attention/charts/canvas.py).

Builders turn small tidy tables into altair charts; the tables come from attention/measures/heads.py
(the per-head table) or from `matrix_frame` and `norm_frame` here, which only reshape an array
they are given. No torch here. Labels come from
attention/locales/<lang>/model.toml through `translate` (no streamlit here).
"""
from __future__ import annotations

import json

import altair as alt
import numpy as np
import pandas as pd

from attention.i18n import translate
from attention.charts.canvas import bars_figure
from attention.charts.scores import position_label_expr
from attention.charts.size import natural_size
from attention.charts.vega import Figure, layout

def _t(lang: str, key: str, **values) -> str:
    return translate(lang, f"model.{key}", **values)


def _js(value) -> str:
    return json.dumps(value, ensure_ascii=False)


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


def norm_figure(frame: pd.DataFrame, lang: str, *, width: int = 740) -> dict:
    """The same bars as `norm_chart` for the page's canvas (Vega's redraw of this chart was
    a fifth of a Model heads head click: 147 -> 126 ms without it, README "Performance")."""
    titles = {name: _t(lang, key) for name, key in (("x", "key"), ("y", "f_norm"),
              ("shade", "mean_weight"), ("token", "key"), ("pos", "key_pos"))}
    return bars_figure(frame["f_norm"].to_numpy(), frame["mean_weight"].to_numpy(),
                       list(frame["key_token"]), titles=titles, scheme="blues", width=width,
                       scroll_hint=translate(lang, "heatmap.scroll_hint"))


def norm_chart(frame: pd.DataFrame, tokens, lang: str, *, width: int = 740) -> Figure:
    """Bars of ||f(x_j)|| per key: a large weight on a key with a short vector moves little
    (drawn by Vega for the PNG/SVG downloads; the page draws `norm_figure`)."""
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
