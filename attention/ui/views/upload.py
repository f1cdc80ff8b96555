"""The "Bring your own" part of the Model heads page: upload Q and K (and V) or a ready
attention matrix, and see them with the same views. Parsing and checks are in
attention.files.upload; attention of uploaded Q/K is computed by core.attention through
analysis.analyze_qkv.
"""
from __future__ import annotations

import streamlit as st

from attention.measures import heads as headstats

from attention.files import upload
from attention.analysis import Analysis
from attention.charts import model as charts
from attention.errors import UserError
from attention.spec import AttentionSpec
from attention.ui import cache
from attention.ui.chart import show
from attention.ui.export import csv_button
from attention.ui.views.heatmap import controls_row, draw_comparison, head_picker, options_menu
from attention.ui.state import view_widget
from attention.ui.text import lang, message, t

KINDS = ("qkv", "matrix")
TYPES = list(upload.EXTENSIONS)
PREFIX = "up"
KEPT = f"{PREFIX}_kept_"   # + an uploader's key: its last file, kept for the session
EXAMPLES_KEY = f"{PREFIX}_examples"   # the example files' expander, open or not
EXAMPLE_WEIGHT_CELLS = 4 * 2**20   # weights.npy example: up to 16 MB (every head's n x n weights)


def _qkv_analysis(spec: AttentionSpec, q, k, v, typed: str) -> Analysis:
    """Uploaded (name, bytes) Q, K, V analysed once per content (hashes of the files' bytes)."""
    key = (*cache.spec_key(spec), *map(cache.file_key, (q, k, v)), typed)
    return cache.cached("upload_qkv", key, lambda: upload.qkv_analysis(spec, q, k, v, typed))


def _matrix(w, typed: str, fallback: tuple[str, ...]):
    return cache.cached("upload_matrix", (cache.file_key(w), typed, fallback),
                        lambda: upload.matrix_upload(w, typed, fallback))


def _file(label_key: str, key: str) -> tuple[str, bytes] | None:
    """(name, bytes) of the file in uploader `key`, else the one it held before another part
    of the page was opened (an uploader that is not drawn forgets its file); None without."""
    f = st.file_uploader(t(label_key), type=TYPES, key=key, help=t("model.upload_file_help"),
                         on_change=_keep, args=(key,))
    if f is not None:
        return f.name, f.getvalue()
    kept = st.session_state.get(KEPT + key)
    if kept is not None:
        with st.container(horizontal=True, vertical_alignment="center", gap="small"):
            st.text(t("model.upload_kept", name=kept[0]),         # a file name: never markdown
                    help=t("model.upload_kept_help"))
            st.button(t("model.upload_forget"), key=f"{key}_forget", type="tertiary",
                      icon=":material/close:", on_click=st.session_state.pop,
                      args=(KEPT + key, None))
    return kept


def _keep(key: str) -> None:
    """An uploader's change: keep its file for the session (at most the server's
    maxUploadSize, 20 MB, a file: as much as the uploader's own copy held while the upload
    part was always drawn), or forget it when the user removed it."""
    f = st.session_state.get(key)
    if f is None:
        st.session_state.pop(KEPT + key, None)
    else:
        st.session_state[KEPT + key] = (f.name, f.getvalue())


def draw_upload_part(spec: AttentionSpec) -> None:
    st.caption(t("model.upload_intro"))
    kind = view_widget(f"{PREFIX}_kind", st.segmented_control, default="qkv", cast=str,
                       valid=KINDS.__contains__, label=t("model.upload_kind"), options=KINDS,
                       required=True, format_func=lambda k: t(f"model.upload_kind_{k}"))
    typed = st.text_area(t("model.upload_tokens"), key=f"{PREFIX}_tokens", height=80,
                         help=t("model.upload_tokens_help"))
    if kind == "qkv":
        _draw_qkv(spec, typed)
    else:
        _draw_matrix(spec, typed)
    _draw_examples(spec)


