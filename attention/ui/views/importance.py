"""The "Does the model use it?" page: token importance, head importance, pruning and a
temperature sweep on the loaded model, each heavy result cached per (model, texts) in the
server's byte-bounded store, and conclusions written from the frames on screen."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from attention import models

from attention.measures import flow
from attention import importance as imp
from attention.charts import importance as charts
from attention.errors import UserError
from attention.conclusions.importance import conclusions, fmt
from attention.ui import cache
from attention.ui.chart import show
from attention.ui.state import flag, view_widget
from attention.ui.text import lang, message, t

LAYER_KEY, WORDS_KEY = "imp_layer", "imp_words"


def model_source(spec) -> str:
    """The model the sidebar names (spec.model once the picker exists), else the bundled one."""
    return getattr(spec, "model", None) or models.BUNDLED


def texts_of(spec) -> tuple[str, ...]:
    """The sidebar's text, one text per non-empty line."""
    raw = getattr(spec, "model_text", None) or " ".join(spec.tokens)
    return tuple(line.strip() for line in raw.splitlines() if line.strip())


# Each frame once per (model, texts) on this server, in the byte-bounded store every page
# shares, computed in one of the gate's slots (these are the heaviest computations a visitor
# can ask for): a rerun, a toggle or another session with the same text reads it back.
def token_frame(source: str, texts: tuple[str, ...]) -> pd.DataFrame:
    return cache.cached("imp_tokens", (source, texts),
                        lambda: imp.token_importance(models.load_model(source), texts))


def head_frame(source: str, texts: tuple[str, ...]) -> pd.DataFrame:
    return cache.cached("imp_heads", (source, texts),
                        lambda: imp.head_importance(models.load_model(source), texts))


def pruning_frame(source: str, texts: tuple[str, ...], heads: pd.DataFrame) -> pd.DataFrame:
    """heads: head_frame(source, texts), which ranks the heads."""
    return cache.cached("imp_pruning", (source, texts),
                        lambda: imp.pruning_curve(models.load_model(source), heads, texts))


def sweep_frame(source: str, texts: tuple[str, ...], layer: int) -> pd.DataFrame:
    """texts is () for a sentence model: its metric is the project's sentence pairs."""
    return cache.cached("imp_sweep", (source, texts, layer), lambda: imp.temperature_sweep(
        models.load_model(source), texts, layers=(layer,)))


def agreement_table(agreement: pd.DataFrame, language: str) -> pd.DataFrame:
    """One row per layer, one column per (score, target) as shown on the page."""
    frame = agreement.assign(column=[
        f"{t(f'importance.score_{s}')} / {t(f'importance.target_{g}')}"
        for s, g in zip(agreement["score"], agreement["target"])])
    table = frame.pivot(index="layer", columns="column", values="spearman")
    order = list(dict.fromkeys(frame["column"]))
    return table[order].reset_index().rename(columns={"layer": t("importance.axis_layer")})


def draw_importance(spec) -> None:
    source = model_source(spec)
    texts = texts_of(spec)
    try:
        model = models.load_model(source)
    except UserError as err:
        st.error(message(err), icon=":material/error:")
        return
    st.markdown(t("importance.intro", model=model.name))
    if not texts:
        st.info(t("importance.no_text"), icon=":material/info:")
        return
    try:
        imp.check_texts(model, texts)
    except UserError as err:
        st.error(message(err), icon=":material/error:")
        return
    last = model.layers - 1
    layer = view_widget(LAYER_KEY, st.selectbox, default=last, cast=int,
                        valid=lambda value: 0 <= value <= last, label=t("importance.sweep_layer"),
                        options=list(range(model.layers)))
    words_only = view_widget(WORDS_KEY, st.toggle, default=False, cast=flag,
                             label=t("importance.words_only"), help=t("importance.words_only_help"))
    bar = st.progress(0.0, text=t("importance.progress_tokens"))
    try:
        tokens = token_frame(source, texts)
        agreement = imp.layer_agreement(tokens, words_only=words_only)
        bar.progress(0.3, text=t("importance.progress_heads"))
        heads = head_frame(source, texts)
        bar.progress(0.5, text=t("importance.progress_pruning"))
        pruning = pruning_frame(source, texts, heads)
        bar.progress(0.8, text=t("importance.progress_sweep", layer=layer))
        sweep = sweep_frame(source, texts if model.head != "none" else (), layer)
    except UserError as err:
        bar.empty()
        st.error(message(err), icon=":material/error:")
        return
    bar.empty()
    language = lang()
    draw_tokens(model, tokens, agreement, language)
    draw_heads(model, heads, pruning, language)
    draw_sweep(sweep, pruning["metric_name"].iloc[0], language)
    st.subheader(t("importance.conclusions_title"))
    for c in conclusions(agreement, heads, sweep, pruning):
        st.markdown(f"- {c.text(language)}")


def draw_tokens(model, tokens: pd.DataFrame, agreement: pd.DataFrame, language: str) -> None:
    st.subheader(t("importance.tokens_title"))
    st.caption(t("importance.tokens_help", output=t(f"importance.output_{model.head}"),
                 query=t("importance.query_last" if model.is_causal else "importance.query_first"),
                 cap=flow.MAX_PIECES))
    st.markdown(f"**{t('importance.agreement_table')}**")
    st.dataframe(agreement_table(agreement, language), hide_index=True, width="stretch")
    show(charts.agreement_chart(agreement, language), width="content")
    st.markdown(f"**{t('importance.token_table')}**")
    last = model.layers - 1
    shown = tokens[["text", "position", "token", "occlusion", "gradient",
                    f"attention_{last}", "rollout", "flow"]].rename(columns={
        "text": t("importance.col_text"), "position": t("importance.col_position"),
        "token": t("importance.col_token"), "occlusion": t("importance.target_occlusion"),
        "gradient": t("importance.target_gradient"),
        f"attention_{last}": f"{t('importance.score_attention')} L{last}",
        "rollout": t("importance.score_rollout"), "flow": t("importance.score_flow")})
    st.dataframe(shown, hide_index=True, width="stretch")


def draw_heads(model, heads: pd.DataFrame, pruning: pd.DataFrame, language: str) -> None:
    st.subheader(t("importance.heads_title"))
    change = t("importance.change_none" if model.head == "none" else "importance.change_lm")
    st.caption(t("importance.heads_help", output_change=change))
    show(charts.heads_chart(heads, language), width="content")
    st.markdown(t("importance.heads_spearman", heads=len(heads),
                  rho=fmt(imp.spearman(heads["ablation"], heads["max_weight"])),
                  rho_entropy=fmt(imp.spearman(heads["ablation"], heads["entropy"]))))
    st.subheader(t("importance.pruning_title"))
    metric = t(f"importance.metric_{pruning['metric_name'].iloc[0]}")
    st.caption(t("importance.pruning_help", metric=metric))
    show(charts.pruning_chart(pruning, language), width="content")


def draw_sweep(sweep: pd.DataFrame, metric_name: str, language: str) -> None:
    st.subheader(t("importance.sweep_title"))
    st.caption(t("importance.sweep_help", low=fmt(sweep["tau"].min()), high=fmt(sweep["tau"].max()),
                 metric=t(f"importance.metric_{metric_name}")))
    show(charts.sweep_chart(sweep, language), width="content")
