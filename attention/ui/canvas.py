"""The canvas heatmap component: draws a figure of attention/charts/canvas.py in the page.

A Streamlit v2 component (no iframe: its script runs in the page and draws into the app's
own DOM), so a rerun that sends another figure costs the browser a repaint of a few
canvases instead of a Vega view per chart. Its JavaScript and CSS are the files next to this
one, read once at import.

    figure_view(cells_figure(...), key="hm_cells")
    figure_view(overview_figure(...), key="hm_overview", brush=zoom_to)
    figure_view(grid_figure(...), key="model_grid", pick=open_head)
    figure_view(cells_figure(..., choices=choices("size", ...)), key="hm_cells", size=resize)
    figure_view(matrix_figure(...), key="mh_rollout", heading="Rollout", notes=["How ..."])
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Sequence

import streamlit as st

from attention.charts.canvas import amend, pack

HERE = Path(__file__).parent
_component = st.components.v2.component(
    "attention_heatmap", js=(HERE / "canvas.js").read_text(encoding="utf-8"),
    css=(HERE / "canvas.css").read_text(encoding="utf-8"), isolate_styles=False)


def figure_view(figure: dict | bytes, *, key: str, width: str = "content",
                heading: str | None = None, notes: Sequence[str] = (),
                **events: Callable[[], None]) -> None:
    """Draw `figure` (or a figure already packed); width "stretch" for a figure as wide as
    the column (a row). `heading` and `notes` are drawn by the figure above it, as a
    subheader and captions would be (plain text): a section re-sent on every click then
    re-renders one element, not three (docs/decisions.md, "The canvas heatmap").
    events: brush=callback (a box dragged on an overview: `brush(key)`),
    pick=callback (a head clicked on the grid: `pick(key, layers, heads)`) or, for a
    figure's choices, a callback under their event (`choice(key, event, allowed)`), called
    before the rerun."""
    text = {"heading": heading, "notes": list(notes)} if heading or notes else {}
    if isinstance(figure, bytes):
        data = amend(figure, **text) if text else figure
    else:
        data = pack({**figure, **text})
    _component(data=data, key=key, width=width,
               **{f"on_{event}_change": callback for event, callback in events.items()})


def _trigger(key: str, event: str):
    result = st.session_state.get(key)
    return result.get(event) if isinstance(result, dict) else None


def pick(key: str, layers: int, heads: int) -> tuple[int, int] | None:
    """The head last clicked on the grid drawn under `key`, as (layer, head), or None."""
    return parse_pick(_trigger(key, "pick"), layers, heads)


def parse_pick(value, layers: int, heads: int) -> tuple[int, int] | None:
    """A clicked head as the browser sent it, kept only when it is a head of the model."""
    if not isinstance(value, dict):
        return None
    layer, head = value.get("layer"), value.get("head")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (layer, head)):
        return None
    return (layer, head) if 0 <= layer < layers and 0 <= head < heads else None


def choice(key: str, event: str, allowed: tuple[int | str, ...]) -> int | str | None:
    """The choice button (charts/canvas.py `choices`) last clicked on the figure drawn under
    `key`, sent as `event`, or None."""
    return parse_choice(_trigger(key, event), allowed)


def parse_choice(value, allowed: tuple[int | str, ...]) -> int | str | None:
    """A choice as the browser sent it, kept only when it is one of `allowed`, of its type
    (16.0 or True is not the size 16 or 1)."""
    ok = type(value) in (int, str) and value in allowed
    return value if ok else None


def brush(key: str) -> dict | None:
    """The box last dragged on the figure drawn under `key`: {"query_start": [a, b],
    "key_start": [c, d]} in positions, or None."""
    return parse_brush(_trigger(key, "brush"))


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
