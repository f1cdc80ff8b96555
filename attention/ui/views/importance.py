"""The "Does the model use it?" page: over a corpus (bundled:en by default, bundled:zh, the
sidebar's lines or an upload), attention against occlusion with intervals and null bands,
faithfulness curves, head importance per layer, the pruning curve beside random orders, the
temperature sweep's paired differences, and conclusions written from the intervals. The
answer comes first: at most three sentences above the charts (conclusions.answer), the
unknown-piece share first where the model cannot read most of the corpus; the detail below.

Every frame comes from attention.importance.store.results: the server's byte-bounded
store, then the disk cache (keyed by model, corpus digest, settings and code), then the files
shipped with the code (the default view: bundled:en's first texts on the bundled model), and
only then computed, with st.progress. A cold link to the default view reads and computes
nothing, and imports neither torch nor the model (docs/architecture.md, "Imports").
View settings live in the URL: imp_corpus, imp_words, imp_tables, imp_layer."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pandas as pd
import streamlit as st

from attention import config
from attention.text import corpora
from attention.charts import importance as charts
from attention.charts.size import FIT_PX
from attention.conclusions import unknown
from attention.conclusions.answer import answer
from attention.conclusions.importance import conclusions
from attention.errors import UserError
from attention.importance import store
from attention.ui import cache, estimate
from attention.ui.chart import place, show
from attention.ui.state import flag, view_widget
from attention.ui.text import lang, message, t

if TYPE_CHECKING:
    from attention.charts.vega import Figure

CORPUS_KEY, WORDS_KEY, LAYER_KEY, TABLES_KEY = "imp_corpus", "imp_words", "imp_layer", "imp_tables"
CORPORA = ("bundled:en", "bundled:zh", "sidebar", "upload")
UPLOAD_KEY = "imp_upload"
FAITH_SHOWN = ("occlusion", "gradient", "integrated_gradients", "attention", "rollout", "flow",
               "norm", "random", "position_start")


def model_source(spec) -> str:
    """The model the sidebar names (spec.model once the picker exists), else the bundled one."""
    return getattr(spec, "model", None) or config.BUNDLED


def texts_of(spec) -> tuple[str, ...]:
    """The sidebar's text, one text per non-empty line."""
    raw = getattr(spec, "model_text", None) or " ".join(spec.tokens)
    return tuple(line.strip() for line in raw.splitlines() if line.strip())


def corpus_texts(choice: str, spec) -> tuple[str, list[str]] | None:
    """(what to call the corpus, all its texts) for the choice; None while an upload is
    awaited. UserError for a refused file."""
    if choice in ("bundled:en", "bundled:zh"):
        return choice, corpora.load(choice)
    if choice == "sidebar":
        return t("importance.corpus_sidebar"), list(texts_of(spec))
    upload = st.file_uploader(t("importance.upload"), type=["txt", "csv", "jsonl"],
                              key=UPLOAD_KEY)
    column = st.text_input(t("importance.upload_column"), key="imp_upload_column") or None
    if upload is None:
        st.info(t("importance.upload_first"), icon=":material/upload_file:")
        return None
    return upload.name, corpora.from_upload(upload.name, upload.getvalue(), column)


def results(source: str, texts: tuple[str, ...], digest: str, note):
    """Every frame of the page for (model, texts whose corpora.digest is `digest`): kept by
    the server, stored on disk or shipped, else computed here with a progress bar, its time
    estimated first and reported after in `note` (an st.empty)."""
    what = ("importance", source, digest)

    def compute():
        from attention.importance import live     # torch: only to compute ("Imports")

        seconds, probed = expected(source, texts)
        estimate.before(note, seconds, probed)
        bar = st.progress(0.0, text=t("importance.progress", texts=len(texts),
                                      stage=t("importance.stage_tokens")))

        def progress(fraction: float, stage: str) -> None:
            bar.progress(min(max(fraction, 0.0), 1.0),
                         text=t("importance.progress", texts=len(texts),
                                stage=t(f"importance.stage_{stage}")))
        timings: dict[str, float] = {}
        try:
            record, took = estimate.timed(
                lambda: live.compute(source, list(texts), progress, timings))
        finally:
            bar.empty()
        units = live.work(source, list(texts)) if timings else {}
        for stage, spent in timings.items():
            estimate.RATES.record(("importance", source, stage), spent, units.get(stage, 0))
        estimate.after(note, what, took, seconds)
        return record
    got = cache.cached("imp_results", what[1:], lambda: store.results(source, texts, compute))
    estimate.show(note, what)
    return got


def expected(source: str, texts) -> tuple[float, bool]:
    """(seconds the computation should take, whether a probe timed just now gave the rate):
    each stage's units times its rate from an earlier run on this server, else the probe's
    forward pass times the stage's calibration (live.FORWARDS)."""
    from attention.importance import live

    units = live.work(source, list(texts))
    rates = {stage: estimate.RATES.rate(("importance", source, stage)) for stage in units}
    probed = any(rates[s] is None for s in units if units[s])
    forward = live.probe(source, texts) if probed else 0.0
    seconds = sum(u * (rates[s] if rates[s] is not None else forward * live.FORWARDS[s])
                  for s, u in units.items())
    return seconds, probed


