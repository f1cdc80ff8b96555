"""Model heads: MiniLM's 72 real heads on the sidebar's text, recomputed through the same core,
and the same views for attention you bring yourself (uploaded Q/K/V or weights).

Four parts picked with buttons (the open one's id is in the URL as ?mh_tab=); only the open
part is drawn. Uploaded files are kept for the session when another part is opened
(upload_view)."""
import streamlit as st

from attention.ui.entry import page_setup
from attention.ui.text import t

page = page_setup("nav.model")
st.markdown(t("model.intro"))
# torch, imported while the browser draws the sidebar (docs/architecture.md, "Imports")
from attention.ui.views.intervene import PARAM as INTERVENTIONS  # noqa: E402
from attention.ui.views.model import (draw_explanations, draw_heads_part,  # noqa: E402
                                      draw_interventions_part, draw_table_part, part_picker)
from attention.ui.views.upload import draw_upload_part  # noqa: E402
# a link from before the parts carried its interventions on one page: open on them
part = part_picker(default="iv" if st.query_params.get(INTERVENTIONS) else "heads")
draw = {"heads": lambda: draw_heads_part(page.spec, page.view),  # a layer/head click reruns
        "table": lambda: draw_table_part(page.spec),             # only its section
        "iv": lambda: draw_interventions_part(page.spec),
        "upload": lambda: draw_upload_part(page.spec)}[part]
draw()
draw_explanations()
page.finish()
