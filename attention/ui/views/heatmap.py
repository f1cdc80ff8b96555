"""Streamlit drawing of attention heatmaps for any Analysis (toy spec or a pretrained layer).

Every function takes the Analysis and a `key_prefix`, which names its widgets and the URL
parameters that keep its view (head, zoom, pooling...), so two pages, or two heatmaps on one
page, never share state. Changing the zoom recomputes only the window's query rows from the
cached Analysis's q and k (O(window n d)); an overview is pooled once per head and pooling
and kept as images in the server's store, keyed by the Analysis's content digest.

    head, options = head_picker(analysis, key_prefix="hm"), options_menu("hm")
    draw_comparison(analysis, head, key_prefix="hm", options=options)   # scaled | unscaled | diff
    draw_heads_grid(analysis, head, key_prefix="hm")   # every head, `head` marked
    draw_row_follow(analysis, head, key_prefix="hm")
"""
from __future__ import annotations

import math
from dataclasses import replace
from functools import partial
from typing import Sequence

import streamlit as st

from attention.analysis import frames
from attention.analysis import Analysis
from attention.charts import heatmap as charts
from attention.charts import heads_grid
from attention.charts.canvas import cells_figure, choices, heads_figure, overview_figure, row_figure
from attention.analysis.pooled import pooled_cells, pooled_matrices
from attention.measures.pooling import HOWS, blocks_for, window, window_from_brush
from attention.spec import AttentionSpec
from attention.ui import cache
from attention.ui.canvas import brush, choice, figure_view
from attention.ui.chart import show
from attention.ui.explain import explanation
from attention.ui.export import ChartFiles, download_menu, download_popover
from attention.ui.prefetch import prefetch
from attention.ui.state import flag, menu_setting, view_state, view_widget
from attention.ui.text import lang, t

DETAIL_MAX = 64        # up to this many tokens every cell is drawn (3 x 4096 rects at most)
OVERVIEW_BLOCKS = 256  # an overview image has at most 256 x 256 blocks (~1 px each on a 250 px panel)
GRID_BLOCKS = 128      # an all-heads image has at most 128 x 128 blocks (~1.3 px each on 170 px)
GRID_ROWS = 16384      # the all-heads grid is drawn cell by cell up to this many cells in all
WINDOWS = (16, 24, 32, 48, 64)
DEFAULT_WINDOW = 16    # 16 x 16: every label fits and the weights are printed in the cells
VIEWS = ("compare", "grid", "row")
PREFETCH_HEADS = 3     # an overview's neighbouring heads computed ahead of a click
ROW_OPTIONS_MAX = 256  # up to this many queries the row picker lists every token; past it a
                       # number input (a list of 2,048 options: ~6,000 React renders a click)
SHOWN_ROW_METRICS = (("max_weight", "{:.3f}"), ("effective_tokens", "{:.1f}"))
PICKER_PX = 220       # width of the head pickers


def _images(analysis: Analysis, heads: tuple[int, ...], max_blocks: int, how: str,
            shared: bool = True, values: tuple[str, ...] = charts.VALUES) -> dict[str, dict]:
    """PNGs of the pooled panels (`values`) of some heads, kept in the server's store under
    the Analysis's content digest (never under its spec, shape or sums: two uploads may share
    those): moving the zoom window only moves its outline, and switching views or back again
    pools nothing."""
    def compute() -> dict[str, dict]:
        pooled, _ = pooled_matrices(analysis, list(heads), max_blocks, how)   # each (h, b, b)
        return charts.pooled_images({v: m.numpy() for v, m in pooled.items()}, shared, values)

    return cache.cached("images", (analysis.digest, heads, max_blocks, how, shared, values),
                        compute)


def view_picker(key_prefix: str = "hm") -> str:
    """Which heatmap view to show; kept in the URL as `<prefix>_view`."""
    return view_widget(f"{key_prefix}_view", st.segmented_control, default=VIEWS[0], cast=str,
                       valid=VIEWS.__contains__, label=t("heatmap.view"), options=VIEWS,
                       required=True, format_func=lambda v: t(f"heatmap.view_{v}"))


def head_picker(analysis: Analysis, key_prefix: str = "hm") -> int:
    """A head of the analysis; kept in the URL as `<prefix>_head`."""
    heads = analysis.heads
    return view_widget(f"{key_prefix}_head", st.selectbox, default=0, cast=int,
                       valid=lambda h: 0 <= h < heads, label=t("heatmap.head"),
                       options=list(range(heads)), width=PICKER_PX,
                       format_func=lambda h: t("heatmap.head_option", head=h))


