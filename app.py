"""Attention Explorer: the entry page (Input). Run with `streamlit run app.py`.

Every page, this one included, starts with page_setup(): the shared sidebar holds the input
and settings, and the URL holds the whole view so any page can be deep-linked.
"""
from attention.ui.entry import page_setup

page = page_setup("nav.input")
from attention.ui.views.input import draw_input  # noqa: E402  (torch: docs/architecture.md)
draw_input(page.spec, page.fmt)
page.finish()
