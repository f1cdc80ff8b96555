"""Files a user can download: CSV tables, chart images and a reproducible JSON snapshot."""
from __future__ import annotations

import altair as alt
import pandas as pd

from attention.charts.size import FIT_PX
from attention.charts.vega import Figure


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """UTF-8 CSV with a BOM, so spreadsheet programs read CJK and emoji tokens correctly.
    Cells that start with = + - @ are prefixed with ' so a spreadsheet never runs them."""
    safe = frame.copy()
    for col in safe.columns:
        if safe[col].dtype == object or str(safe[col].dtype) == "string":
            safe[col] = safe[col].map(_defuse)
    return safe.to_csv(index=False).encode("utf-8-sig")


def _defuse(value):
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def chart_spec(chart: alt.TopLevelMixin | Figure) -> dict:
    """The chart's Vega-Lite dict with its data inlined, whatever its size."""
    if isinstance(chart, Figure):
        return chart.inline()
    with alt.data_transformers.disable_max_rows():
        spec = chart.to_dict()
    if spec.get("width") == "container":     # fit_width: a file has no container; the page's
        spec["width"] = FIT_PX               # width, not the renderer's default 300 px
    return spec


def chart_png(chart: alt.TopLevelMixin | Figure, scale: float = 2.0) -> bytes:
    import vl_convert as vlc  # lazy: only a click on "PNG" pays for the renderer

    return vlc.vegalite_to_png(chart_spec(chart), scale=scale)


def chart_svg(chart: alt.TopLevelMixin | Figure) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart_spec(chart)).encode("utf-8")
