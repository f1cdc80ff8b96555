"""Interventions that reach the output (Model heads page): pick heads and a change to their
attention; the model runs again with it inside its forward pass, and the page shows what it
does differently, by the kind of model:

    causal LM    the next token's top 5 before and after, their KL divergence, each token's loss
    masked LM    the top 5 at a masked position before and after, their KL divergence
    embeddings   the cosine between the text's embeddings before and after, each line's (one
                 sentence per line), and how the similarities between the lines change

and, for every kind, what changed inside: the named heads' sharpness (max weight, entropy)
beside the output's change, and a changed head's attention before and after
(intervene_show).

The interventions live in the URL as `mh_iv` (attention/models/links.py), the masked position
as `mh_ivpos`. A link whose interventions are not one kind on a set of layers x heads (hand-written)
is applied as it is until a widget here changes.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from attention.config import COMPARE_MAX_SENTENCES
from attention.models import links as ivlink
from attention.models import outcomes
from attention.errors import UserError
from attention.models import KINDS
from attention.ui import model as cached
from attention.ui.views import intervene_show as shown
from attention.ui.state import view_widget
from attention.ui.text import message, t

PARAM, POS_PARAM = "mh_iv", "mh_ivpos"   # the Model heads page's keys (model_view.PREFIX)
KIND, LAYERS, HEADS, TAU, CUSTOM = "iv_kind", "iv_layers", "iv_heads", "iv_tau", "iv_custom"
ALL = "*"
MAX_SENTENCES = COMPARE_MAX_SENTENCES


def draw_interventions(loaded, source: str, text: str, tokens: tuple[str, ...]) -> None:
    """The section; `tokens` are the model's pieces of `text` (the page's report)."""
    st.subheader(t("model.iv_title"))
    st.caption(t("model.iv_help"))
    iv = pick_interventions(loaded)
    if not iv:
        st.info(t("model.iv_none"), icon=":material/info:")
        return
    try:
        if loaded.head == "causal_lm":
            draw_causal(source, text, iv, tokens)
        elif loaded.head == "masked_lm":
            draw_masked(loaded, source, text, iv, tokens)
        else:
            draw_embedding(source, text, iv, tokens)
    except UserError as err:
        st.error(message(err), icon=":material/error:")


# ---- the picker and the link ------------------------------------------------------------

def _seed(loaded) -> None:
    """Fill the widgets from the link's `iv` once per session (warnings for what is dropped)."""
    items, problems = ivlink.from_param(st.query_params.get(PARAM, ""))
    kept = []
    for item in items:
        kind, layer, head, _ = item
        if layer is not None and layer >= loaded.layers:
            problems.append(UserError("model.bad_layer", layer=layer, last=loaded.layers - 1,
                                      name=loaded.name))
        elif head is not None and head >= loaded.heads:
            problems.append(UserError("model.bad_head", head=head, last=loaded.heads - 1,
                                      name=loaded.name))
        else:
            kept.append(item)
    for problem in problems:
        st.warning(message(problem), icon=":material/link_off:")
    state = st.session_state
    state[KIND] = kept[0][0] if kept else "ablate"
    state[LAYERS] = sorted({ALL if i[1] is None else i[1] for i in kept}, key=str)
    state[HEADS] = sorted({ALL if i[2] is None else i[2] for i in kept}, key=str)
    taus = [i[3] for i in kept if i[3] is not None]
    state[TAU] = float(taus[0]) if taus else 2.0
    literal = ivlink.to_param(_as_ivs(kept))
    state[CUSTOM] = literal if literal != _from_widgets() else ""


class _Item:
    def __init__(self, kind, layer, head, value):
        self.kind, self.layer, self.head, self.value = kind, layer, head, value


def _as_ivs(items):
    return [_Item(*i) for i in items]


def _from_widgets() -> str:
    """The interventions the widgets describe, in the link's canonical form."""
    state = st.session_state
    kind = state[KIND]
    layers = [None] if ALL in state[LAYERS] else sorted(state[LAYERS])
    heads = [None] if ALL in state[HEADS] else sorted(state[HEADS])
    value = float(state[TAU]) if kind == "temperature" else None
    return ivlink.to_param(_as_ivs((kind, layer, head, value) for layer in layers
                                   for head in heads))


def _edited() -> None:
    st.session_state[CUSTOM] = ""


