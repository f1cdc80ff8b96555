"""Model heads: MiniLM's 72 real heads on the sidebar's text, recomputed through the same core,
and the same views for attention you bring yourself (uploaded Q/K/V or weights).

Only the open tab's sections are drawn (its id is in the URL as ?mh_tab=), except the upload
tab, which is always drawn so that its files stay when another tab is opened."""
import streamlit as st

from attention.ui.intervene_view import PARAM as INTERVENTIONS
from attention.ui.layout import page_setup
from attention.ui.model_view import (TAB_VIEW, draw_explanations, draw_interventions_tab,
                                     draw_model_tab, draw_table_tab)
from attention.ui.state import view_tabs
from attention.ui.text import t
from attention.ui.upload_view import draw_upload_tab

page = page_setup("nav.model")
st.markdown(t("model.intro"))
labels = {"heads": t("model.tab_model"), "table": t("model.tab_table"), "iv": t("model.tab_iv"),
          "upload": t("model.tab_upload")}
# a link from before the tabs carried its interventions on one page: open on them
tabs, open_tab = view_tabs(TAB_VIEW, labels,
                           default="iv" if st.query_params.get(INTERVENTIONS) else "heads")
drawn_when_open = {"heads": lambda: draw_model_tab(page.spec, page.view),  # a layer/head
                   "table": lambda: draw_table_tab(page.spec),      # click reruns only its part
                   "iv": lambda: draw_interventions_tab(page.spec)}
for tab, draw in drawn_when_open.items():
    with tabs[tab]:
        if open_tab == tab:
            draw()
with tabs["upload"]:
    draw_upload_tab(page.spec)
draw_explanations()
page.finish()
