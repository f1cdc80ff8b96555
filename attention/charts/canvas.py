"""What the page's canvas heatmap (attention/ui/canvas.py) draws: a figure as plain data.

The charts a click redraws most are drawn by a small component of our own, not a Vega view
each (docs/decisions.md, "The canvas heatmap"): each panel is one image, one pixel a cell or
a pooled block, coloured here by charts.colors exactly as the Vega charts and the PNG/SVG
exports colour them. The browser scales the images, writes the labels and numbers it is
given and answers the pointer: tooltips, a box dragged on an overview, choice buttons.

    figure = cells_figure(frames.window(a, head, queries, keys), axes, "en", shared=True)
    figure = overview_figure(images, axes, "en", box=(q0, q1, k0, k1))

A figure is a dict of JSON values (no NaN: a masked cell is None), each panel's image a PNG
data URL. Its "layout" names what the browser builds elements for (kind, axes, labels,
titles): a click that changes only numbers (another head, the same window) keeps every
element and repaints the canvases. `pack` is what the page sends: the figure's JSON without
its images, then the PNGs as raw bytes (an overview's three are about 250 KB; as base64
inside JSON the browser parsed and collected 330 KB of strings on every head click).
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
from typing import Mapping, Sequence

import numpy as np

from attention.i18n import translate
from attention.charts import colors
from attention.charts.heatmap import (GRID_PANEL, NUMBERS_MAX, PANEL, VALUES, BlockAxes, CellAxes,
                                      clip_label, color_domain, number_labels, on_dark,
                                      scheme_for)
from attention.charts.heatmap import text as _t
from attention.charts.heads_grid import head_title

TIP_DIGITS = {"raw_score": 3, "scaled_score": 3, "weight": 4, "unscaled_weight": 4,
              "difference": 4}     # decimals a tooltip shows (the Vega tooltips' formats)


# Below this the scaled and unscaled weights agree to the tooltip's decimals: the difference
# panel's legend says "no difference" rather than ticks such as -0.0000010.
NO_DIFFERENCE = 0.5 * 10.0 ** -TIP_DIGITS["difference"]


def _json_values(matrix: np.ndarray, digits: int) -> list:
    """A matrix as nested lists of rounded floats, None where it is NaN (JSON has no NaN)."""
    rounded = np.round(np.asarray(matrix, dtype=np.float64), digits)
    return [[None if math.isnan(x) else x for x in row] for row in rounded.tolist()]


def nice_ticks(lo: float, hi: float, count: int) -> list[float]:
    """About `count` round values in [lo, hi] (steps of 1, 2 or 5 x 10^k, as d3's ticks)."""
    if not hi > lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9)
    ticks = [round(k * step, 12) for k in range(first, math.floor(hi / step + 1e-9) + 1)]
    return [0.0 if t == 0 else t for t in ticks]     # no "-0"