def controls_row(align: str = "bottom", spread: bool = True):
    """Controls side by side, spread across the width or packed to the left (one block:
    st.columns is a block per column too, each a message and a few React components on every
    click of a view)."""
    return st.container(horizontal=True, horizontal_alignment="distribute" if spread else "left",
                        vertical_alignment=align)


def draw_spec_heatmap(spec: AttentionSpec, key_prefix: str = "hm") -> None:
    """The heatmap section of a spec's analysis, fetched from the cache here: inside a view
    section (layout.Page.view) each click fetches it again instead of the section holding
    it, so the byte-bounded store stays the only thing that keeps analyses alive."""
    draw_heatmap(cache.analysis(spec), key_prefix)     # a spinner only while it computes


def options_menu(key_prefix: str = "hm"):
    """A view's Options menu (one colour scale, block value, the zoom window's first query
    and key), filled by the view with its settings only while it is open (state.menu_setting):
    a closed menu is one button, so a view change mounts none of them. Never disabled where
    a view has no settings: that is another widget to Streamlit, mounted again; it says so."""
    return st.popover(t("heatmap.options"), icon=":material/tune:", key=f"{key_prefix}_opts",
                      help=t("heatmap.options_help"), on_change="rerun")


def _no_options(options, why: str) -> None:
    """In a view without settings, an open Options menu says why (locale key `why`)."""
    if options is not None and options.open:
        options.caption(t(why))


def draw_heatmap(analysis: Analysis, key_prefix: str = "hm") -> None:
    """The whole heatmap section: a top bar of view picker, head picker, Options and Download
    menus, then the chosen view. The bar is the same four widgets in every view (All heads
    marks the picked head), so a view change mounts none of them again: mounting a widget
    costs the browser more than drawing it again (README, "Performance")."""
    with controls_row():
        view = view_picker(key_prefix)
        head = head_picker(analysis, key_prefix)
        options = options_menu(key_prefix)
        menu = download_popover(f"{key_prefix}_dl")     # filled by the view, while open
    draw = {"grid": draw_heads_grid, "row": draw_row_follow}.get(view, draw_comparison)
    draw(analysis, head, key_prefix, menu=menu, options=options)


# ---- scaled | unscaled | difference ---------------------------------------------------------

def draw_comparison(analysis: Analysis, head: int, key_prefix: str = "hm", menu=None, *,
                    options, heading: str | None = None, notes: Sequence[str] = ()) -> None:
    """Scaled and unscaled attention of one head with one colour scale, and their difference.

    Up to DETAIL_MAX tokens every cell is drawn; beyond, an overview image per panel (one
    pixel per cell up to OVERVIEW_BLOCKS tokens, pooled blocks past that) plus a zoom window
    drawn cell by cell, with labels and tooltips. Its settings go in `options` (the section
    bar's options_menu) and its files in `menu` (a download_popover), or in a menu of its
    own under the charts. The first figure draws `heading`, `notes` and the caption of its
    panels (canvas.figure_view), a zoom window its own heading: a click sends no Streamlit
    text element again."""
    n = analysis.n
    blocks = blocks_for(n, OVERVIEW_BLOCKS) if n > DETAIL_MAX else None
    shared = menu_setting(options, f"{key_prefix}_shared", st.toggle, default=True, cast=flag,
                          label=t("heatmap.shared"), help=t("heatmap.shared_help"))
    # which panel is which and whether they share a colour scale; how to hover (the long
    # view's notice says what hovering shows there)
    caption = t("heatmap.compare_scales_shared" if shared else "heatmap.compare_scales_own")
    caption = caption if blocks is not None else f"{caption} {t('heatmap.compare_caption')}"
    text = {"heading": heading, "notes": [*notes, caption]}
    how = _pool_picker(key_prefix, blocks, options)
    if blocks is None:
        cells = _draw_cells(analysis, head, range(n), range(n), key_prefix, shared, **text)
        download_menu([replace(cells, heading=t("heatmap.download_comparison"))],
                      key=f"{key_prefix}_dl_cells", menu=menu)
        return
    _pooled_notice(n, blocks, how, "hint_zoom")
    queries, keys = _zoom_window(n, key_prefix, options)
    box = (queries.start, queries.stop, keys.start, keys.stop)
    images = _images(analysis, (head,), OVERVIEW_BLOCKS, how, shared)
    axes = charts.block_axes(blocks, how)
    chart_key = f"{key_prefix}_overview"
    figure_view(overview_figure(images, axes, lang(), box=box, shared=shared), key=chart_key,
                brush=partial(_zoom_to_brush, chart_key, key_prefix, n), **text)
    zoom = t("heatmap.zoom_title", q0=queries.start, q1=queries.stop - 1, k0=keys.start,
             k1=keys.stop - 1)
    cells = _draw_cells(analysis, head, queries, keys, key_prefix, shared, resizable=True,
                        heading=zoom)
    overview = ChartFiles(
        lambda: charts.overview_chart(images, axes, lang(), box=box, shared=shared),
        f"{key_prefix}_overview_head{head}_{how}",
        lambda: pooled_cells(analysis, [head], OVERVIEW_BLOCKS, how),   # made on a click
        csv_key=f"{key_prefix}_csv_overview", heading=t("heatmap.download_overview"))
    download_menu([overview, replace(cells, heading=t("heatmap.download_window"))],
                  key=f"{key_prefix}_dl_cells", menu=menu)
    prefetch_overviews(analysis, head, how, shared)


