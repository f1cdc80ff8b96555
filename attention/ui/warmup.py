"""The dashboard's slow work, done in a background thread at server start (see serve.py).

It imports torch, pandas, altair and the pages' modules, loads the bundled MiniLM and fills the
default view's analysis and the "Is sharper better?" page's default seed (from disk when this
code has trained it before, see attention.experiment_cache). A first request that arrives
meanwhile is served at once and waits only for what it needs: imports share Python's import
lock, and the warm-up goes through the pages' own cached functions, whose per-key locks make
a second caller wait for the first computation instead of repeating it. A failing step is
logged and skipped (the pages compute what they need themselves).
"""
from __future__ import annotations

import time
from collections.abc import Callable

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
    import attention.ui.experiment  # noqa: F401
    import attention.ui.heatmap_view  # noqa: F401
    import attention.ui.layout  # noqa: F401
    import attention.ui.model_view  # noqa: F401
    import attention.ui.scores_view  # noqa: F401
    import attention.ui.upload_view  # noqa: F401
    from attention import tokens

    # Hook for the Chinese tokenizer's dictionary: a public tokens.warm_up() runs here.
    hook = getattr(tokens, "warm_up", None)
    if callable(hook):
        hook()


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
    from attention.ui import model

    model._model(model.models.BUNDLED)   # the page's own cache_resource entry: ensure_model() shares it


def _sharper() -> None:
    from attention import experiment_cache
    import attention.ui  # noqa: F401  one torch thread for every computation (see its docstring)

    experiment_cache.precompute(0)


# In order of need: every page imports; the Model heads page waits for the model (about 5 s
# on an idle core); the Sharper page's results are a file read once trained on this code.
STEPS: tuple[tuple[str, Callable[[], None]], ...] = (
    ("imports", _imports), ("runtime", _wait_for_runtime), ("pages", _pages),
    ("altair", _altair), ("analysis", _analysis), ("model", _model), ("sharper", _sharper),
)


def warm_up(steps=STEPS) -> dict[str, float]:
    """Run every step, logging its time; a failing step is logged and skipped."""
    from streamlit.logger import get_logger

    log = get_logger(__name__)
    times = {}
    for name, step in steps:
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
