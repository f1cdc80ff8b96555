"""The model parts of the Model heads page (heads, every head's statistics, interventions),
each drawn from a cached HeadsReport of the sidebar's model (the bundled MiniLM unless the
sidebar names another; MiniLM for the random-projection source).

The page script stays a few calls; the drawing, the head picker (URL-backed, and set by a
click on the grid) and the explanations live here; the interventions are intervene_view.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Callable

import streamlit as st

from attention.charts import model as charts
from attention.charts.canvas import amend, grid_cells_for, matrices_figure, matrix_figure
from attention.errors import UserError
from attention.measures.heads import GRID_CELLS, HEAD_COLUMNS, SINK_COLUMNS
from attention.models import BUNDLED
from attention.ui import cache, state
from attention.ui import model as cached
from attention.ui.canvas import figure_view, pick
from attention.ui.chart import show
from attention.ui.views.heatmap import PICKER_PX, controls_row, draw_comparison, options_menu
from attention.ui.explain import explanation
from attention.ui.export import ChartFiles, chart_buttons, csv_button, download_menu, download_popover
from attention.ui.views.intervene import draw_interventions
from attention.ui.state import view_widget
from attention.ui.text import lang, message, t

PREFIX = "mh"          # this page's URL keys: mh_<name> (docs/architecture.md, "A view is a spec")
LAYER_VIEW, HEAD_VIEW, STAT_VIEW = f"{PREFIX}_layer", f"{PREFIX}_head", f"{PREFIX}_stat"
PART_VIEW = f"{PREFIX}_tab"      # the open part (it was a tab: links keep their parameter)
PARTS = ("heads", "table", "iv", "upload")
GRID_KEY = "model_grid"

# Formulas are symbols only, the same in every language; the words around them are in model.toml.
FORMULAS = {
    "attention": r"\alpha^{(l,h)} = \operatorname{softmax}\!\Big(\frac{(x W_Q^h + b_Q^h)"
                 r"(x W_K^h + b_K^h)^\top}{\sqrt{d_\text{head}}}\Big)",
    "unscaled": r"\tilde\alpha^{(l,h)} = \operatorname{softmax}\!\big(q\,k^\top\big)"
                r" = \operatorname{softmax}\!\big(\sqrt{d_\text{head}}\cdot q\,k^\top/"
                r"\sqrt{d_\text{head}}\big)",
    "stats": r"H = \frac1n\sum_i\Big(-\sum_j \alpha_{ij}\ln\alpha_{ij}\Big),\quad"
             r"\text{[SEP]} = \frac1n\sum_i\sum_{j:\,t_j=\text{[SEP]}}\alpha_{ij},\quad"
             r"\text{prev} = \frac1{n-1}\sum_{i\ge1}\alpha_{i,i-1}",
    "rollout": r"A_l = \operatorname{rownorm}\!\Big(\tfrac12\,\frac1H\sum_h \alpha^{(l,h)}"
               r" + \tfrac12 I\Big),\qquad R_0 = A_0,\quad R_l = A_l\,R_{l-1}",
    "value": r"\big\|\alpha_{ij}\,f(x_j)\big\|,\qquad f(x) = (x W_V^h + b_V^h)\,W_O^h",
}


def part_picker(default: str = "heads") -> str:
    """Which of the page's four parts is open, kept in the URL as ?mh_tab=<id> (state.
    part_picker: on this page a tab bar cost a layer or head click 138 -> 118 ms, both
    servers in one run)."""
    return state.part_picker(PART_VIEW, PARTS, default=default, label=t("model.part"),
                             names=lambda part: t(f"model.tab_{part}"))


def draw_heads_part(spec, view: Callable[..., None] = lambda draw, *args: draw(*args)) -> None:
    """The model's heads on the sidebar's text: its pieces, then what a layer or head choice
    changes, drawn by `view` (layout.Page.view: a click there reruns only that part)."""
    found = _model_for(spec)
    if found is not None:
        source, _, report = found
        draw_pieces(report)
        view(draw_heads, spec, source)


def draw_table_part(spec) -> None:
    """Every head's statistics at once (no layer or head choice changes them)."""
    found = _model_for(spec)
    if found is not None:
        _, _, report = found
        draw_table(report)


def draw_interventions_part(spec) -> None:
    """What the model outputs with heads removed, sharpened or unscaled. Only the model's
    pieces of the text are looked up first, not its HeadsReport: a report holds every head's
    weights twice (SmolLM2 at 256 pieces: 79 MB), and a session waiting for its turn at the
    gate held it; eight such sessions took a server past 2 GB (bench/memory.py --lm)."""
    found = _model_for(spec, report=False)
    if found is not None:
        source, loaded, tokens = found
        draw_interventions(loaded, source, spec.model_text, tokens)