def prefetch_overviews(analysis: Analysis, head: int, how: str, shared: bool) -> None:
    """Queue the overviews of the PREFETCH_HEADS heads nearest `head` (a click on the head
    picker usually moves one or two), computed while the pages rest (ui/prefetch.py)."""
    near = sorted((h for h in range(analysis.heads) if h != head), key=lambda h: abs(h - head))
    for other in near[:PREFETCH_HEADS]:
        prefetch(("overview", analysis.digest, other, how, shared),
                 partial(_images, analysis, (other,), OVERVIEW_BLOCKS, how, shared))


def _draw_cells(analysis: Analysis, head: int, queries: range, keys: range,
                key_prefix: str, shared: bool, resizable: bool = False, **text) -> ChartFiles:
    """Every cell of a window of one head, on the canvas (a zoom window: `resizable`, with
    its size buttons above the panels, drawn by the figure itself: a view change into the
    comparison mounts no widget for them), under `text` (figure_view's heading, notes);
    returns its files for a Download menu (PNG/SVG drawn by Vega, the CSV made on a click)."""
    axes = charts.cell_axes(analysis.tokens, queries, keys)
    chart_key = f"{key_prefix}_cells"
    sizes = (choices("size", t("heatmap.window"), [(w, str(w)) for w in WINDOWS],
                     len(queries), t("heatmap.window_help"))     # a window is square
             if resizable else None)
    figure = cells_figure(frames.window(analysis, head, queries, keys), axes, lang(),
                          shared=shared, choices=sizes)
    resize = partial(_to_view, chart_key, "size", WINDOWS, f"{key_prefix}_win")
    events = {"size": resize} if resizable else {}     # a window's starts clamp to its size
    figure_view(figure, key=chart_key, **text, **events)
    name = (f"{key_prefix}_attention_head{head}_q{queries.start}-{queries.stop - 1}"
            f"_k{keys.start}-{keys.stop - 1}")
    table = lambda: frames.cells(analysis, heads=[head], queries=queries, keys=keys)  # noqa: E731
    return ChartFiles(lambda: charts.comparison_chart(table(), axes, lang(), shared=shared),
                      name, table, csv_key=f"{key_prefix}_csv_cells")


def _zoom_window(n: int, key_prefix: str, options) -> tuple[range, range]:
    """The zoom window's queries and keys: its size (the zoom figure's buttons), its first
    query and key (typed, or stepped a window at a time, in the Options menu), or a box
    dragged on the overview; kept in the URL, clamped to 0..n-1. A start past the last
    window (the window grew) is clamped to it."""
    size = view_state(f"{key_prefix}_win", default=DEFAULT_WINDOW, cast=int,
                      valid=WINDOWS.__contains__)
    last = n - size
    starts = []
    for axis in ("q", "k"):
        name = f"{key_prefix}_{axis}"
        current = st.session_state.get("view_" + name, 0)
        starts.append(menu_setting(
            options, name, st.number_input, default=max(0, min(int(current), last)), cast=int,
            valid=lambda v: 0 <= v <= last, label=t(f"heatmap.start_{axis}"), min_value=0,
            max_value=last, step=size, help=t("heatmap.start_help")))
    return window(n, starts[0], size), window(n, starts[1], size)


def _to_view(chart_key: str, event: str, allowed: tuple, name: str) -> None:
    """A figure's choice event (the zoom's size, the grid's value): the choice clicked
    becomes the view state `name`, read by the rerun it starts."""
    chosen = choice(chart_key, event, allowed)                 # None unless one of `allowed`
    if chosen is not None:
        st.session_state[f"view_{name}"] = chosen