def _draw_qkv(spec: AttentionSpec, typed: str) -> None:
    cols = st.columns(3)
    files = {}
    for col, name in zip(cols, ("q", "k", "v")):
        with col:
            files[name] = _file(f"model.upload_{name}", f"{PREFIX}_{name}")
    if files["q"] is None or files["k"] is None:
        st.info(t("model.upload_waiting_qk"), icon=":material/upload_file:")
        return
    try:
        with st.spinner(t("common.computing")):
            analysis = _qkv_analysis(spec, files["q"], files["k"], files["v"], typed)
    except UserError as err:
        st.error(message(err), icon=":material/error:")
        return
    st.success(t("model.upload_ok_qkv", heads=analysis.heads, n=analysis.n,
                 d_k=analysis.q.shape[-1]), icon=":material/check_circle:")
    with controls_row(spread=False):          # a bar as the other heatmaps have: head, Options
        head = head_picker(analysis, key_prefix=PREFIX)
        options = options_menu(PREFIX)
    draw_comparison(analysis, head, key_prefix=PREFIX, options=options)


def _draw_matrix(spec: AttentionSpec, typed: str) -> None:
    w = _file("model.upload_matrix", f"{PREFIX}_w")
    if w is None:
        st.info(t("model.upload_waiting_matrix"), icon=":material/upload_file:")
        return
    try:
        tokens, weights = _matrix(w, typed, spec.tokens)                # (heads, n, n)
    except UserError as err:
        st.error(message(err), icon=":material/error:")
        return
    heads, n = weights.shape[0], weights.shape[-1]
    st.success(t("model.upload_ok_matrix", heads=heads, n=n), icon=":material/check_circle:")
    head = view_widget(f"{PREFIX}_whead", st.selectbox, default=0, cast=int,
                       valid=lambda h: 0 <= h < heads, label=t("model.head"),
                       options=list(range(heads)), width=200)
    frame = charts.matrix_frame(weights[head], tokens)
    show(charts.matrix_chart(frame, tokens, lang(), value_title=t("model.weight")),
                    width="content")
    csv_button(frame, f"uploaded_head{head}", key=f"{PREFIX}_csv_w")
    st.subheader(t("model.upload_stats_title"))
    table = headstats.head_table(weights[None], tokens).drop(columns="layer")
    names = {c: t(f"model.col_{c}") for c in ("head", *headstats.HEAD_COLUMNS)}
    st.dataframe(table.rename(columns=names), hide_index=True, width="stretch")


def _draw_examples(spec: AttentionSpec) -> None:
    """Q, K and V of the sidebar's random projections, in the formats the upload reads;
    drawn (and their analysis fetched) only while open, as the explanations are."""
    with st.expander(t("model.upload_examples"), icon=":material/download:",
                     key=EXAMPLES_KEY, on_change="rerun") as box:
        if not box.open:
            return
        st.caption(t("model.upload_examples_help"))
        toy = spec if spec.source == "toy" else AttentionSpec(tokens=spec.tokens)
        try:
            a = cache.analysis(toy)
        except UserError as err:
            st.error(message(err), icon=":material/error:")
            return
        row = st.container(horizontal=True)
        for name, tensor in (("q", a.q), ("k", a.k), ("v", a.v)):
            row.download_button(f"{name}.npy", data=lambda x=tensor: upload.to_npy(x),
                                file_name=f"{name}.npy", mime="application/octet-stream",
                                key=f"{PREFIX}_ex_{name}_npy", on_click="ignore")
        for name, tensor in (("q", a.q), ("k", a.k)):
            row.download_button(f"{name}_head0.csv",
                                data=lambda x=tensor: upload.to_csv(x[0], a.tokens),
                                file_name=f"{name}_head0.csv", mime="text/csv",
                                key=f"{PREFIX}_ex_{name}_csv", on_click="ignore")
        if a.heads * a.n * a.n <= EXAMPLE_WEIGHT_CELLS:   # else a 200 MB file made per click
            row.download_button("weights.npy", data=lambda: upload.to_npy(a.scaled.weights),
                                file_name="weights.npy", mime="application/octet-stream",
                                key=f"{PREFIX}_ex_w_npy", on_click="ignore")