def _tick_label(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 2
    return f"{value:.{decimals}f}"


def legend(scheme: str, domain: tuple[float, float], title: str, count: int = 4) -> dict:
    """A colour bar: the scheme's colours (evenly spaced, interpolated in RGB: CSS's linear
    gradient does exactly what Vega's scale does), its domain and round ticks on it."""
    lo, hi = domain
    ticks = nice_ticks(lo, hi, count)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else (hi - lo or 1.0)
    run = colors.SCHEMES[scheme]
    return {"title": title, "colors": ["#" + run[i:i + 6] for i in range(0, len(run), 6)],
            "ticks": [[(t - lo) / ((hi - lo) or 1.0), _tick_label(t, step)] for t in ticks]}


def _panel_legend(value: str, domain: tuple[float, float], lang: str,
                  shared: bool, words: Mapping[str, str] | None = None) -> dict | None:
    """A comparison panel's legend: none on the scaled panel when both weight panels share the
    unscaled one's."""
    if shared and value == "weight":
        return None
    title = "legend_shared" if shared and value == "unscaled_weight" else f"legend_{value}"
    bar = legend(scheme_for(value), domain, _word(lang, title, words))
    if value == "difference" and domain[1] < NO_DIFFERENCE:   # one token, or d_k = 1
        middle = bar["colors"][len(bar["colors"]) // 2]
        bar.update(colors=[middle, middle], ticks=[[0.5, _t(lang, "legend_no_difference")]])
    return bar


def _word(lang: str, key: str, words: Mapping[str, str] | None) -> str:
    """A heatmap text (heatmap.<key>), or the figure's own for that key."""
    return words[key] if words and key in words else _t(lang, key)


def _layout_key(parts: dict) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def choices(event: str, label: str, options: Sequence[tuple[int | str, str]], current: int | str,
            help: str = "") -> dict:
    """Radio buttons above a figure's panels, `options` as (value, text), `current` checked;
    a click sends `event` with its value (ui/canvas.py `choice`). No Streamlit widget."""
    return {"event": event, "label": label, "help": help,
            "options": [[value, text] for value, text in options], "current": current}


def cells_figure(tips: Mapping[str, np.ndarray], axes: CellAxes, lang: str = "en", *,
                 shared: bool = True, choices: dict | None = None,
                 words: Mapping[str, str] | None = None) -> dict:
    """Scaled | unscaled | difference of one head, cell by cell (tips: frames.window of that
    head over `axes`, each TIP_DIGITS column a (queries, keys) matrix, NaN where masked): one
    pixel a cell, the tokens on the axes, the weights printed in the cells up to NUMBERS_MAX
    a side, every number of a cell in its tooltip; `choices` (a zoom window's sizes) above.
    Another pair of weights on one scale and their difference (an intervention's before and
    after) is drawn the same way: its three matrices under VALUES' names in `tips` (the
    columns it lacks are left out of the tooltip), its texts in `words` by the heatmap's keys
    (panel_<value>, legend_<value>, legend_shared, tip_<value>)."""
    small = axes.side <= NUMBERS_MAX
    panels = []
    for value in VALUES:
        domain = color_domain(tips, value, shared)
        grid = tips[value]                                                      # (q, k)
        panel = {"title": _word(lang, f"panel_{value}", words),
                 "image": colors.png_data_url(colors.colorize(grid, domain, scheme_for(value))),
                 "legend": _panel_legend(value, domain, lang, shared, words)}
        if small:
            printed = np.array(number_labels(grid), dtype=object).reshape(grid.shape)
            printed[np.isnan(grid)] = ""                                        # masked: blank
            panel["numbers"] = printed.tolist()
            panel["dark"] = on_dark(grid, value, domain).tolist()
        panels.append(panel)
    digits = {name: places for name, places in TIP_DIGITS.items() if name in tips}
    tip = {"titles": {name: _word(lang, f"tip_{name}", words) for name in
                      ("query_token", "query_pos", "key_token", "key_pos", *digits)},
           "query_tokens": list(axes.query_tokens), "key_tokens": list(axes.key_tokens),
           "q0": axes.queries.start, "k0": axes.keys.start,
           "digits": digits,
           "values": {name: _json_values(tips[name], places) for name, places in digits.items()}}
    return _cells(axes, lang, panels, tip, PANEL, choices)


def overview_figure(images: dict[str, dict], axes: BlockAxes, lang: str = "en", *,
                    box: tuple[int, int, int, int] | None = None, shared: bool = True,
                    head: int = 0) -> dict:
    """Scaled | unscaled | difference of one head as pooled images (charts.heatmap.
    pooled_images; `head`: which of its heads) over positions 0..n, the zoom window
    (query_start, query_stop, key_start, key_stop) outlined, a box dragged on a panel sent
    back as the brush {"query_start": [a, b], "key_start": [c, d]} in positions."""
    panels = [{"title": _t(lang, f"panel_{value}"), "image": images[value]["urls"][head],
               "legend": _panel_legend(value, images[value]["domain"], lang, shared)}
              for value in VALUES]
    return {**_blocks(panels, axes, lang, PANEL), "box": list(box) if box is not None else None,
            "brush": True}


def heads_figure(image: dict, axes: BlockAxes, value: str, lang: str = "en", *,
                 size: int = GRID_PANEL, current: int | None = None,
                 choices: dict | None = None) -> dict:
    """Every head's pooled `value` side by side, `size` px each (image: charts.heatmap.
    pooled_images(...)[value], one colour domain), the legend under the last head, the
    `current` head framed and marked in its panel (not the layout: another head keeps every
    element); a block's span in its tooltip; `choices` (which value) above."""
    heads = len(image["urls"])
    key = legend(image["scheme"], image["domain"], _t(lang, f"legend_{value}"))
    panels = [{"title": head_title(lang, h, current), "image": url, "current": h == current,
               "legend": key if h == heads - 1 else None} for h, url in enumerate(image["urls"])]
    return {**_blocks(panels, axes, lang, size, [head_title(lang, h) for h in range(heads)],
                      choices), "box": None, "brush": False}


def _blocks(panels: list[dict], axes: BlockAxes, lang: str, size: int,
            titles: Sequence[str] | None = None, choices: dict | None = None) -> dict:
    """Pooled panels over positions 0..n on both axes (kind "blocks"); `titles`: the layout's."""
    ticks = [int(t) for t in nice_ticks(0, axes.n, 8)]
    axis = {"x": {"title": _t(lang, "axis_key_position"), "ticks": ticks},
            "y": {"title": _t(lang, "axis_query_position"), "ticks": ticks}}
    tip = {"titles": {"query_pos": _t(lang, "tip_query_pos"), "key_pos": _t(lang, "tip_key_pos")},
           "size": axes.size}
    layout = {"kind": "blocks", "n": axes.n, "rows": axes.side, "cols": axes.side, **axis,
              "titles": list(titles or (p["title"] for p in panels)), "panel": size,
              "legends": [p["legend"] is not None for p in panels], "choices": choices}
    return {"layout": _layout_key(layout), **layout, "panels": panels, "tip": tip}


def matrix_figure(values: np.ndarray, tokens: Sequence[str], lang: str, *, title: str,
                  scheme: str = "blues", size: int = PANEL) -> dict:
    """One query x key matrix (rollout: (n, n), NaN where nothing is) on one panel `size` px
    wide (matrices_figure with one panel)."""
    return matrices_figure([("value", values, title, title, scheme)], tokens, lang, size=size)


def matrices_figure(panels: Sequence[tuple[str, np.ndarray, str, str, str]], tokens: Sequence[str],
                    lang: str, *, size: int = PANEL) -> dict:
    """Query x key matrices of the same tokens side by side, one panel `size` px wide each;
    panels: (name, (n, n) values with NaN where nothing is, panel title, the short name of
    its values in the legend and tooltip, colour scheme). Each is coloured from 0 (or its
    minimum, if negative) to its maximum with its own legend; the tokens on the axes, and in
    a cell's tooltip its tokens, positions and every panel's value there (a weight and what
    it moves, read together)."""
    drawn, values = [], {}
    for name, matrix, title, short, scheme in panels:
        grid = np.asarray(matrix, dtype=np.float64)                              # (n, n)
        known = grid[~np.isnan(grid)]
        lo = min(0.0, float(known.min())) if known.size else 0.0
        hi = max(0.0, float(known.max())) if known.size else 1.0
        domain = (lo, hi if hi > lo else lo + 1.0)
        drawn.append({"title": title, "legend": legend(scheme, domain, short),
                      "image": colors.png_data_url(colors.colorize(grid, domain, scheme))})
        values[name] = _json_values(grid, 4)
    axes = CellAxes(range(len(tokens)), range(len(tokens)), tuple(tokens), tuple(tokens))
    tip = {"titles": {**{name: _t(lang, f"tip_{name}")
                         for name in ("query_token", "query_pos", "key_token", "key_pos")},
                      **{name: short for name, _, _, short, _ in panels}},
           "query_tokens": list(tokens), "key_tokens": list(tokens), "q0": 0, "k0": 0,
           "digits": {name: 4 for name in values}, "values": values}
    return _cells(axes, lang, drawn, tip, size)


def _cells(axes: CellAxes, lang: str, panels: list[dict], tip: dict, size: int,
           choices: dict | None = None) -> dict:
    """A figure of panels drawn cell by cell over `axes`, the tokens on both axes (and
    cells_figure's choices)."""
    axis = {
        "x": {"title": _t(lang, "axis_key"), "labels": [clip_label(t) for t in axes.key_tokens]},
        "y": {"title": _t(lang, "axis_query"),
              "labels": [clip_label(t) for t in axes.query_tokens]},
    }
    layout = {"kind": "cells", "rows": len(axes.queries), "cols": len(axes.keys),
              "titles": [p["title"] for p in panels], "axis_titles": [axis["x"]["title"],
                                                                     axis["y"]["title"]],
              "legends": [p["legend"] is not None for p in panels], "panel": size,
              "choices": choices}
    # another window of the same size keeps the elements and rewrites only the labels
    return {"layout": _layout_key(layout), "labels_key": _layout_key(axis), **layout, **axis,
            "panels": panels, "tip": tip, "box": None, "brush": False}


GRID_TIP_CELLS = 40_000   # the all-heads grid carries every block's weight up to this many
GRID_WIDTH, GRID_HEIGHT = 900, 720   # px: the all-heads grid fits in these (pickers below it)
GRID_MIN_PX = 3           # px a block at least: a head of a 30-layer model stays a click target


def grid_cells_for(layers: int, most: int) -> int:
    """Blocks a head's side in the all-heads grid: up to `most`, fewer where the model's
    layers would not fit GRID_HEIGHT at GRID_MIN_PX a block (30 layers: 7; MiniLM's 6: 12)."""
    return max(2, min(most, GRID_HEIGHT // (max(1, layers) * GRID_MIN_PX) - 1))


def grid_figure(image: np.ndarray, blocks: int, labels: Sequence[str], lang: str = "en", *,
                current: tuple[int, int] | None = None) -> dict:
    """Every head of a model at a glance (headstats.grid_image: (layers * (b + 1),
    heads * (b + 1)) pooled weights, NaN in the gaps between heads), layers down and heads
    across, on one 'blues' scale over [0, 1]; `current` (layer, head) framed in red. A click
    on a head is sent back as the trigger {"layer": l, "head": h}. The tooltip names the head
    and, up to GRID_TIP_CELLS blocks, the block's query and key labels and its weight."""
    def m(key: str, **values) -> str:
        return translate(lang, f"model.{key}", **values)

    step = blocks + 1
    rows, cols = image.shape
    layers, heads = rows // step, cols // step
    px = max(1, min(5, GRID_WIDTH // max(cols, 1), GRID_HEIGHT // max(rows, 1)))  # MiniLM: 5

    def ticks(count: int, key: str) -> list:
        every = max(1, count // 16)                                 # at most ~16 labels
        return [[(i * step + blocks / 2) * px, f"{m(key)}{i}"] for i in range(0, count, every)]

    panel = {"title": "", "legend": legend("blues", (0.0, 1.0), m("weight")),
             "image": colors.png_data_url(colors.colorize(image, (0.0, 1.0), "blues"))}
    tip = {"titles": {name: m(name) for name in ("layer", "head", "query", "key", "weight")},
           "labels": list(labels),
           "values": _json_values(image, 3) if image.size <= GRID_TIP_CELLS else None}
    layout = {"kind": "grid", "layers": layers, "heads": heads, "blocks": blocks, "px": px,
              "x": {"title": m("grid_heads"), "ticks": ticks(heads, "grid_head")},
              "y": {"title": m("grid_layers"), "ticks": ticks(layers, "grid_layer")},
              "legends": [True]}
    return {"layout": _layout_key(layout), **layout, "panels": [panel], "tip": tip,
            "current": list(current) if current is not None else None, "box": None,
            "brush": False, "scroll_hint": _t(lang, "scroll_hint")}


ROW_COLORS = ("#2b6cb0", "#d1495b")   # scaled, unscaled: the colours of the bar version
ROW_HEIGHT = 300                      # px: the plot area of a row figure


def row_figure(line: Mapping[str, np.ndarray], tokens: Sequence[str], lang: str = "en", *,
               title: str = "") -> dict:
    """One query's attention over all n keys, scaled and unscaled, as two step lines (line:
    frames.window of that query over every key, (1, n) matrices; a key the mask hides is
    NaN, a gap in the lines) under `title`; the tooltip of a key carries its token,
    position, both weights and its raw score."""
    n = len(tokens)

    def over_keys(column: str, digits: int) -> list:
        return _json_values(np.asarray(line[column])[:1, :n], digits)[0]          # (n,)

    series = [{"name": _t(lang, f"kind_{kind}"), "color": color, "values": over_keys(column, 4)}
              for kind, column, color in (("scaled", "weight", ROW_COLORS[0]),
                                          ("unscaled", "unscaled_weight", ROW_COLORS[1]))]
    axis = {"x": {"title": _t(lang, "axis_key_position"),
                  "ticks": [int(t) for t in nice_ticks(0, n - 1, 8)]},
            "y": {"title": _t(lang, "axis_weight"), "ticks": nice_ticks(0, 1, 5)}}
    tip = {"titles": {name: _t(lang, f"tip_{name}") for name in
                      ("key_token", "key_pos", "weight", "unscaled_weight", "raw_score")},
           "key_tokens": list(tokens), "raw_score": over_keys("raw_score", 3)}
    layout = {"kind": "row", "n": n, **axis, "names": [s["name"] for s in series]}
    return {"layout": _layout_key(layout), **layout, "height": ROW_HEIGHT, "panels": [],
            "title": title, "series": series, "tip": tip, "box": None, "brush": False,
            "scroll_hint": _t(lang, "scroll_hint")}


BARS_HEIGHT = 200      # px: the plot area of a bars figure
BAR_LABELS_MAX = 64    # up to this many bars each is labelled with its token; past it, positions


def bars_figure(heights: np.ndarray, shades: np.ndarray, tokens: Sequence[str], *,
                titles: Mapping[str, str], scheme: str = "blues", width: int = 740,
                scroll_hint: str = "") -> dict:
    """One bar a key: `heights` (n,) on a linear axis from 0 to a round top, each bar coloured
    by its `shades` (n,) on a [0, 1] `scheme` scale (as a Vega bar chart with that colour
    scale colours it), the tokens under the bars ("token ·pos") up to BAR_LABELS_MAX.
    titles: "x", "y" (the heights) and "shade" (the legend), and "token", "pos" for the
    tooltip, which carries a bar's token, position, height and shade. scroll_hint: the line
    shown above the figure while it is wider than its column (it then scrolls sideways)."""
    height = np.asarray(heights, dtype=np.float64)                              # (n,)
    shade = np.asarray(shades, dtype=np.float64)                                # (n,)
    n = len(tokens)
    most = float(np.nanmax(height)) if n and np.isfinite(height).any() else 0.0
    ticks = nice_ticks(0.0, most or 1.0, 4)
    if ticks[-1] < most:                                       # the axis ends on a round tick
        ticks.append(round(2 * ticks[-1] - ticks[-2], 12))
    top, step = ticks[-1], ticks[1] - ticks[0]
    rgba = colors.colorize(shade[None, :], (0.0, 1.0), scheme)[0]               # (n, 4)
    x = ({"labels": [f"{clip_label(tok)} ·{pos}" for pos, tok in enumerate(tokens)]}
         if n <= BAR_LABELS_MAX else {"ticks": [int(t) for t in nice_ticks(0, n - 1, 8)]})
    layout = {"kind": "bars", "n": n, "width": width, "height": BARS_HEIGHT,
              "x": {"title": titles["x"], **x},
              "y": {"title": titles["y"], "ticks": [[t / top, _tick_label(t, step)]
                                                    for t in ticks]},
              "legend": legend(scheme, (0.0, 1.0), titles["shade"])}
    tip = {"titles": {name: titles[name] for name in ("token", "pos", "y", "shade")},
           "tokens": list(tokens)}
    return {"layout": _layout_key(layout), **layout, "panels": [], "top": top,
            "heights": _json_values(height[None, :], 3)[0],
            "shades": _json_values(shade[None, :], 3)[0],
            "colors": ["#%02x%02x%02x" % tuple(c[:3]) for c in rgba.tolist()],
            "tip": tip, "box": None, "brush": False, "scroll_hint": scroll_hint}


MAGIC = b"AEF1"   # a packed figure: MAGIC, uint32 little-endian JSON length, JSON, PNGs
_URL_HEAD = "data:image/png;base64,"


def pack(figure: dict) -> bytes:
    """The figure as the browser's component reads it (attention/ui/canvas.js `unpack`):
    each panel's "image" becomes {"id": a digest of the PNG (the browser keeps decoded
    images by it), "png": [offset, length] into the bytes after the JSON}."""
    pngs, panels, offset = [], [], 0
    for panel in figure["panels"]:                # a row figure has none
        png = base64.b64decode(panel["image"][len(_URL_HEAD):])
        ref = {"id": hashlib.sha1(png).hexdigest()[:20], "png": [offset, len(png)]}
        panels.append({**panel, "image": ref})
        pngs.append(png)
        offset += len(png)
    head = json.dumps({**figure, "panels": panels}, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")
    return b"".join([MAGIC, struct.pack("<I", len(head)), head, *pngs])


def amend(packed: bytes, **fields) -> bytes:
    """A packed figure with more top-level fields, ones it lacks (the grid's framed head):
    its JSON closed again after them, its PNGs as they were. A grid of MiniLM's 72 heads
    carries 7,200 tooltip weights: packing it again on every pick was 1.1 ms, amending it is
    0.01 ms."""
    (size,) = struct.unpack("<I", packed[4:8])
    head = packed[8:8 + size]
    if packed[:4] != MAGIC or head[-1:] != b"}" or not fields:
        raise ValueError("not a packed figure, or no fields")
    extra = json.dumps(fields, allow_nan=False, separators=(",", ":")).encode("utf-8")
    head = head[:-1] + b"," + extra[1:]                             # {...} + {"k":v} -> {...,"k":v}
    return b"".join([MAGIC, struct.pack("<I", len(head)), head, packed[8 + size:]])


def unpack(data: bytes) -> dict:
    """The figure `pack` packed (tests read what the page sent with it)."""
    if data[:4] != MAGIC:
        raise ValueError("not a packed figure")
    (size,) = struct.unpack("<I", data[4:8])
    figure = json.loads(data[8:8 + size].decode("utf-8"))
    body = 8 + size
    for panel in figure["panels"]:
        start, length = panel["image"]["png"]
        png = data[body + start:body + start + length]
        panel["image"] = _URL_HEAD + base64.b64encode(png).decode("ascii")
    return figure