def _zoom_to_brush(chart_key: str, key_prefix: str, n: int) -> None:
    """The overview's brush event: a box dragged on it becomes the zoom window (size, first
    query, first key), set before the zoom controls are drawn on the rerun."""
    box = brush(chart_key)                                 # None unless well formed
    if box is not None:
        size, queries, keys = window_from_brush(n, box["query_start"], box["key_start"], WINDOWS)
        st.session_state[f"view_{key_prefix}_win"] = size
        st.session_state[f"view_{key_prefix}_q"] = queries.start
        st.session_state[f"view_{key_prefix}_k"] = keys.start


def _pools(blocks) -> bool:
    """Whether a view's blocks pool cells (so block max or mean is a choice): not without
    blocks, nor with blocks of one cell."""
    return blocks is not None and blocks.size > 1


def _pool_picker(key_prefix: str, blocks, options) -> str:
    """Block max or block mean for pooled views, in the Options menu and kept in the URL as
    `<prefix>_pool`; no picker (max) where there is nothing to pool: no blocks, or blocks of
    one cell."""
    if not _pools(blocks):
        return "max"
    return menu_setting(options, f"{key_prefix}_pool", st.segmented_control, default="max",
                        cast=str, valid=HOWS.__contains__, label=t("heatmap.pool"),
                        options=HOWS, required=True, help=t("heatmap.pool_help"),
                        format_func=lambda h: t(f"heatmap.pooled_{h}"))


def _pooled_notice(n: int, blocks, how: str, hint: str) -> None:
    """Say that (and how) the view is pooled: block count and size, max or mean, uneven edge;
    or, with blocks of one cell, that the overview shows every cell as a pixel."""
    if blocks.size == 1:
        st.info(t("heatmap.pixels_notice", n=f"{n:,}") + " " + t(f"heatmap.{hint}"),
                icon=":material/grid_view:")
        return
    last = blocks.stop(blocks.count - 1) - blocks.start(blocks.count - 1)
    uneven = t("heatmap.pooled_uneven", last=last) if last != blocks.size else ""
    st.info(t("heatmap.pooled_notice", n=f"{n:,}", b=blocks.count, size=blocks.size,
              how=t(f"heatmap.pooled_{how}_long"), uneven=uneven) + " " + t(f"heatmap.{hint}"),
            icon=":material/grid_view:")


# ---- all heads --------------------------------------------------------------------------------

