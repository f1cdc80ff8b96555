"""The Corpus page's figures: the head grid of a statistic over a corpus and one head's joint
map of queries and keys (AttentionViz). DataFrames in, altair charts out; no torch."""
from __future__ import annotations

import altair as alt
import pandas as pd

from attention.charts.size import title_lines
from attention.charts.vega import NO_ARIA

Q_COLOUR, K_COLOUR = "#d95f02", "#1b9e77"


def head_grid(summary: pd.DataFrame, stat: str, labels: dict[str, str]) -> alt.Chart:
    """layers x heads: colour = the mean of `stat` over the texts; a ring marks the heads of
    summary["ring"] (attention.corpus.store.ringed for this stat). summary also carries
    pattern_label (the head's pattern, translated). labels: layer, head, mean, lo, hi, cv,
    pattern, ring, yes, no, title."""
    data = summary[["layer", "head", f"{stat}_mean", f"{stat}_lo", f"{stat}_hi", f"{stat}_cv",
                    "pattern_label", "ring"]].rename(columns={
        f"{stat}_mean": "mean", f"{stat}_lo": "lo", f"{stat}_hi": "hi", f"{stat}_cv": "cv"})
    data = data.assign(ring_label=data["ring"].map({True: labels["yes"], False: labels["no"]}))
    base = alt.Chart(data).encode(
        x=alt.X("head:O", title=labels["head"], axis=alt.Axis(labelAngle=0)),
        y=alt.Y("layer:O", title=labels["layer"]))
    tooltip = [alt.Tooltip("layer:O", title=labels["layer"]),
               alt.Tooltip("head:O", title=labels["head"]),
               alt.Tooltip("mean:Q", title=labels["mean"], format=".3f"),
               alt.Tooltip("lo:Q", title=labels["lo"], format=".3f"),
               alt.Tooltip("hi:Q", title=labels["hi"], format=".3f"),
               alt.Tooltip("cv:Q", title=labels["cv"], format=".2f"),
               alt.Tooltip("pattern_label:N", title=labels["pattern"]),
               alt.Tooltip("ring_label:N", title=labels["ring"])]
    cells = base.mark_rect(stroke="white").encode(
        color=alt.Color("mean:Q", title=labels["mean"], scale=alt.Scale(scheme="blues")),
        tooltip=tooltip)
    rings = base.transform_filter("datum.ring").mark_point(
        shape="circle", size=60, filled=False, color="#e6550d", strokeWidth=1.5).encode(
        tooltip=tooltip)
    return (cells + rings).properties(width="container", height=6 * 60,
                                      title=title_lines(labels["title"]))


def qk_map(points: pd.DataFrame, link: str, colour: str, labels: dict[str, str]) -> alt.Chart:
    """One head's queries and keys in one plane. points: kind (q/k), text_id, position, x, y,
    token, frequency; texts: text_id, text, link (the Model heads deep link of that text at
    this head). colour: "kind" (queries and keys in two colours), "position" or "frequency";
    the shape always tells queries (circles) from keys (squares). A click opens the link."""
    shown = points.assign(kind_label=points["kind"].map({"q": labels["query"], "k": labels["key"]}))
    shape = alt.Shape("kind_label:N", title=labels["kind"],
                      scale=alt.Scale(domain=[labels["query"], labels["key"]],
                                      range=["circle", "square"]))
    if colour == "position":
        color = alt.Color("position:Q", title=labels["position"], scale=alt.Scale(scheme="viridis"))
    elif colour == "frequency":
        color = alt.Color("frequency:Q", title=labels["frequency"],
                          scale=alt.Scale(type="log", scheme="plasma"))
    else:
        color = alt.Color("kind_label:N", title=labels["kind"],
                          scale=alt.Scale(domain=[labels["query"], labels["key"]],
                                          range=[Q_COLOUR, K_COLOUR]))
    return alt.Chart(shown).transform_calculate(
        link=f"{link!r} + encodeURIComponent(datum.text)"
    ).mark_point(filled=True, size=22, opacity=0.7, cursor="pointer").encode(
        x=alt.X("x:Q", axis=None), y=alt.Y("y:Q", axis=None), color=color, shape=shape,
        href=alt.Href("link:N"),
        tooltip=[alt.Tooltip("token:N", title=labels["token"]),
                 alt.Tooltip("kind_label:N", title=labels["kind"]),
                 alt.Tooltip("position:Q", title=labels["position"]),
                 alt.Tooltip("frequency:Q", title=labels["frequency"]),
                 alt.Tooltip("text:N", title=labels["text"])],
    ).properties(height=560, title=title_lines(labels["title"]), config=NO_ARIA)
