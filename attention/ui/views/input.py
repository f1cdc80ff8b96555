"""The Input page: the tokens as parsed (or the model's word pieces), the input's shape, how a
score is computed, and links to the other pages."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from attention.spec import AttentionSpec
from attention.ui import cache, model
from attention.ui.explain import explanation
from attention.ui.pages import PAGES
from attention.ui.text import t

ROW_PX = 35        # a dataframe row's height in Streamlit 1.67 (the header is one more row)
TABLE_ROWS = 50    # up to this many tokens the table shows every row; longer, it scrolls


def draw_input(spec: AttentionSpec, fmt: str) -> None:
    """Everything below the sidebar on the Input page."""
    st.markdown(t("input.intro"))

    with st.spinner(t("common.computing")):
        analysis = cache.analysis(spec)
    tokens = analysis.tokens

    cols = st.columns(4)
    cols[0].metric(t("input.n_tokens"), f"{len(tokens):,}")
    cols[1].metric(t("input.n_unique"), f"{len(set(tokens)):,}")
    cols[2].metric(t("input.heads_dk"), f"{analysis.heads} × {analysis.q.shape[-1]}")
    cols[3].metric(t("input.scale"), f"{analysis.scale:.4f}",
                   help=t("input.scale_help", d_k=analysis.q.shape[-1]))

    if spec.source == "toy":      # how the token box was split (a model splits the text itself)
        st.caption(t(f"input.split_{fmt}"))
    else:
        st.info(t("input.word_pieces", n=len(tokens)), icon=":material/info:")
        _, unknown = model.report(spec.model_source, spec.model_text).unk   # the model's own unknown piece
        if unknown:
            st.warning(t("input.unknown_pieces", unknown=unknown, n=len(tokens)),
                       icon=":material/help:")
    repeats = len(tokens) - len(set(tokens))
    if repeats and not spec.positional and spec.source == "toy":
        st.warning(t("input.no_positions"), icon=":material/content_copy:")

    counts = pd.Series(tokens).value_counts()
    table = pd.DataFrame({
        t("input.col_position"): range(len(tokens)),
        t("input.col_token"): tokens,
        t("input.col_count"): [int(counts[tok]) for tok in tokens],
        t("input.col_chars"): [len(tok) for tok in tokens],
    })
    st.subheader(t("input.parsed"))
    shown = min(len(tokens), TABLE_ROWS)
    if len(tokens) > shown:
        st.caption(t("input.table_scrolls", shown=shown, n=len(tokens)))
    st.dataframe(table, hide_index=True, width="stretch", height=ROW_PX * (shown + 1) + 3)

    explanation("input.how_title", [
        ("input.how_embed", r"x_i = e(\text{token}_i) + PE(i), \qquad "
                            r"q_i = x_i W_Q,\; k_i = x_i W_K,\; v_i = x_i W_V"),
        ("input.how_scores", r"\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left("
                             r"\frac{Q K^\top}{\sqrt{d_k}\,\tau}\right) V"),
        ("input.how_scale", None),
    ])

    st.subheader(t("input.next"))
    for script, key, icon in PAGES[1:]:
        st.page_link(script, label=t(key), icon=icon, query_params=st.query_params.to_dict())