def draw_importance(spec) -> None:
    try:        # the policy's check only: a stored view needs no model (its record names it)
        source = config.permit(model_source(spec))
    except UserError as err:
        st.error(message(err), icon=":material/error:")
        return
    intro = st.empty()
    labels = {c: t(f"importance.corpus_{c.replace(':', '_')}") for c in CORPORA}
    left, right = st.columns([1, 1])
    with left:
        choice = view_widget(CORPUS_KEY, st.selectbox, default="bundled:en", cast=str,
                             valid=lambda v: v in CORPORA, label=t("importance.corpus"),
                             options=list(CORPORA), format_func=labels.get)
        fixed_note = st.empty()          # what does not follow the corpus (once it is known)
    with right:
        words_only = view_widget(WORDS_KEY, st.toggle, default=True, cast=flag,
                                 label=t("importance.words_only"),
                                 help=t("importance.words_only_help"))
        # Off by default: the two tables repeat the charts' numbers, and the first table on a
        # page loads the data grid (0.28 s of a shared link's first paint: docs/performance.md)
        tables = view_widget(TABLES_KEY, st.toggle, default=False, cast=flag,
                             label=t("importance.tables"), help=t("importance.tables_help"))
    try:
        got = corpus_texts(choice, spec)
    except UserError as err:
        st.error(message(err), icon=":material/error:")
        return
    if got is None:
        return
    name, everything = got
    texts = tuple(store.measured(source, choice, everything))
    if not texts:
        st.info(t("importance.no_text"), icon=":material/info:")
        return
    note = st.empty()
    digest = corpora.digest(list(texts))
    try:
        record = results(source, texts, digest, note)
    except (UserError, ValueError) as err:
        st.error(message(err) if isinstance(err, UserError) else str(err),
                 icon=":material/error:")
        return
    frames, about = record.frames, record.values      # about: model, layers, head (its name)
    language = lang()

    def figure(name: str, build) -> Figure:
        """A chart of these results, built once per server (every click redraws the page)."""
        return cache.figure(("importance", source, digest, language, name), build)
    intro.markdown(t("importance.intro", model=about["model"]))
    tokens = frames["tokens"]
    special = int(tokens["special"].astype(bool).sum())
    scope = (t("importance.scope_whole") if len(texts) == len(everything) else
             t("importance.scope_first", total=len(everything), limit=store.PAGE_TEXTS))
    st.markdown(t("importance.corpus_count" if words_only else "importance.corpus_count_all",
                  used=len(texts), source=name, scope=scope,
                  pieces=len(tokens) - special if words_only else len(tokens), special=special))
    unreadable = unknown.sentence(unknown.count(tokens), about["model"], "importance")
    if unreadable.key == "low":          # high: the answer's first sentence, detail below
        st.markdown(unreadable.text(language))
    if source == config.BUNDLED and any(list(texts) == store.shipped_texts(c)
                                        for c in store.SHIPPED_CORPORA):
        st.caption(t("importance.shipped_note"))
    pruning = frames["pruning"]
    if "units" in pruning and str(pruning["metric_name"].iloc[0]) == "retrieval_accuracy":
        fixed_note.caption(t("importance.corpus_fixed_note", units=int(pruning["units"].iloc[0])))
    agreement = frames["agreement_words" if words_only else "agreement_all"]
    sharp = frames["sharpness"]
    sharp = sharp[(sharp["importance"] == "ablation") & (sharp["sharpness"] == "max_weight")]
    measured = int(record.values.get("head_texts", len(texts)))      # heads: the first ones
    words = "words" if words_only else "all"
    draw_answer(cache.kept("importance_answer", (source, digest, words), lambda: answer(
        agreement[agreement["texts"] > 0], sharp, measured, unreadable)), language)
    draw_agreement(about["head"], agreement, language, tables,
                   lambda name, build: figure(f"{name}_{words}", build))
    draw_faithfulness(frames["faithfulness"], language, tables, figure)
    draw_heads(frames["heads"], sharp, measured, language, figure)
    draw_pruning(pruning, language, figure)
    sweep, layer = draw_sweep(int(about["layers"]), frames["sweep"], language, figure)
    st.subheader(t("importance.conclusions_title"))
    first = [unreadable] if unreadable.key != "low" else []     # what the numbers describe
    for c in first + cache.kept("importance_conclusions", (source, digest, words, layer),
                                lambda: conclusions(agreement, frames["faithfulness"], sharp,
                                                    pruning, sweep, texts=measured)):
        st.markdown(f"- {c.text(language)}")


def draw_answer(sentences: list, language: str) -> None:
    """The answer first: at most three sentences above the charts (conclusions.answer)."""
    if not sentences:
        return
    with st.container(border=True):
        st.subheader(t("importance.answer_title"))
        for c in sentences:
            st.markdown(c.text(language))


