"""Real models for the pages: each (source, text, interventions) run once. The models
themselves are kept by attention.models (its one store: the cap, eviction and the memory
reservation); this module only shows a spinner or a progress bar while one loads.

Call ensure_model(source) first on a page: it shows a spinner while the model loads and
returns the model, or raises the UserError that says why it cannot be loaded. Transformers
is imported by models.load_model only, so pages that never show a model never pay for it.
"""
from __future__ import annotations

import streamlit as st

from attention.models import links as ivlink
from attention import models
from attention.models import runs as modelrun
from attention.charts.canvas import grid_cells_for, grid_figure, pack
from attention.errors import UserError
from attention.models.gguf_source import Pending
from attention.measures.heads import GRID_CELLS, grid_image, grid_labels
from attention.spec import AttentionSpec
from attention.ui import cache
from attention.ui.text import lang, t

PROGRESS_POLL = 0.5          # s between two redraws of a conversion's progress bar


def _load(source: str) -> models.LoadedModel:
    """From the models' store (a GGUF converts in the background: Pending meanwhile)."""
    return models.load_model(source, wait=False)


def ensure_model(source: str = models.BUNDLED, *, wait: bool = True) -> models.LoadedModel:
    """The model `source` names, loaded on first use with a spinner; UserError otherwise.
    A GGUF source (the bundled SmolLM2) still converting in the background: a progress bar
    until it is done, then the model (a click meanwhile reruns the page, as always); with
    wait=False (the sidebar, which the page's own call follows) Pending instead."""
    if models.is_kept(source):
        try:
            return _load(source)
        except Pending:          # evicted since, and converting again (its copy was damaged,
            pass                 # or another cache dir): the progress bar below
    try:
        with st.spinner(t("common.loading_model"), show_time=True):
            return _load(source)
    except Pending as pending:
        if not wait:
            raise
        job = pending.job
    bar = st.progress(job.fraction, text=t(job.stage))
    while not job.done.wait(PROGRESS_POLL):
        bar.progress(job.fraction, text=t(job.stage))
    bar.empty()
    if job.error is not None:
        raise job.error
    with st.spinner(t("common.loading_model"), show_time=True):
        return _load(source)


def check(spec: AttentionSpec) -> UserError | None:
    """Why the spec's model cannot show the spec's text and layer, or None. Loads the model."""
    if spec.source != "pretrained":
        return None
    try:
        loaded = ensure_model(spec.model_source)
        loaded.encode(spec.model_text)
        modelrun.check_layer(loaded, spec.layer)
    except UserError as err:
        return err
    return None


def pieces(source: str, text: str) -> tuple[models.LoadedModel, tuple[str, ...]]:
    """(the model, its pieces of `text` as the pages show them): the tokenizer only, no
    forward pass; UserError for a text the model cannot run (empty, too long)."""
    loaded = ensure_model(source)
    return loaded, loaded.pieces(loaded.encode(text)["input_ids"][0].tolist())


def report(source: str, text: str, hide_sinks: bool = False) -> modelrun.HeadsReport:
    """Every head of `text`, the per-head table (sinks included) and the rollout (kept in the
    byte-bounded store: a 32 x 32 model's weights are large)."""
    return cache.cached("model_report", (source, text, hide_sinks),
                        lambda: modelrun.heads_report(source, text, hide_sinks=hide_sinks))


def grid(source: str, text: str, hide_sinks: bool = False) -> bytes:
    """The all-heads grid figure of report(source, text, hide_sinks), packed, without its
    "current" head: built once per text and language (a pick only adds the frame:
    charts.canvas.amend)."""
    def build() -> bytes:
        shown = report(source, text, hide_sinks)
        cells = grid_cells_for(shown.shown.shape[0], GRID_CELLS)
        image, blocks = grid_image(shown.shown, cells)
        figure = grid_figure(image, blocks, grid_labels(shown.tokens, cells), lang())
        del figure["current"]
        return pack(figure)

    return cache.cached("grid_figure", (source, text, hide_sinks, lang()), build)


def value_weighted(source: str, text: str, layer: int, head: int):
    """(alpha (n, n), ||alpha f|| (n, n), ||f|| (n,)) of one head, or None."""
    return cache.cached("value_weighted", (source, text, layer, head),
                        lambda: modelrun.value_weighted(source, text, layer, head))


def _interventions(iv: str) -> tuple[models.Intervention, ...]:
    items, _ = ivlink.from_param(iv)
    return tuple(models.Intervention(*item) for item in items)


# Summaries only (a few rows each): the intervened runs themselves (layers x heads x n x n
# weights, n x vocab logits) are not kept.
def lm_outcome(source: str, text: str, iv: str, mask_at: int | None = None) -> modelrun.LmOutcome:
    """A language model's prediction before and after the interventions `iv` (the link's form)."""
    return cache.cached("lm_outcome", (source, text, iv, mask_at),
                        lambda: modelrun.lm_outcome(source, text, _interventions(iv),
                                                    mask_at=mask_at))


def embedding_outcome(source: str, text: str, iv: str, lines: tuple[str, ...]):
    """(cosine of the text's embeddings before/after, pairwise line cosines or None)."""
    return cache.cached("embedding_outcome", (source, text, iv, lines),
                        lambda: modelrun.embedding_outcome(source, text, _interventions(iv),
                                                           lines))
