"""Cached wrappers around the core: one computation per content per server, shared by sessions.

Every heavy result (analyses, score histograms, sweeps, heatmap images, model reports,
uploads) lives in one store bounded by bytes (attention.bounded.ByteLRU, STORE_BYTES in
all), keyed by what it is computed from: the spec's URL form, an Analysis's content digest,
or a hash of an uploaded file's bytes; never by a shape or a sum. An entry count bounded
nothing: one 2048-token analysis was 0.8 GB. At most HEAVY_SLOTS computations run at once
(each makes transient (n, n) tensors); a session whose view must wait is told for how many.

The store and the gate are st.cache_resource singletons, so st.cache_resource.clear() (tests)
empties them too. Values are shared between sessions: pages never mutate them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
from typing import TYPE_CHECKING, Callable, TypeVar

import pandas as pd
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attention.bounded import ByteLRU, Gate, return_freed_memory
from attention.spec import AttentionSpec
from attention.ui.text import t

if TYPE_CHECKING:
    import altair as alt

    from attention.analysis import Analysis
    from attention.charts.size import Panels
    from attention.charts.vega import Figure

T = TypeVar("T")
STORE_BYTES = 160 * 2**20   # ~8 analyses of 2048 tokens x 12 heads (~20 MB each: q, k, v, metrics)
HEAVY_SLOTS = 2             # the machines this runs on have 2 cores; each slot ~0.1 GB transient


return_freed_memory()      # the server's transient (n, n) tensors go back to the system when freed


@st.cache_resource(show_spinner=False)
def store() -> ByteLRU:
    return ByteLRU(STORE_BYTES)


@st.cache_resource(show_spinner=False)
def gate() -> Gate:
    return Gate(HEAVY_SLOTS)


@functools.lru_cache(maxsize=32)
def spec_key(spec: AttentionSpec) -> tuple:
    """A spec's content: its URL form (every field that changes a result). Remembered for
    the last few specs: at 2,048 tokens the form takes 0.8 ms to make, on every click."""
    return tuple(sorted(spec.to_query().items()))


def file_key(upload: tuple[str, bytes] | None) -> tuple | None:
    """An uploaded (name, bytes) file's content: its name and a hash of every byte."""
    if upload is None:
        return None
    name, data = upload
    return name, len(data), hashlib.blake2b(data, digest_size=20).hexdigest()


def frames_key(*frames: pd.DataFrame) -> str:
    """The content of DataFrames (every value, index and column name) as one hash: the key of
    what is made from them, as a file's is its bytes."""
    h = hashlib.blake2b(digest_size=20)
    for frame in frames:
        h.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
        h.update(repr(list(frame.columns)).encode())
    return h.hexdigest()


def built(make: Callable[..., alt.TopLevelMixin | Panels], *args) -> Figure | Panels:
    """make(*args), frozen once per content of its arguments on this server (figure): a
    DataFrame by frames_key, any other argument as it is (hashable: a language, a name)."""
    key = (make.__module__, make.__qualname__,
           *(frames_key(a) if isinstance(a, pd.DataFrame) else a for a in args))
    return figure(key, lambda: make(*args))


def cached(kind: str, key: tuple, compute: Callable[[], T]) -> T:
    """compute() once per (kind, key) on this server, kept while the store's budget allows;
    run through the gate, with a "waiting for N other views" notice while it waits. A page's
    run shows the "Computing" spinner only when the value is not stored yet (computed here,
    or by another session it waits for): a spinner starts a timer thread, a few ms of every
    click that only looks values up."""
    full = (kind, *key)
    spinner = full not in store() and get_script_run_ctx(suppress_warning=True) is not None
    with st.spinner(t("common.computing")) if spinner else contextlib.nullcontext():
        return store().get_or_compute(full, lambda: heavy(compute))


def kept(kind: str, key: tuple, build: Callable[[], T]) -> T:
    """build() once per (kind, key) on this server, in the store (bytes counted) but outside
    the gate and without a spinner: for what is quick to make yet made on every rerun, and is
    the same for every visitor (a chart or the sentences of stored results)."""
    return store().get_or_compute((kind, *key), build)


def figure(key: tuple, build: Callable[[], alt.TopLevelMixin | Panels]) -> Figure | Panels:
    """The chart build() makes, frozen (charts.vega.frozen; Panels panel by panel), once per
    key on this server: building an altair chart costs tens of ms of each rerun, and a chart
    of stored results is the same for every click that leaves it as it is, and for every
    visitor (each visit to "Is sharper better?" built its charts again: 0.25 s of altair)."""
    from attention.charts.size import Panels
    from attention.charts.vega import frozen

    def freeze():
        chart = build()
        if isinstance(chart, Panels):
            return dataclasses.replace(chart, charts=tuple(frozen(c) for c in chart.charts))
        return frozen(chart)

    return kept("figure", key, freeze)


def heavy(compute: Callable[[], T]) -> T:
    """compute() in one of the gate's slots. Waiting shows a notice in the page (cleared when
    the computation starts); outside a script run (a deferred download) it waits silently."""
    notice = None

    def waiting(ahead: int) -> None:
        nonlocal notice
        if get_script_run_ctx() is not None:
            notice = st.empty()
            notice.info(t("common.waiting", n=ahead), icon=":material/hourglass_top:")

    with gate().slot(waiting):
        if notice is not None:
            notice.empty()
        return compute()


# attention.analysis (and torch) are imported by the first call, not with this module: a page
# that only reads stored results never needs them (docs/architecture.md, "Imports").
def analysis(spec: AttentionSpec) -> Analysis:
    from attention.analysis import analyze

    return cached("analysis", spec_key(spec), lambda: analyze(spec))


def sweep(spec: AttentionSpec) -> pd.DataFrame:
    from attention.analysis import dk_sweep

    return cached("sweep", spec_key(spec), lambda: dk_sweep(spec))


def score_distribution(spec: AttentionSpec, head: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score stats and the pre-binned score histogram of one head (None: all heads): a pass
    over up to 50M scores, so it is kept rather than redone on every rerun of the page."""
    from attention.analysis import scorestats as scores

    a = analysis(spec)

    def compute() -> tuple[pd.DataFrame, pd.DataFrame]:
        heads = scores.head_list(a, head)
        stats = scores.score_stats(a, heads)
        return stats, scores.score_histogram(a, heads, stats)

    return cached("scores", (*spec_key(spec), head), compute)
