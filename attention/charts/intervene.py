"""Charts of what an intervention changes at the output (Model heads page, drawn by Vega):

    loss_chart(table, lang)      each piece's loss before and after (a causal LM;
                                 models.outcomes.loss_table), one pair of bars a piece
    cosine_chart(frame, lang)    each sentence's cosine, its embedding before against after
                                 (an embedding model; models.runs.EmbeddingOutcome.lines)

No torch here; labels from attention/locales/<lang>/model.toml.
"""
from __future__ import annotations

import math

import altair as alt
import pandas as pd

from attention.charts.scores import position_label_expr
from attention.charts.size import natural_size
from attention.charts.vega import Figure, layout
from attention.i18n import translate

WHEN = ("before", "after")
WHEN_COLORS = ("#9ab7d3", "#d1495b")     # before: a light blue; after: the red of "changed"
LABELS_MAX = 64                          # past this many pieces the axis shows positions only
BAR_PX = 22                              # px a piece (its two bars), within the widths below
WIDTH = (320, 900)


def _t(lang: str, key: str, **values) -> str:
    return translate(lang, f"model.{key}", **values)


def loss_frame(table: pd.DataFrame, lang: str) -> pd.DataFrame:
    """loss_table's columns as one row a (piece, before/after): position, token, when (its
    label in `lang`), loss, change (after - before, on both rows)."""
    rows = []
    for when in WHEN:
        rows.append(pd.DataFrame({"position": table["position"].to_numpy(),
                                  "token": table["token"].astype("string").to_numpy(),
                                  "when": _t(lang, f"iv_when_{when}"),
                                  "loss": table[f"loss_{when}"].to_numpy(),
                                  "change": table["change"].to_numpy()}))
    return pd.concat(rows, ignore_index=True)


def loss_chart(table: pd.DataFrame, tokens: tuple[str, ...], lang: str) -> Figure:
    """Each predicted piece's loss (nats) before and after, side by side on its position
    (labelled with the piece; `tokens` are every position's, so position 0 has none)."""
    return Figure(_loss_layout(tuple(tokens), lang), {"losses": loss_frame(table, lang)})


@layout
def _loss_layout(tokens: tuple[str, ...], lang: str) -> alt.Chart:
    n = max(1, len(tokens) - 1)
    width = min(max(WIDTH[0], BAR_PX * n), WIDTH[1])
    labels = n <= LABELS_MAX
    when = [_t(lang, f"iv_when_{w}") for w in WHEN]
    return natural_size(alt.Chart(alt.NamedData(name="losses")).mark_bar().encode(
        x=alt.X("position:O", title=_t(lang, "iv_loss_axis_piece"),
                axis=alt.Axis(labelExpr=position_label_expr(tokens), labels=labels,
                              ticks=labels, labelAngle=-50, labelLimit=100,
                              labelOverlap=width / n < 12)),
        xOffset=alt.XOffset("when:N", sort=when),
        y=alt.Y("loss:Q", title=_t(lang, "iv_loss_axis")),
        color=alt.Color("when:N", title=None, sort=when,
                        scale=alt.Scale(domain=when, range=list(WHEN_COLORS)),
                        legend=alt.Legend(orient="top")),
        tooltip=[alt.Tooltip("token:N", title=_t(lang, "iv_col_token")),
                 alt.Tooltip("position:Q", title=_t(lang, "iv_col_position")),
                 alt.Tooltip("when:N", title=_t(lang, "iv_when")),
                 alt.Tooltip("loss:Q", title=_t(lang, "iv_loss_axis"), format=".4f"),
                 alt.Tooltip("change:Q", title=_t(lang, "iv_col_change"), format="+.4f")],
    ).properties(width=width, height=220))


def cosine_chart(frame: pd.DataFrame, lang: str) -> Figure:
    """One bar a sentence: the cosine of its embedding before against after (1: unchanged),
    on an axis that ends at 1."""
    shown = frame.assign(label=[f"{i + 1}. {s[:40]}" for i, s in enumerate(frame["sentence"])])
    low = float(frame["cosine"].min()) if len(frame) else 1.0
    step = 10.0 ** math.floor(math.log10(max(1.0 - low, 1e-4)))     # a round start below it
    start = max(-1.0, round(math.floor(low / step - 1) * step, 6))
    return Figure(_cosine_layout(len(frame), start, lang),
                  {"sentences": shown})


@layout
def _cosine_layout(count: int, low: float, lang: str) -> alt.Chart:
    return natural_size(alt.Chart(alt.NamedData(name="sentences")).mark_bar(
        color=WHEN_COLORS[1]).encode(
        y=alt.Y("label:N", title=_t(lang, "iv_col_a"), sort=None,
                axis=alt.Axis(labelLimit=320)),
        x=alt.X("cosine:Q", title=_t(lang, "iv_cosine_axis"),
                scale=alt.Scale(domain=[low, 1.0], zero=False, nice=False)),
        tooltip=[alt.Tooltip("sentence:N", title=_t(lang, "iv_col_a")),
                 alt.Tooltip("cosine:Q", title=_t(lang, "iv_cosine_axis"), format=".4f")],
    ).properties(width=420, height=max(60, 26 * count)))
