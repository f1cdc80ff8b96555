"""The canvas heatmap component: draws a figure of attention/charts/canvas.py in the page.

A Streamlit v2 component (no iframe: its script runs in the page and draws into the app's
own DOM), so a rerun that sends another figure costs the browser a repaint of a few
canvases instead of a Vega view per chart. Its JavaScript and CSS are the files next to this
one, read once at import.

    figure_view(cells_figure(...), key="hm_cells")
    figure_view(overview_figure(...), key="hm_overview", on_brush=zoom_to)
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import streamlit as st

from ..charts.canvas import pack

HERE = Path(__file__).parent
_component = st.components.v2.component(
    "attention_heatmap", js=(HERE / "canvas.js").read_text(encoding="utf-8"),
    css=(HERE / "canvas.css").read_text(encoding="utf-8"), isolate_styles=False)


def figure_view(figure: dict, *, key: str, on_brush: Callable[[], None] | None = None,
                width: str = "content") -> None:
    """Draw `figure`; on_brush: called (before the rerun) when a box was dragged on it, with
    the box at `brush(key)`; width "stretch" for a figure as wide as the column (a row)."""
    _component(data=pack(figure), key=key, width=width,
               **({"on_brush_change": on_brush} if on_brush else {}))


def brush(key: str) -> dict | None:
    """The box last dragged on the figure drawn under `key`: {"query_start": [a, b],
    "key_start": [c, d]} in positions, or None."""
    result = st.session_state.get(key)
    return parse_brush(result.get("brush") if isinstance(result, dict) else None)


def parse_brush(box) -> dict | None:
    """A brush as the browser sent it, kept only when it is two finite numbers an edge (any
    client can send anything)."""
    if not isinstance(box, dict):
        return None
    edges = {name: box.get(name) for name in ("query_start", "key_start")}
    if not all(isinstance(v, list) and len(v) == 2 and all(_finite(x) for x in v)
               for v in edges.values()):
        return None
    return edges


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
