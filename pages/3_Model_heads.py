"""Placeholder until this page lands: the shared sidebar and the view link work already."""
import streamlit as st

from attention.ui.layout import page_setup

page = page_setup("nav.model")
st.info("Coming soon.")
page.finish()