def pick_interventions(loaded) -> str:
    """Kind, layers and heads (and tau) -> the iv string in effect, written to the URL."""
    if KIND not in st.session_state or st.session_state.get("iv_model") != loaded.source:
        _seed(loaded)
        st.session_state["iv_model"] = loaded.source
    layer_options = [ALL, *range(loaded.layers)]
    head_options = [ALL, *range(loaded.heads)]
    st.session_state[LAYERS] = [v for v in st.session_state[LAYERS] if v in layer_options]
    st.session_state[HEADS] = [v for v in st.session_state[HEADS] if v in head_options]
    cols = st.columns([1, 1, 1, 1])
    cols[0].selectbox(t("model.iv_kind"), KINDS, key=KIND, on_change=_edited,
                      format_func=lambda k: t(f"model.iv_kind_{k}"))
    # no "Select all" of Streamlit's beside the lists' own "All layers" / "All heads"
    cols[1].multiselect(t("model.iv_layers"), layer_options, key=LAYERS, on_change=_edited,
                        format_func=lambda v: t("model.iv_all_layers") if v == ALL else str(v),
                        select_all=False, placeholder=t("model.iv_pick_layers"))
    cols[2].multiselect(t("model.iv_heads"), head_options, key=HEADS, on_change=_edited,
                        format_func=lambda v: t("model.iv_all_heads") if v == ALL else str(v),
                        select_all=False, placeholder=t("model.iv_pick_heads"))
    if st.session_state[KIND] == "temperature":
        cols[3].number_input(t("model.iv_tau"), min_value=0.01, max_value=100.0, step=0.5,
                             key=TAU, on_change=_edited, help=t("model.iv_tau_help"))
    iv = st.session_state[CUSTOM] or _from_widgets()
    if st.session_state[CUSTOM]:
        st.caption(t("model.iv_custom", iv=iv))
    if iv:
        st.query_params[PARAM] = iv
    elif PARAM in st.query_params:
        del st.query_params[PARAM]
    return iv


# ---- what changes, by kind of model ------------------------------------------------------

def _table(frame: pd.DataFrame, numbers=()) -> None:
    """An outcome table with localised column names, numbers to 4 decimals."""
    st.dataframe(frame.rename(columns={c: t(f"model.iv_col_{c}") for c in frame.columns}),
                 hide_index=True, width="stretch",
                 column_config={t(f"model.iv_col_{c}"): st.column_config.NumberColumn(
                     format="%.4f") for c in numbers})


def _kl(outcome) -> tuple[str, str, None, str]:
    return t("model.iv_kl"), f"{outcome.kl:.4f}", None, t("model.iv_kl_help")


def draw_causal(source: str, text: str, iv: str, tokens: tuple[str, ...]) -> None:
    """The next piece's top 5, the KL and the mean loss beside the named heads' sharpness;
    each piece's loss; the changed heads' attention before and after."""
    outcome = cached.lm_outcome(source, text, iv)
    table = outcome.losses
    output = [_kl(outcome)]
    if table is not None:
        before, after = table["loss_before"].mean(), table["loss_after"].mean()
        output += [(t("model.iv_loss_before"), f"{before:.4f}", None, t("model.iv_loss_help")),
                   (t("model.iv_loss_after"), f"{after:.4f}", f"{after - before:+.4f}",
                    t("model.iv_loss_help"))]
    shown.sharpness_beside_output(outcome.attention, output)
    st.markdown(t("model.iv_next", token=outcome.token))
    _table(outcome.top, ("p_before", "p_before_after", "p_after"))
    if table is not None:
        shown.losses(table, tokens)
        with st.expander(t("model.iv_loss_table")):
            _table(table, ("loss_before", "loss_after", "change"))
    shown.attention_change(outcome.attention, tokens)


def draw_masked(loaded, source: str, text: str, iv: str, tokens: tuple[str, ...]) -> None:
    mask_id = getattr(loaded.tokenizer, "mask_token_id", None)
    if mask_id is None:
        st.info(t("model.iv_no_mask"), icon=":material/info:")
        return
    ids = loaded.tokenizer.convert_tokens_to_ids(list(tokens))
    present = [i for i, token_id in enumerate(ids) if token_id == mask_id]
    if present:
        mask_at = None
        st.caption(t("model.iv_mask_present", token=loaded.tokenizer.mask_token,
                     position=present[0]))
    else:
        words = [i for i, token_id in enumerate(ids) if token_id not in loaded.special_ids]
        if not words:
            st.info(t("model.iv_no_words"), icon=":material/info:")
            return
        mask_at = view_widget(POS_PARAM, st.selectbox, default=words[len(words) // 2],
                              cast=int, valid=lambda v: v in words, label=t("model.iv_mask_at"),
                              options=words, width=300,
                              format_func=lambda i: f"{tokens[i]} ·{i}")
    outcome = cached.lm_outcome(source, text, iv, mask_at)
    shown.sharpness_beside_output(outcome.attention, [_kl(outcome)])
    st.markdown(t("model.iv_masked", token=outcome.token, position=outcome.position))
    _table(outcome.top, ("p_before", "p_before_after", "p_after"))
    shown.attention_change(outcome.attention, tokens)


def draw_embedding(source: str, text: str, iv: str, tokens: tuple[str, ...]) -> None:
    """The text's cosine beside the named heads' sharpness; each line's cosine and every
    pair's similarity before and after; the changed heads' attention before and after."""
    lines = tuple(outcomes.sentences(text, MAX_SENTENCES))
    outcome = cached.embedding_outcome(source, text, iv, lines)
    shown.sharpness_beside_output(outcome.attention, [
        (t("model.iv_cosine"), f"{outcome.cosine:.4f}", None, t("model.iv_cosine_help"))])
    if outcome.pairs is None:
        st.caption(t("model.iv_one_line"))
    else:
        shown.sentences(outcome.lines)
        st.markdown(t("model.iv_pairs", count=len(lines)))
        _table(outcome.pairs, ("cos_before", "cos_after", "change"))
    shown.attention_change(outcome.attention, tokens)