def agreement_table(agreement: pd.DataFrame, language: str) -> pd.DataFrame:
    """The agreement frame as the page shows it: one row per method and layer."""
    shown = charts.labelled(agreement, language)
    return pd.DataFrame({
        t("importance.col_method"): shown["label"],
        t("importance.col_rho"): shown["spearman"],
        t("importance.col_ci_low"): shown["ci_low"], t("importance.col_ci_high"): shown["ci_high"],
        t("importance.col_null_low"): shown["null_low"],
        t("importance.col_null_high"): shown["null_high"],
        t("importance.col_texts"): shown["texts"], t("importance.col_pieces"): shown["pieces"]})


def draw_agreement(head: str, agreement: pd.DataFrame, language: str, table: bool,
                   figure: Callable) -> None:
    """head: the model's output head (LoadedModel.head), which names the attention readout;
    table: the chart's numbers as a table under it too; figure(name, build): the chart
    build() makes, kept for the next rerun under name."""
    st.subheader(t("importance.agreement_title"))
    st.caption(t("importance.agreement_help", n_boot=1000,
                 readout=t(f"importance.readout_{head}")))
    agreement = agreement[agreement["texts"] > 0]     # rows no text could rank (too few pieces)
    if agreement.empty:
        st.info(t("importance.agreement_none"), icon=":material/info:")
        return
    show(figure("agreement", lambda: charts.agreement_chart(agreement, language)), width=FIT_PX)
    with place():
        if table:
            st.markdown(f"**{t('importance.agreement_table')}**")
            st.dataframe(agreement_table(agreement, language), hide_index=True, width="stretch",
                         column_config={t(f"importance.col_{c}"): st.column_config.NumberColumn(
                             format="%.3f") for c in ("rho", "ci_low", "ci_high", "null_low",
                                                      "null_high")})


def draw_faithfulness(faith: pd.DataFrame, language: str, table: bool,
                      figure: Callable) -> None:
    """figure(name, build): the chart build() makes, kept for the next rerun under name."""
    st.subheader(t("importance.faith_title"))
    faith = faith[faith["texts"] > 0]                 # methods no text could be measured on
    if faith.empty:
        st.info(t("importance.agreement_none"), icon=":material/info:")
        return
    fractions = ", ".join(f"{100 * f:.0f}%" for f in sorted(faith["fraction"].unique()))
    st.caption(t("importance.faith_help", fractions=fractions, texts=int(faith["texts"].max())))
    last = faith["layer"].max()
    shown = {(m, None) for m in FAITH_SHOWN} | {(m, int(last)) for m in FAITH_SHOWN}
    show(figure("faithfulness", lambda: charts.faithfulness_chart(faith, language, shown)),
         width=FIT_PX)
    with place():
        if table:
            per = charts.labelled(faith.drop_duplicates(subset=["method", "layer"]), language)
            st.markdown(f"**{t('importance.faith_table')}**")
            st.dataframe(pd.DataFrame({
                t("importance.col_method"): per["label"], t("importance.col_aopc"): per["aopc"],
                t("importance.col_ci_low"): per["aopc_low"],
                t("importance.col_ci_high"): per["aopc_high"],
                t("importance.col_texts"): per["texts"]}), hide_index=True, width="stretch")


def draw_heads(heads: pd.DataFrame, sharp: pd.DataFrame, texts: int, language: str,
               figure: Callable) -> None:
    st.subheader(t("importance.heads_title"))
    st.caption(t("importance.heads_help", texts=texts))
    show(figure("heads", lambda: charts.heads_chart(heads, language)), width=FIT_PX)
    st.subheader(t("importance.sharp_title"))
    st.caption(t("importance.sharp_help", heads=int(heads.groupby("layer").size().max())))
    if len(sharp):
        show(figure("sharpness", lambda: charts.sharpness_chart(sharp, language)), width=FIT_PX)


def draw_pruning(pruning: pd.DataFrame, language: str, figure: Callable) -> None:
    st.subheader(t("importance.pruning_title"))
    metric = t(f"importance.metric_{pruning['metric_name'].iloc[0]}")
    st.caption(t("importance.pruning_help", orders=int(pruning["orders"].iloc[0]), metric=metric))
    show(figure("pruning", lambda: charts.pruning_chart(pruning, language)), width=FIT_PX)


def draw_sweep(layers: int, sweep: pd.DataFrame, language: str,
               figure: Callable) -> tuple[pd.DataFrame, int]:
    """The chosen layer of the model's `layers` (?imp_layer=, default the last); returns the
    sweep's rows for it and the layer."""
    st.subheader(t("importance.sweep_title"))
    last = layers - 1
    layer = view_widget(LAYER_KEY, st.selectbox, default=last, cast=int,
                        valid=lambda value: 0 <= value <= last, label=t("importance.sweep_layer"),
                        options=list(range(layers)))
    rows = sweep[sweep["layer"] == layer]
    st.caption(t("importance.sweep_help",
                 metric=t(f"importance.metric_{sweep['metric_name'].iloc[0]}")))
    show(figure(f"sweep_{layer}", lambda: charts.sweep_chart(rows, language)), width=FIT_PX)
    return rows, layer
