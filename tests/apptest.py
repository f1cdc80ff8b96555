"""Helpers for AppTest-based page tests."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from streamlit.testing.v1 import AppTest

from attention.spec import AttentionSpec
from attention.ui.pages import SCRIPTS

ROOT = Path(__file__).resolve().parent.parent
PAGE_FILES = list(SCRIPTS)   # every page, from the one list (attention/ui/pages.py)


def open_page(path: str, spec: AttentionSpec | None = None, *, timeout: float = 60,
              **params: str) -> AppTest:
    """A fresh session opened on `path` with the spec and params in its URL.

    Entered through app.py and switched to `path`, as a browser does: a page under pages/
    run as the entry script cannot resolve the sidebar's page links."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    if path != "app.py":
        at.switch_page(path)
    for key, value in {**(spec.to_query() if spec is not None else {}), **params}.items():
        at.query_params[key] = value
    return at.run()


run_page = open_page


def explanation_steps(draw) -> tuple[str, list]:
    """(title key, [(text key, formula)...]) of the explanation `draw` makes (ui/explain.py),
    caught from its own call instead of drawn."""
    caught = []
    original = draw.__globals__["explanation"]
    draw.__globals__["explanation"] = lambda key, steps: caught.extend([key, list(steps)])
    try:
        draw()
    finally:
        draw.__globals__["explanation"] = original
    return caught[0], caught[1]


def open_part(at: AppTest, part: str) -> AppTest:
    """Open the Model heads page's part `part` (heads, table, iv, upload), as a click on its
    button does."""
    from attention.ui.views.model import PART_VIEW

    at.session_state["view_" + PART_VIEW] = part
    return at.run()


def open_menu(at: AppTest, key: str) -> AppTest:
    """Open the expander or popover `key` that draws its content only while open (the share
    menu, the snapshot box, a Download menu), as a click does: a rerun with it open."""
    at.session_state[key] = True
    return at.run()


def chart_frames(at: AppTest) -> list[pd.DataFrame]:
    """Every dataset of every vega-lite chart on the page, as DataFrames."""
    frames = []
    for chart in at.get("vega_lite_chart"):
        for dataset in chart.proto.datasets:
            frames.append(pa.ipc.open_stream(io.BytesIO(dataset.data.data)).read_all().to_pandas())
    return frames


CHARTS = ("vega_lite_chart", "bidi_component")     # Vega charts, canvas figures


def chart_places(at: AppTest, kinds: tuple[str, ...] = CHARTS) -> list[tuple[int, ...]]:
    """Where each chart (Vega or canvas; or each element of `kinds`) sits in the page's tree:
    block indices from the main area down. A switch that leaves them equal moved no chart
    (ui.chart.place)."""
    out = []

    def walk(node, path):
        for index, child in getattr(node, "children", {}).items():
            if getattr(child, "type", None) in kinds:
                out.append((*path, index))
            walk(child, (*path, index))
    walk(at.main, ())
    return out


def _refuse_constant(name: str):
    raise AssertionError(f"{name} in a canvas figure: JSON.parse would refuse it")


def figures(at: AppTest) -> list[dict]:
    """Every canvas heatmap figure on the page (attention/charts/canvas.py), unpacked from
    the bytes the browser receives; asserts on the way that none holds NaN or Infinity."""
    from attention.charts.canvas import unpack

    out = []
    for element in at.get("bidi_component"):
        figure = unpack(element.proto.bytes)
        json.loads(json.dumps(figure), parse_constant=_refuse_constant)   # no NaN, no Infinity
        out.append(figure)
    return out


def headings(at: AppTest) -> list[str]:
    """The page's subheaders and the headings its canvas figures draw above themselves
    (canvas.figure_view's `heading`): every section title a reader sees."""
    return [s.value for s in at.subheader] + [f["heading"] for f in figures(at) if f.get("heading")]


def captions(at: AppTest) -> list[str]:
    """The page's captions and the notes its canvas figures draw above themselves
    (canvas.figure_view's `notes`)."""
    return [c.value for c in at.caption] + [note for f in figures(at) for note in f.get("notes", ())]


def figure_images(figure: dict) -> dict[str, np.ndarray]:
    """A canvas figure's panel images as RGBA arrays, by panel value (scaled, unscaled,
    difference): (rows, cols, 4), one pixel a cell or a block."""
    import base64

    from PIL import Image

    from attention.charts.heatmap import VALUES

    return {value: np.asarray(Image.open(io.BytesIO(base64.b64decode(
                panel["image"].split(",", 1)[1]))))
            for value, panel in zip(VALUES, figure["panels"])}


TIP = 5e-5 + 1e-9   # a figure's weights as its tooltips carry them: 4 decimals


def figure_cells(figure: dict) -> pd.DataFrame:
    """A cells figure as frames.cells-like rows, one per drawn (unmasked) cell: positions and
    tokens from its tooltips, numbers as the tooltips carry them (rounded: TIP_DIGITS)."""
    tip = figure["tip"]
    rows = []
    for i, query_token in enumerate(tip["query_tokens"]):
        for j, key_token in enumerate(tip["key_tokens"]):
            if next(iter(tip["values"].values()))[i][j] is None:        # masked
                continue
            rows.append({"query_pos": tip["q0"] + i, "key_pos": tip["k0"] + j,
                         "query_token": query_token, "key_token": key_token,
                         **{name: grid[i][j] for name, grid in tip["values"].items()}})
    return pd.DataFrame(rows)


def comparison_cells(at: AppTest) -> list[pd.DataFrame]:
    """The cells of every scaled | unscaled | difference figure drawn cell by cell."""
    return [figure_cells(f) for f in figures(at)
            if f["kind"] == "cells" and "weight" in f["tip"]["values"]]


def grid_cells(at: AppTest) -> list[pd.DataFrame]:
    """Per all-heads grid figure on the page, one row per block it draws: layer, head, qb, kb
    and its weight as the tooltip carries it (3 decimals)."""
    out = []
    for figure in figures(at):
        if figure["kind"] != "grid":
            continue
        step = figure["blocks"] + 1
        rows = [{"layer": r // step, "head": c // step, "qb": r % step, "kb": c % step,
                 "weight": v}
                for r, line in enumerate(figure["tip"]["values"]) for c, v in enumerate(line)
                if v is not None]
        out.append(pd.DataFrame(rows))
    return out
