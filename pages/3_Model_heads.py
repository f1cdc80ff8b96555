"""Model heads: MiniLM's 72 real heads on the sidebar's text, recomputed through the same core."""
from dataclasses import replace

import streamlit as st

from attention.errors import UserError
from attention.ui import cache
from attention.ui import model as cached
from attention.ui import model_view as view
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
view.draw_grid(report)
layer, head = view.pick_head()
st.subheader(t("model.compare_title", layer=layer, head=head))
analysis = cache.analysis(replace(spec, source="pretrained", layer=layer, causal=False,
                                  temperature=1.0))
st.write("TODO heatmap_view")
view.draw_table(report)
view.draw_rollout(report, layer)
view.draw_value_weighted(text, report.tokens, layer, head)
view.draw_explanations()
page.finish()
