"""Model heads: MiniLM's 72 real heads on the sidebar's text, recomputed through the same core,
and the same views for attention you bring yourself (uploaded Q/K/V or weights)."""
import streamlit as st

from attention.ui.layout import page_setup
from attention.ui.model_view import draw_model_tab
from attention.ui.text import t
from attention.ui.upload_view import draw_upload_tab

page = page_setup("nav.model")
st.markdown(t("model.intro"))
model_tab, upload_tab = st.tabs([t("model.tab_model"), t("model.tab_upload")])
with model_tab:
    draw_model_tab(page.spec, page.view)   # a layer/head click reruns only its sections
with upload_tab:
    draw_upload_tab(page.spec)
page.finish()
