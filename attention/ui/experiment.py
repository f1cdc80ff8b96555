"""Cached runs of the "Is sharper better?" experiments, with a progress bar while training.

st.cache_data keyed on the seed (the results are small DataFrames), shared by every session:
a seed trained once is instant for everyone afterwards. The progress bar is drawn inside the
cached function, so on a cache hit Streamlit replays it as "drawn, then emptied": nothing.
"""
from __future__ import annotations

from contextlib import contextmanager

import pandas as pd
import streamlit as st
import torch

from .. import experiment
from .text import t

SEED_RANGE = (0, 9999)


def scaling_seeds(seed: int) -> tuple[int, int, int]:
    """The scaling experiment's seeds for the page's seed: it and the next two."""
    return (seed, seed + 1, seed + 2)


@contextmanager
def one_torch_thread():
    """Train on one torch thread, then restore the previous count.

    The heads are tiny, so a second intra-op thread only adds synchronisation; on a busy
    2-core machine the OpenMP threads' spin-waiting made the scaling sweep 8x slower in wall
    time (a 40-step run: 165 s against 19 s). The setting is per thread under OpenMP, and
    Streamlit runs each session's script in its own thread, so other sessions keep theirs."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _with_progress(label: str, run):
    bar = st.progress(0.0, text=label)
    with one_torch_thread():
        result = run(lambda fraction: bar.progress(min(max(fraction, 0.0), 1.0), text=label))
    bar.empty()
    return result


@st.cache_data(max_entries=32, ttl="6h", show_spinner=False)
def sharpening(seed: int) -> experiment.SharpeningStudy:
    return _with_progress(t("sharper.training_head"),
                          lambda progress: experiment.sharpening_study(seed, progress))


@st.cache_data(max_entries=32, ttl="6h", show_spinner=False)
def scaling(seed: int) -> pd.DataFrame:
    return _with_progress(t("sharper.training_scaling"),
                          lambda progress: experiment.scaling_sweep(scaling_seeds(seed), progress))