def _grid_blocks(analysis: Analysis):
    """The blocks of the all-heads images, or None while the grid is drawn cell by cell."""
    cells = analysis.n <= math.isqrt(GRID_ROWS // analysis.heads)
    return None if cells else blocks_for(analysis.n, GRID_BLOCKS)


def draw_heads_grid(analysis: Analysis, head: int | None = None, key_prefix: str = "hm",
                    menu=None, options=None) -> None:
    """Every head side by side with one colour scale, the picked `head` marked: cell by cell
    while small (Vega), else one image per head on the canvas (pooled past GRID_BLOCKS
    tokens; by Vega for its PNG and SVG). Its block value goes in `options` (an
    options_menu above, or one of its own), its files in `menu` (or a menu of its own)."""
    heads, n = analysis.heads, analysis.n
    columns = min(4, heads)
    blocks = _grid_blocks(analysis)
    name, label = f"{key_prefix}_grid", t("heatmap.grid_value")
    common = dict(default="weight", cast=str, valid=charts.VALUES.__contains__)
    value = view_state(name, **common) if blocks is not None else view_widget(
        name, st.segmented_control, label=label, options=charts.VALUES, required=True,
        format_func=lambda v: t(f"heatmap.panel_{v}"), **common)   # the canvas: its buttons
    if not _pools(blocks):
        _no_options(options, "heatmap.options_none_grid")
    elif options is None:
        options = options_menu(key_prefix)
    how = _pool_picker(key_prefix, blocks, options)
    if blocks is None:
        axes = charts.cell_axes(analysis.tokens, range(n), range(n))
        st.caption(t("heatmap.grid_caption", heads=heads))
        chart = heads_grid.heads_grid_chart(frames.cells(analysis), axes, value, lang(), columns,
                                        current=head)
        show(chart)
    else:
        _pooled_notice(n, blocks, how, "hint_grid")
        image = _images(analysis, tuple(range(heads)), GRID_BLOCKS, how, values=(value,))[value]
        axes = charts.block_axes(blocks, how)
        values = choices("value", label, [(v, t(f"heatmap.panel_{v}")) for v in charts.VALUES],
                         value)
        chart_key = f"{key_prefix}_grid_images"
        figure_view(heads_figure(image, axes, value, lang(), current=head, choices=values),
                    key=chart_key, notes=[t("heatmap.grid_caption", heads=heads)],
                    value=partial(_to_view, chart_key, "value", charts.VALUES, name))
        chart = partial(heads_grid.heads_grid_image_chart, image, axes, value, lang(), columns,
                        current=head)
    download_menu([ChartFiles(chart, f"{key_prefix}_all_heads_{value}")],
                  key=f"{key_prefix}_dl_grid", menu=menu)


# ---- one query row ------------------------------------------------------------------------------

def draw_row_follow(analysis: Analysis, head: int, key_prefix: str = "hm", menu=None,
                    options=None) -> None:
    """Pick a query token; its attention over every key, scaled vs unscaled. Its Download
    menu: `menu` or one of its own. Nothing to set in an Options menu (`options`)."""
    _no_options(options, "heatmap.options_none_row")
    tokens, n = analysis.tokens, analysis.n
    row = _row_picker(tokens, key_prefix)
    shown = [(name, fmt, variant) for name, fmt in SHOWN_ROW_METRICS
             for variant in ("scaled", "unscaled")]
    with controls_row("top"):
        for name, fmt, variant in shown:
            values = analysis.scaled_metrics if variant == "scaled" else analysis.unscaled_metrics
            st.metric(t(f"heatmap.metric_{name}_{variant}"),
                      fmt.format(float(values[name][head, row])))
    # the row as a table only for Vega's bars and a download: at 2,048 keys it takes 13 ms
    # to make, the line's matrices (frames.window) 0.4 ms
    cells = partial(frames.cells, analysis, heads=[head], queries=range(row, row + 1))
    chart = lambda: heads_grid.row_chart(heads_grid.row_frame(cells(), lang()), tokens, lang())  # noqa: E731
    if n > heads_grid.BARS_MAX:   # two lines on the canvas (a Vega line of 2 x 2,048 points: 0.1 s a click)
        title = (t("heatmap.row_title", pos=row, token=tokens[row])      # the figure's text,
                 + " · " + t("heatmap.row_lines", n=f"{n:,}"))           # not markdown
        line = frames.window(analysis, head, range(row, row + 1), range(n))     # (1, n) each
        figure_view(row_figure(line, tokens, lang(), title=title),
                    key=f"{key_prefix}_row_lines", width="stretch")
    else:
        show(chart(), width="stretch")
    download_menu([ChartFiles(chart, f"{key_prefix}_row{row}_head{head}", cells,
                              csv_key=f"{key_prefix}_csv_row")],
                  key=f"{key_prefix}_dl_row", menu=menu)


def _row_picker(tokens: tuple[str, ...], key_prefix: str) -> int:
    """The query row, kept in the URL as `<prefix>_row`: a list of "position · token" up to
    ROW_OPTIONS_MAX tokens, a position to type or step past it (the row figure names its
    token)."""
    n = len(tokens)
    common = dict(default=0, cast=int, valid=lambda r: 0 <= r < n)
    if n <= ROW_OPTIONS_MAX:
        return view_widget(f"{key_prefix}_row", st.selectbox, label=t("heatmap.row"),
                           options=list(range(n)),
                           format_func=lambda r: t("heatmap.row_option", pos=r, token=tokens[r]),
                           **common)
    return view_widget(f"{key_prefix}_row", st.number_input, label=t("heatmap.row_position",
                       last=n - 1), min_value=0, max_value=n - 1, step=1, width=260, **common)


# ---- explanation -------------------------------------------------------------------------------

def draw_intro(spec: AttentionSpec) -> None:
    """The page's heading for a real model (its name and the layer shown) and what a cell is."""
    if spec.source == "pretrained":
        from attention.ui.model import ensure_model

        name = ensure_model(spec.model_source).name
        st.subheader(t("heatmap.model_layer_title", name=name, layer=spec.layer))
    st.caption(t("heatmap.intro"))


def draw_explanation() -> None:
    """What the heatmap shows and why the scale matters, with the formula."""
    explanation("heatmap.explain_title", [
        (None, r"\mathrm{Attention}(Q,K,V)=\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}\,\tau}\right)V"),
        ("heatmap.explain_formula", r"\operatorname{Var}(q\cdot k)=d_k\quad\Rightarrow\quad"
                                    r"\operatorname{std}\!\left(\frac{q\cdot k}{\sqrt{d_k}}\right)=1"),
        ("heatmap.explain_scaling",
         r"J=\operatorname{diag}(p)-pp^\top,\qquad \|J\|_F\to 0\ \text{as}\ p\to\text{one-hot}"),
        ("heatmap.explain_saturation", None),
        ("heatmap.explain_reading", None),
    ])
