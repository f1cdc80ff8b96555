"""Cached access to MiniLM for the pages: the model once per server, each text's report once.

Call ensure_model() first on a page: it shows a spinner while the model loads. Transformers
itself is imported by pretrained.load() only, so pages that never show the model never pay
for it.
"""
from __future__ import annotations

import streamlit as st

from .. import pretrained
from . import cache
from .text import t


@st.cache_resource(show_spinner=False)
def _model() -> pretrained.Model:
    return pretrained.load()


def ensure_model() -> pretrained.Model:
    """The model, loaded on first use on this server with a spinner; cached afterwards."""
    if pretrained.load.cache_info().currsize:
        return _model()
    with st.spinner(t("common.loading_model"), show_time=True):
        return _model()


def report(text: str) -> pretrained.ModelReport:
    """All 72 heads of `text`, the per-head table and the rollout (up to 75 MB at 512 word
    pieces: kept in the byte-bounded store, not by entry count)."""
    return cache.cached("model_report", (text,), lambda: pretrained.report(text))


def value_weighted(text: str, layer: int, head: int):
    """(alpha (n, n), ||alpha f|| (n, n), ||f|| (n,)) of one head."""
    return cache.cached("value_weighted", (text, layer, head),
                        lambda: pretrained.value_weighted(text, layer, head))
