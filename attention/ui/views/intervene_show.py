"""What an intervention changed, drawn under its output (Model heads page, interventions part):

    sharpness_beside_output(change, output)   the named heads' max weight and entropy before
                                              and after, beside the output's change
    losses(table, tokens)                     each piece's loss before and after (a causal LM)
    sentences(frame)                          each sentence's cosine before against after
    attention_change(change, tokens)          one changed head's attention before | after |
                                              difference on one colour scale (the Heatmap's
                                              figure), and every head's sharpness in a table
"""
from __future__ import annotations

import numpy as np
import streamlit as st

from attention.charts import intervene as charts
from attention.charts.canvas import cells_figure
from attention.charts.heatmap import cell_axes
from attention.ui.canvas import figure_view
from attention.ui.chart import place, show
from attention.ui.state import view_widget
from attention.ui.text import lang, t

SHOWN_PARAM = "mh_ivhead"   # the head whose before and after are drawn, "layer.head"
WINDOW = 64                 # past this many pieces the figure shows the last WINDOW positions
SHARP_DIGITS = 4


def sharpness_beside_output(change, output: list[tuple[str, str, str | None, str | None]]) -> None:
    """Two columns: the named heads' mean max weight and mean entropy, after with the change
    from before; and `output`'s metrics (label, value, change or None, help or None)."""
    named = change.summary.set_index("heads").loc["named"]
    every = change.summary.set_index("heads").loc["all"]
    left, right = st.columns([2, 3])             # 5 metrics of equal width: no label cut
    with left:
        st.markdown(t("model.iv_sharp_title", count=int(named["count"])))
        cols = st.columns(2)
        for col, metric in zip(cols, ("max_weight", "entropy")):
            before, after = float(named[f"{metric}_before"]), float(named[f"{metric}_after"])
            col.metric(t(f"model.iv_sharp_{metric}"), f"{after:.{SHARP_DIGITS}f}",
                       delta=f"{after - before:+.{SHARP_DIGITS}f}", delta_color="off",
                       help=t("model.iv_sharp_help", before=f"{before:.{SHARP_DIGITS}f}"))
        st.caption(t("model.iv_sharp_all", count=int(every["count"]),
                     mw_b=f"{every['max_weight_before']:.3f}",
                     mw_a=f"{every['max_weight_after']:.3f}",
                     h_b=f"{every['entropy_before']:.3f}", h_a=f"{every['entropy_after']:.3f}"))
    with right:
        st.markdown(t("model.iv_output_title"))
        cols = st.columns(3) if len(output) > 1 else [st.container()]
        for col, (label, value, delta, help_text) in zip(cols, output[:3]):
            col.metric(label, value, delta=delta, delta_color="inverse", help=help_text)


def losses(table, tokens: tuple[str, ...]) -> None:
    """Each predicted piece's loss before and after, as bars."""
    st.subheader(t("model.iv_losses_title"))
    st.caption(t("model.iv_losses_help"))
    show(charts.loss_chart(table, tokens, lang()), width="content")


def sentences(frame) -> None:
    """Each sentence's cosine, its embedding before against after."""
    st.subheader(t("model.iv_sentences_title"))
    st.caption(t("model.iv_sentences_help"))
    show(charts.cosine_chart(frame, lang()), width="content")


def _label(change, index: int) -> str:
    layer, head = change.heads[index]
    if index < change.named:
        return t("model.iv_head_named", layer=layer, head=head)
    moved = float(change.table.set_index(["layer", "head"]).loc[(layer, head), "moved"])
    return t("model.iv_head_moved", layer=layer, head=head, moved=f"{moved:.3f}")


def attention_change(change, tokens: tuple[str, ...]) -> None:
    """The picked changed head's weights before | after | after − before (one colour scale
    for both weights, a diverging one for the difference), and every head's sharpness."""
    st.subheader(t("model.iv_attention_title"))
    keys = [f"{layer}.{head}" for layer, head in change.heads]
    picked = view_widget(SHOWN_PARAM, st.selectbox, default=keys[0], cast=str,
                         valid=keys.__contains__, label=t("model.iv_head_shown"),
                         options=keys, format_func=lambda k: _label(change, keys.index(k)),
                         width=420)
    index = keys.index(picked)
    layer, head = change.heads[index]
    with place():                   # a named head's note: the figure below keeps its place
        if index < change.named and float(change.table.set_index(["layer", "head"]).loc[
                (layer, head), "moved"]) <= 1e-6:
            st.caption(t("model.iv_head_same"))
    n = len(tokens)
    shown = range(max(0, n - WINDOW), n)
    mask = change.mask[index].numpy()[shown.start:, shown.start:]                 # (w, w)
    before = np.where(mask, change.before[index].double().numpy()[shown.start:, shown.start:],
                      np.nan)                                                     # (w, w)
    after = np.where(mask, change.after[index].double().numpy()[shown.start:, shown.start:],
                     np.nan)                                                      # (w, w)
    st.caption(t("model.iv_attention_help", layer=layer, head=head)
               + (" " + t("model.iv_attention_window", first=shown.start, last=n - 1, n=n)
                  if shown.start else ""))
    words = {key: t(f"model.iv_fig_{key}") for key in
             ("panel_weight", "panel_unscaled_weight", "panel_difference", "legend_shared",
              "legend_weight", "legend_unscaled_weight", "legend_difference",
              "tip_weight", "tip_unscaled_weight", "tip_difference")}
    figure = cells_figure({"weight": before, "unscaled_weight": after,
                           "difference": after - before},
                          cell_axes(tokens, shown, shown), lang(), shared=True, words=words)
    figure_view(figure, key="mh_iv_cells")
    with st.expander(t("model.iv_heads_table")):
        columns = ("layer", "head", "named", "moved", "max_weight_before", "max_weight_after",
                   "entropy_before", "entropy_after")
        names = {c: t(f"model.iv_col_{c}") for c in columns}
        st.dataframe(change.table[list(columns)].rename(columns=names), hide_index=True,
                     width="stretch", height=300,
                     column_config={names[c]: st.column_config.NumberColumn(format="%.4f")
                                    for c in columns[3:]})
