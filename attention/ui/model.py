"""Cached access to MiniLM for the pages: the model once per server, each text's report once.

attention.pretrained (and with it transformers) is imported inside these functions only, so
a page that never shows the model never imports transformers.
"""
from __future__ import annotations

import streamlit as st

from .text import t


@st.cache_resource(show_spinner=False)
def _model():
    from .. import pretrained

    return pretrained.load()


def ensure_model() -> None:
    """Load the model on first use on this server, with a spinner; a no-op afterwards."""
    from .. import pretrained

    if pretrained.load.cache_info().currsize:
        _model()
        return
    with st.spinner(t("common.loading_model"), show_time=True):
        _model()


@st.cache_resource(max_entries=8, ttl="1h", show_spinner=False)
def report(text: str):
    """pretrained.ModelReport of `text`: all 72 heads, the per-head table, the rollout."""
    from .. import pretrained

    ensure_model()
    return pretrained.report(text)


@st.cache_resource(max_entries=32, ttl="1h", show_spinner=False)
def value_weighted(text: str, layer: int, head: int):
    """(alpha (n, n), ||alpha f|| (n, n), ||f|| (n,)) of one head."""
    from .. import pretrained

    ensure_model()
    return pretrained.value_weighted(text, layer, head)
