"""The real-models section of "Is sharper better?": the causal-LM sweeps' shipped results
(attention.sweeps.store, computed by the corpus job) and the sentence model's retrieval
sweeps (attention.sweeps.pairs), read without torch; a model picker (sh_model in the URL)
chooses which. The answer first (at most three sentences), then each chart with its one-line
finding.

    draw_real_models()
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from attention import config
from attention.charts import experiment_real as charts
from attention.conclusions import sweeps as conclusions
from attention.charts.size import FIT_PX
from attention.ui import cache
from attention.ui.chart import place, show
from attention.ui.export import chart_buttons, csv_button
from attention.ui.state import flag, view_expander, view_widget
from attention.ui.text import lang, t

MODEL = config.BUNDLED_LM
SENTENCE_MODEL = config.BUNDLED
CORPUS = "bundled:en"
PAIRS = "bundled:en"
MEASURES = ("max_weight", "entropy")
MEASURE_VIEW = "sh_measure"      # URL key (docs/architecture.md: sh_ on this page)
KINDS = ("lm", "sentence")       # the causal LM (next-piece loss), the sentence model (retrieval)
MODEL_VIEW = "sh_model"
LAYERS_VIEW = "sh_layers"        # the per-layer charts shown (a cold link draws fewer charts)
NUMBERS_VIEW = "sh_numbers"      # the summary tables' box open
HEADS_VIEW = "sh_heads"          # the two per-head charts shown (its sentence always is)
VIEWS = (MEASURE_VIEW, MODEL_VIEW, LAYERS_VIEW, NUMBERS_VIEW, HEADS_VIEW)   # this part's keys


@st.cache_data(max_entries=4, show_spinner=False)
def _tables(model: str, corpus: str) -> dict:
    from attention.corpus import load
    from attention.sweeps import store

    texts = load(corpus)
    return {name: store.read(model, corpus, texts, name)
            for name in ("summary", "heads", "agreement")}


def _section(title_key: str, caption: str, chart, name: str, finding: str | None,
             table=None) -> None:
    st.subheader(t(title_key))
    st.caption(caption)
    show(chart, width=FIT_PX)
    if finding:
        st.info(finding, icon=":material/insights:")
    chart_buttons(chart, name, table, key=f"menu_{name}")   # its buttons drawn when opened


@st.cache_data(max_entries=4, show_spinner=False)
def _pair_tables(model: str, source: str) -> tuple[dict, int]:
    from attention.corpus import pairs
    from attention.sweeps import pairs as sweeps

    got = pairs(source)
    return sweeps.read(model, source, got), len(got)


def _measure() -> str:
    return view_widget(MEASURE_VIEW, st.radio, default="max_weight", cast=str,
                       valid=MEASURES.__contains__, label=t("realsharp.sharpness_measure"),
                       options=MEASURES, horizontal=True,
                       format_func=lambda m: t(f"realsharp.measure_{m}"))


def _answer_and_quality(g, missing: str, answer, caption, chart, name: str) -> bool:
    """A model's answer (at most three sentences), the sharpness measure's picker and the
    sharpness-against-quality chart of its global summary `g`; False, after the warning
    `missing`, when nothing is shipped. answer() and caption() are called only when `g` has
    rows; chart(measure) makes the chart for the measure picked."""
    if g is None or not len(g):
        st.warning(missing)
        return False
    st.subheader(t("realsharp.answer"))
    st.markdown("\n".join(f"- {s}" for s in answer()))
    _section("realsharp.sec_quality", caption(), chart(_measure()), name, None, g)
    return True


def draw_real_models() -> None:
    code = lang()
    st.header(t("realsharp.title"))
    kind = view_widget(MODEL_VIEW, st.radio, default="lm", cast=str, valid=KINDS.__contains__,
                       label=t("realsharp.pick_model"), options=KINDS, horizontal=True,
                       format_func=lambda k: t(f"realsharp.model_{k}",
                                               model=MODEL if k == "lm" else SENTENCE_MODEL))
    layers_shown = view_widget(LAYERS_VIEW, st.toggle, default=False, cast=flag,
                               label=t("realsharp.show_layers"),
                               help=t("realsharp.show_layers_help"))
    if kind == "sentence":
        _draw_sentence_model(code, layers_shown)
        return
    st.markdown(t("realsharp.intro", model=MODEL))
    tables = _tables(MODEL, CORPUS)
    summary = tables["summary"]
    g = summary.get("global")
    shown = _answer_and_quality(
        g, t("realsharp.missing", model=MODEL), lambda: conclusions.answer(g, MODEL, code),
        lambda: t("realsharp.quality_caption", texts=int(g["texts"].max())),
        lambda m: cache.built(charts.quality_chart, g, code, m), "sharpness_quality")
    if not shown:
        return
    layers = summary.get("layers")
    texts = int(g["texts"].max())
    scales = g[g["family"].isin(["base", "scale"])]
    reference = _reference()
    _section("realsharp.sec_scale", t("realsharp.scale_caption", reference=reference, texts=texts),
             cache.built(charts.interval_bars, scales, code, "ppl", "ppl_lo", "ppl_hi",
                         t("realsharp.axis_ppl"), True), "scale_variants", None)
    rest = summary.get("layers_rest")          # the other variants, one layer at a time
    if rest is not None and (rest["family"] == "scale").any():
        with place():               # the per-layer charts: every chart below keeps its place
            if layers_shown:
                st.caption(t("realsharp.scale_layers_caption", texts=int(rest["texts"].max())))
                show(cache.built(charts.layer_chart, rest, "scale", code), width=FIT_PX)
        st.info(conclusions.scale_layers_sentence(rest, code), icon=":material/insights:")
    st.subheader(t("realsharp.sec_temperature"))
    st.caption(t("realsharp.temperature_caption"))
    show(cache.built(charts.tau_chart, g, code), width=FIT_PX)
    with place():
        if layers is None:
            st.caption(t("realsharp.layers_missing"))
        elif layers_shown:
            st.caption(t("realsharp.temperature_layers_caption",
                         texts=int(layers["texts"].max())))
            show(cache.built(charts.layer_chart, layers, "tau", code), width=FIT_PX)
    every_tau = layers if rest is None or layers is None else pd.concat([layers, rest])
    st.info(conclusions.temperature_sentence(g, every_tau, code), icon=":material/insights:")
    _draw_heads(tables, code)
    sinks = g[g["family"].isin(["base", "sinks"])]
    st.subheader(t("realsharp.sec_sinks"))
    st.caption(t("realsharp.sinks_caption"))
    show(cache.built(charts.interval_bars, sinks, code, "d_nll", "d_lo", "d_hi",
                     t("realsharp.axis_dnll")), width=FIT_PX)
    with place():
        if layers is not None and layers_shown:
            st.caption(t("realsharp.sinks_layers_caption"))
            show(cache.built(charts.layer_chart, layers, "sinks", code), width=FIT_PX)
    st.info(conclusions.sinks_sentence(g, layers, code), icon=":material/insights:")
    numbers = view_expander(NUMBERS_VIEW, t("realsharp.table"))
    if numbers.open:
        for name, frame in summary.items():
            numbers.dataframe(shown_summary(frame, code), hide_index=True, width="stretch")
            with numbers:
                csv_button(frame, f"{MODEL}_{name}_summary")


# The summary's columns as a reader sees them (the CSV keeps the ids)
SHOWN = ("texts", "pieces", "nll", "nll_lo", "nll_hi", "ppl", "ppl_lo", "ppl_hi", "d_nll",
         "d_lo", "d_hi", "max_weight", "mw_lo", "mw_hi", "entropy", "ent_lo", "ent_hi")


PAIR_SHOWN = ("pairs", "accuracy", "acc_lo", "acc_hi", "d_acc", "d_acc_lo", "d_acc_hi", "mrr",
              "mrr_lo", "mrr_hi", "d_mrr", "d_mrr_lo", "d_mrr_hi", "max_weight", "mw_lo",
              "mw_hi", "entropy", "ent_lo", "ent_hi")


def shown_summary(frame, code: str, columns=SHOWN):
    """One row per setting, named in words, with translated headers."""
    shown = frame[[c for c in columns if c in frame]].copy()
    shown.insert(0, "setting", [conclusions.setting_name(r, code) for _, r in frame.iterrows()])
    return shown.rename(columns={c: t(f"realsharp.col_{c}") for c in shown.columns})


def _draw_heads(tables: dict, code: str) -> None:
    per_head = tables["heads"].get("heads")
    agree = tables["agreement"].get("heads")
    st.subheader(t("realsharp.sec_heads"))
    if per_head is None or agree is None:
        st.caption(t("realsharp.heads_missing"))
        return
    shown = view_widget(HEADS_VIEW, st.toggle, default=False, cast=flag,
                        label=t("realsharp.show_heads", heads=len(per_head)))
    with place():                   # the sinks' charts below keep their places
        if shown:
            st.caption(t("realsharp.heads_caption", heads=len(per_head),
                         texts=int(per_head["texts"].max())))
            show(cache.built(charts.heads_chart, per_head, code), width=FIT_PX)
            show(cache.built(charts.agreement_chart, agree, code), width=FIT_PX)
    st.info(conclusions.heads_sentence(agree, per_head, code), icon=":material/insights:")


def _reference() -> float:
    """The Scalable-Softmax reference length: the corpus's mean pieces per text, shipped in
    the global sweep's summary as the mean of (pieces / texts + 1)."""
    g = _tables(MODEL, CORPUS)["summary"]["global"]
    base = g[g["family"] == "base"].iloc[0]
    return float(base["pieces"]) / float(base["texts"]) + 1.0


