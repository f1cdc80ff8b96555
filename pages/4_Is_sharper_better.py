"""Is a higher attention score better? Train small heads live and measure: sharpening a trained
head at test time, scaled vs unscaled training as d_k grows, attention vs leave-one-out
importance; and the same question on real models, from their shipped results. Two parts
picked with buttons (?sh_part=toy|real); only the open one is drawn. Every conclusion is
written from this run's numbers.

The runs, charts, tables and formulas are drawn by attention/ui/views/experiment.py.
"""
import streamlit as st

from attention.ui.views.experiment import draw_experiments, draw_explanation, pick_part
from attention.ui.views.experiment_real import draw_real_models
from attention.ui.entry import page_setup
from attention.ui.text import t

page = page_setup("nav.sharper", needs_spec=False)
st.markdown(t("sharper.intro"))
if pick_part() == "toy":        # only the open part is drawn (?sh_part=)
    draw_experiments()
else:
    draw_real_models()
draw_explanation()
page.finish()