def _model_for(spec, report: bool = True):
    """(source, the model, its HeadsReport on the sidebar's text; with report=False only the
    model's pieces of it), after the notes on what is shown; or None once the reason it
    cannot be had is shown."""
    real = spec.source == "pretrained"
    source = spec.model_source if real else BUNDLED
    if not real:
        st.info(t("model.toy_note"), icon=":material/info:")
    if not report:
        try:
            return source, *cached.pieces(source, spec.model_text)
        except UserError as err:
            st.error(message(err), icon=":material/error:")
            return None
    loaded_report = _loaded_report(spec, source)
    return None if loaded_report is None else (source, *loaded_report)


def _loaded_report(spec, source: str):
    """(the model, its cached HeadsReport on the sidebar's text), or None once the reason
    it cannot be had is shown."""
    try:
        loaded = cached.ensure_model(source)
        return loaded, cached.report(source, spec.model_text, spec.hide_sinks)
    except UserError as err:
        st.error(message(err), icon=":material/error:")
        return None


def draw_heads(spec, source: str) -> None:
    """What a layer or head choice changes: the grid's frame, the pickers, the chosen head
    scaled vs unscaled, the layer's rollout and value-weighted view.
    The model and report are looked up (cached) here, not passed in, so that a fragment
    around this function holds nothing large between clicks."""
    loaded_report = _loaded_report(spec, source)
    if loaded_report is None:
        return
    loaded, report = loaded_report
    real = spec.source == "pretrained"
    grid_slot = st.container()        # the grid shows above the pickers but needs their value
    with controls_row(spread=False):  # the section's bar: pickers, Options, one Download menu
        layer, head = pick_head(loaded, spec.layer if real else 0)
        options = options_menu(PREFIX)
        menu = download_popover(f"{PREFIX}_dl")
    with grid_slot:
        draw_grid(report, cached.grid(source, spec.model_text, spec.hide_sinks), (layer, head),
                  hidden=spec.hide_sinks)
    # the model's own settings: its mask, temperature 1
    analysis = cache.analysis(replace(spec, source="pretrained", model=spec.model if real
                                      else "", layer=layer, causal=False, temperature=1.0))
    draw_comparison(analysis, head, key_prefix=PREFIX, menu=menu, options=options,
                    heading=t("model.compare_title", layer=layer, head=head),
                    notes=[t("model.compare_help", d_head=loaded.d_head,
                             root=loaded.d_head ** 0.5)])
    draw_rollout(report, layer, menu)
    if report.has_values:
        draw_value_weighted(source, spec.model_text, report.tokens, layer, head, menu)
    else:
        st.info(t("model.value_unknown"), icon=":material/info:")


def draw_pieces(report) -> None:
    """The model's pieces, and how many the tokenizer did not know."""
    st.caption(t("model.pieces", name=report.name, n=len(report.tokens)))
    # st.text, not st.code: a code block fetches and parses Streamlit's 1.5 MB syntax
    # highlighter on first use, 0.5 s of a cold Model heads link (bench/cold_link.py)
    with st.container(border=True):
        st.text(" ".join(report.tokens), width="stretch")
    unk, count = report.unk
    if unk is not None and count:   # "0 of the 5 pieces..." is noise, and a byte-level
        # vocabulary (SmolLM2) spells every word: its unk is only a name (<|endoftext|>)
        st.caption(t("model.unknown_pieces", unk=unk, count=count, n=len(report.tokens)))


def _apply_grid_click(layers: int, heads: int) -> None:
    """The grid's pick event: copy the clicked head into the pickers (runs before the rerun)."""
    picked = pick(GRID_KEY, layers, heads)
    if picked is not None:
        st.session_state["view_" + LAYER_VIEW], st.session_state["view_" + HEAD_VIEW] = picked


def draw_grid(report, figure: bytes, current: tuple[int, int], hidden: bool = False) -> None:
    """Every head, pooled, on the canvas (`figure`: model.grid, packed once per text); the
    current head framed; a click on one picks it."""
    layers, heads, n, _ = report.shown.shape
    notes = [t("model.grid_help", cells=grid_cells_for(layers, GRID_CELLS)),
             *([t("model.grid_causal")] if report.is_causal else []),
             *([t("model.grid_hidden")] if hidden else [])]
    figure_view(amend(figure, current=list(current)), key=GRID_KEY,
                heading=t("model.grid_title", count=layers * heads), notes=notes,
                pick=partial(_apply_grid_click, layers, heads))


def pick_head(loaded, first_layer: int = 0) -> tuple[int, int]:
    """Layer and head pickers, kept in the URL as ?mh_layer=&mh_head= (this page's one owner
    of the layer: the sidebar's is disabled here). A fresh session opens on the sidebar's
    layer (`first_layer`) unless the link names one; a link's layer or head past the model's
    last is clamped to it with the notice the sidebar gives a link's layer."""
    layers, heads = loaded.layers, loaded.heads
    _clamp_from_link(LAYER_VIEW, layers - 1, "sidebar.model_layer_clamped", loaded.name)
    _clamp_from_link(HEAD_VIEW, heads - 1, "model.head_clamped", loaded.name)
    layer = view_widget(LAYER_VIEW, st.selectbox, default=min(first_layer, layers - 1),
                        cast=int, valid=lambda v: v in range(layers), label=t("model.layer"),
                        options=range(layers), width=PICKER_PX)
    head = view_widget(HEAD_VIEW, st.selectbox, default=0, cast=int,
                       valid=lambda v: v in range(heads), label=t("model.head"),
                       options=range(heads), width=PICKER_PX)
    return layer, head