def _draw_sentence_model(code: str, layers_shown: bool) -> None:
    """The sentence model: paraphrase retrieval over the whole pair set under each setting."""
    name = SENTENCE_MODEL
    summary, count = _pair_tables(name, PAIRS)
    st.markdown(t("realsharp.intro_pairs", model=name, pairs=count, sentences=2 * count))
    st.caption(t("realsharp.pairs_chinese", model=name))
    g = summary.get("global")
    shown = _answer_and_quality(
        g, t("realsharp.pairs_missing", model=name),
        lambda: conclusions.pairs_answer(g, name, code),
        lambda: t("realsharp.pairs_quality_caption", pairs=int(g["pairs"].max())),
        lambda m: cache.built(charts.quality_chart, g, code, m, charts.ACCURACY),
        "sharpness_retrieval")
    if not shown:
        return
    layers = summary.get("layers")
    pairs = int(g["pairs"].max())
    base = g[g["family"] == "base"].iloc[0]
    reference = float(base["pieces"]) / (2 * pairs)       # mean pieces per sentence of the set
    _section("realsharp.sec_scale", t("realsharp.pairs_scale_caption", reference=reference,
                                      pairs=pairs),
             cache.built(charts.interval_bars, g[g["family"].isin(["base", "scale"])], code,
                         "accuracy", "acc_lo", "acc_hi", t("realsharp.axis_accuracy"),
                         False, "pairs"),
             "scale_variants_retrieval", conclusions.pairs_scale_sentence(g, code))
    st.subheader(t("realsharp.sec_temperature"))
    st.caption(t("realsharp.pairs_temperature_caption"))
    show(cache.built(charts.tau_chart, g, code, charts.ACCURACY), width=FIT_PX)
    with place():                   # the summary tables' box below keeps its place
        if layers is None:
            st.caption(t("realsharp.layers_missing"))
        elif layers_shown:
            st.caption(t("realsharp.pairs_temperature_layers_caption",
                         pairs=int(layers["pairs"].max())))
            show(cache.built(charts.layer_chart, layers, "tau", code,
                             ("d_acc", "d_acc_lo", "d_acc_hi", "axis_dacc", "pairs")),
                 width=FIT_PX)
    st.info(conclusions.pairs_temperature_sentence(g, layers, code), icon=":material/insights:")
    numbers = view_expander(NUMBERS_VIEW, t("realsharp.table"))
    if numbers.open:
        for sweep, frame in summary.items():
            numbers.dataframe(shown_summary(frame, code, PAIR_SHOWN), hide_index=True,
                              width="stretch")
            with numbers:
                csv_button(frame, f"{name}_{sweep}_retrieval_summary")
