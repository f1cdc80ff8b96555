"""The dashboard's slow work, done in a background thread from the first page run of a server
process (attention.ui.entry).

It imports torch, pandas, altair and the pages' modules, fills the default view's analysis,
loads the bundled MiniLM (attention.models.bert: no transformers) and the "Is sharper better?" page's
default seed (from disk when this code has trained it before, see attention.experiment.store).
A first request that arrives meanwhile is served at once and waits only for what it needs:
imports share Python's import lock, and the warm-up goes through the pages' own cached
functions, whose per-key locks make a second caller wait for the first computation instead of
repeating it. A failing step is logged and skipped (the pages compute what they need
themselves).

The warm-up yields to visitors: no step starts while a page's script runs (the step under way
when a visitor arrives finishes; a page that needs what the warm-up had not done yet does it
itself). The cheap steps every page needs come first; the heavy ones (DEFERRED: loading the
model, training) also wait until no page has run for QUIET seconds: on a small server they
would otherwise take the cores from the first visitor's page (measured: a cold Model heads link
at 6.4x a bare page with the model loading beside it, when it still went through transformers).
A page that needs the model before then loads it itself, through the same cache entry, so the
warm-up later finds it loaded instead of loading it twice.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from attention.ui.activity import POLL, QUIET, page_running, wait_until_quiet

RUNTIME_WAIT = 60.0     # s: the server creates its runtime within a second or two of starting


def _imports() -> None:
    import altair  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import torch  # noqa: F401


def _wait_for_runtime() -> None:
    """Streamlit's st.cache_data binds its storage when first called: import the pages'
    modules once the server's runtime exists (else they log "No runtime found")."""
    from streamlit import runtime

    deadline = time.monotonic() + RUNTIME_WAIT
    while not runtime.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _pages() -> None:
    import attention.ui.views.experiment  # noqa: F401
    import attention.ui.views.heatmap  # noqa: F401
    import attention.ui.layout  # noqa: F401
    import attention.ui.views.model  # noqa: F401
    import attention.ui.views.scores  # noqa: F401
    import attention.ui.views.upload  # noqa: F401


def _altair() -> None:
    """altair loads and compiles its Vega-Lite schema validator on a chart's first to_dict."""
    import altair as alt
    import pandas as pd

    alt.Chart(pd.DataFrame({"x": [0.0]})).mark_point().encode(x="x:Q").to_dict()


def _analysis() -> None:
    from attention.spec import AttentionSpec
    from attention.ui import cache

    cache.analysis(AttentionSpec())


def _model() -> None:
    from attention import models

    models.load_model(models.BUNDLED)    # into the models' store, which ensure_model() reads


def _convert() -> None:
    """Start converting the bundled SmolLM2 (once per cache: about half a minute of both
    cores) in its own background thread; a page that needs it meanwhile shows its progress."""
    from attention.config import BUNDLED_LM
    from attention.models import convert

    gguf = convert.packaged_gguf()
    if gguf is not None and convert.converted(gguf) is None:
        convert.start(gguf, BUNDLED_LM)


def _freeze() -> None:
    """Move every object alive now (the imported modules, the bundled model, the warm
    results) out of the garbage collector's reach: gc.freeze(). With torch, pandas and altair
    imported the heap holds about 260,000 objects, and each full collection walked all of
    them, about 80 ms holding the GIL, landing in the middle of a click's rerun (measured:
    gaps of 50-90 ms between a Heatmap rerun's messages). Frozen objects are still freed
    when their last reference goes; only cycles among them are never collected, so this runs
    when no page is being drawn, after a collection, and only at start-up."""
    import gc

    gc.collect()
    gc.freeze()


def _sharper() -> None:
    from attention.experiment import store
    import attention.ui  # noqa: F401  one torch thread for every computation (see its docstring)

    store.precompute(0)


# In order of need: every page imports; the default view's analysis; the heap frozen; then,
# deferred, what the Model heads page needs (the bundled model, about 0.2 s: it does not
# import transformers, which waits for the first visitor who brings a model of their own),
# the Sharper page's results (a file read: trained on this code before, or shipped with it),
# the heap frozen again with the model in it, and the bundled SmolLM2's one conversion to
# safetensors started (in its own thread) when no copy is found.
STEPS: tuple[tuple[str, Callable[[], None]], ...] = (
    ("imports", _imports), ("runtime", _wait_for_runtime), ("pages", _pages),
    ("altair", _altair), ("analysis", _analysis), ("freeze", _freeze), ("model", _model),
    ("sharper", _sharper), ("freeze model", _freeze), ("convert", _convert),
)
DEFERRED = frozenset({"model", "sharper", "freeze model", "convert"})


def warm_up(steps=STEPS, deferred=DEFERRED, busy: Callable[[], bool] = page_running,
            quiet: float = QUIET) -> dict[str, float]:
    """Run every step in order, each once no page is running, a deferred one once no page has
    run for `quiet` seconds; log each step's time (and its wait); a failing step is logged
    and skipped."""
    from streamlit.logger import get_logger

    log = get_logger(__name__)
    times = {}
    for name, step in steps:
        waited = wait_until_quiet(busy, quiet if name in deferred else 0.0)
        if waited >= POLL:
            log.info("warm-up: %s waited %.2f s for the pages", name, waited)
        start = time.perf_counter()
        try:
            step()
        except Exception:
            log.warning("warm-up step %r failed (the pages compute it on demand)", name,
                        exc_info=True)
            continue
        times[name] = time.perf_counter() - start
        log.info("warm-up: %s %.2f s", name, times[name])
    return times
