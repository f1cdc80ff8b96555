"""Cached wrappers around the core: one computation per spec per server, shared by sessions.

cache_resource (not cache_data) because an Analysis holds large tensors: cache_data would
pickle and copy them on every rerun. The objects are frozen and never mutated by pages.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from ..analysis import Analysis, analyze, dk_sweep
from .. import scorestats as scores
from ..spec import AttentionSpec

_HASH = {AttentionSpec: lambda spec: tuple(sorted(spec.to_query().items()))}


# At the token limit one Analysis holds ~0.8 GB: three entries bound the cache to ~2.5 GB.
@st.cache_resource(max_entries=3, ttl="1h", show_spinner=False, hash_funcs=_HASH)
def analysis(spec: AttentionSpec) -> Analysis:
    return analyze(spec)


@st.cache_resource(max_entries=16, ttl="1h", show_spinner=False, hash_funcs=_HASH)
def sweep(spec: AttentionSpec) -> pd.DataFrame:
    return dk_sweep(spec)


@st.cache_resource(max_entries=16, ttl="1h", show_spinner=False, hash_funcs=_HASH)
def score_distribution(spec: AttentionSpec, head: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score stats and the pre-binned score histogram of one head (None: all heads): a pass
    over up to 50M scores, so it is kept rather than redone on every rerun of the page."""
    a = analysis(spec)
    heads = scores.head_list(a, head)
    stats = scores.score_stats(a, heads)
    return stats, scores.score_histogram(a, heads, stats)