def _clamp_from_link(name: str, last: int, notice: str, model: str) -> None:
    """Before the picker `name` first takes its value from the link: a number past `last`
    becomes `last`, with the sentence `notice` (layer=, head=, last=, name=)."""
    key = "view_" + name
    if key in st.session_state:
        return
    try:
        asked = int(st.query_params.get(name, ""))
    except ValueError:
        return
    if asked > last:
        st.warning(t(notice, layer=asked, head=asked, last=last, name=model),
                   icon=":material/link_off:")
        st.session_state[key] = last


def column_names(report) -> dict[str, str]:
    """Column labels of the per-head table: [CLS] and [SEP] named by the model's own tokens."""
    names = {c: t(f"model.col_{c}") for c in ("layer", "head", *HEAD_COLUMNS, *SINK_COLUMNS)}
    for column, token, usual in zip(("to_cls", "to_sep"), report.special, ("[CLS]", "[SEP]")):
        if token != usual:
            names[column] = t("model.col_to_token", token=token or "—")
    return names


def draw_table(report) -> None:
    """The sortable per-head table (Clark et al.'s columns and the attention sinks) and one
    of its columns as a layers x heads heatmap."""
    columns = (*HEAD_COLUMNS, *SINK_COLUMNS)
    st.subheader(t("model.table_title"))
    st.caption(t("model.table_help"))
    st.caption(t("model.sinks_help"))
    names = column_names(report)
    config = {names[c]: st.column_config.NumberColumn(format="%.3f", help=t(f"model.help_{c}"))
              for c in columns}
    st.dataframe(report.table.rename(columns=names), hide_index=True, width="stretch",
                 height=300, column_config=config)
    csv_button(report.table, "model_heads")
    stat = view_widget(STAT_VIEW, st.selectbox, default="to_sep", cast=str,
                       valid=lambda v: v in columns, label=t("model.stat"),
                       options=list(columns), format_func=lambda c: names[c], width=300)
    chart = charts.head_stat_chart(report.table, stat, lang())
    show(chart, width="content")
    chart_buttons(chart, f"model_{stat}")


def draw_rollout(report, layer: int, menu=None) -> None:
    """The layer's attention rollout; its files in `menu` (the section's Download menu) or
    in one of its own."""
    rollout, tokens, title = report.rollout[layer], report.tokens, t("model.rollout")
    notes = [t("model.rollout_help"), *([t("model.rollout_causal")] if report.is_causal else [])]
    figure_view(matrix_figure(rollout, tokens, lang(), title=title, scheme="purples",
                              size=_matrix_px(len(tokens), 720)), key=f"{PREFIX}_rollout",
                heading=t("model.rollout_title", layer=layer), notes=notes)
    frame = lambda: charts.matrix_frame(rollout, tokens)                     # noqa: E731
    files = ChartFiles(lambda: charts.matrix_chart(frame(), tokens, lang(), value_title=title,
                                                   scheme="purples"),
                       f"model_rollout_l{layer}", frame, heading=t("model.download_rollout"))
    download_menu([files], key=f"{PREFIX}_dl_rollout", menu=menu)


def _matrix_px(n: int, most: int) -> int:
    """A token x token panel's side: 14 px a token, within 300 and `most` (as the charts')."""
    return min(max(300, 14 * n), most)


def draw_value_weighted(source: str, text: str, tokens: tuple[str, ...], layer: int,
                        head: int, menu=None) -> None:
    """Raw weights beside ||alpha_ij f(x_j)|| (one figure, two panels: a cell's tooltip gives
    both), and ||f(x_j)|| per key; its files in `menu` or in one of its own."""
    alpha, norms, f_norm = cached.value_weighted(source, text, layer, head)
    panels = [("weight", alpha, t("model.value_raw"), t("model.weight"), "blues"),
              ("norm", norms, t("model.value_norm"), t("model.norm"), "oranges")]
    figure_view(matrices_figure(panels, tokens, lang(), size=_matrix_px(len(tokens), 340)),
                key=f"{PREFIX}_value", heading=t("model.value_title", layer=layer, head=head),
                notes=[t("model.value_help")])
    frame = charts.norm_frame(f_norm, alpha.mean(dim=0), tokens)
    figure_view(charts.norm_figure(frame, lang()), key=f"{PREFIX}_norms")
    files = ChartFiles(lambda: charts.norm_chart(frame, tokens, lang()),
                       f"model_norms_l{layer}_h{head}", frame, heading=t("model.download_norms"))
    download_menu([files], key=f"{PREFIX}_dl_norms", menu=menu)


def draw_explanations() -> None:
    explanation("model.explain_title",
                [*((f"model.explain_{part}", formula) for part, formula in FORMULAS.items()),
                 ("model.explain_sources", None)])
