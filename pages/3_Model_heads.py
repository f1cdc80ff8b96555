"""Model heads: MiniLM's 72 real heads on the sidebar's text, recomputed through the same core."""
from dataclasses import replace

import streamlit as st

from attention.errors import UserError
from attention.ui import cache
from attention.ui import model as cached
from attention.ui import model_view as view
from attention.ui.heatmap_view import draw_comparison
from attention.ui.layout import page_setup
from attention.ui.text import message, t

page = page_setup("nav.model")
spec = page.spec
text = " ".join(spec.tokens)
st.markdown(t("model.intro"))
if spec.source != "pretrained":
    st.info(t("model.toy_note"), icon=":material/info:")
if spec.causal or spec.temperature != 1.0:
    st.info(t("model.own_settings"), icon=":material/info:")

try:
    with st.spinner(t("common.computing")):
        report = cached.report(text)
except UserError as err:
    st.error(message(err), icon=":material/error:")
    page.finish()
    st.stop()

view.draw_pieces(report.tokens)
grid_slot = st.container()         # the grid shows above the pickers but needs their value
layer, head = view.pick_head()
with grid_slot:
    view.draw_grid(report, (layer, head))
st.subheader(t("model.compare_title", layer=layer, head=head))
st.caption(t("model.compare_help"))
with st.spinner(t("common.computing")):   # the model's own settings: no mask, temperature 1
    analysis = cache.analysis(replace(spec, source="pretrained", layer=layer, causal=False,
                                      temperature=1.0))
draw_comparison(analysis, head, key_prefix="mh")
view.draw_table(report)
view.draw_rollout(report, layer)
view.draw_value_weighted(text, report.tokens, layer, head)
view.draw_explanations()
page.finish()
