"""Score analysis: raw vs scaled scores, each query row with and without 1/sqrt(d_k), the d_k
sweep, saturation, and why the sharper attention is not the better one.

Each section is drawn from the cached Analysis and d_k sweep (attention/ui/views/scores.py).
"""
import streamlit as st

from attention.ui.entry import page_setup
from attention.ui.text import t

page = page_setup("nav.scores")
st.caption(t("scores.intro"))
from attention.ui.views.scores import draw_scores  # noqa: E402  (torch: docs/architecture.md)
draw_scores(page.spec, page.view)
page.finish()
