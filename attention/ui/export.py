"""Download buttons for tables and charts; files are made only when the button is clicked."""
from __future__ import annotations

from typing import Callable

import altair as alt
import pandas as pd
import streamlit as st

from .. import export
from ..charts.vega import Figure
from .text import t


def csv_button(frame: pd.DataFrame | Callable[[], pd.DataFrame], file_name: str, *,
               key: str | None = None) -> None:
    """frame: the table, or a function that makes it (called only on a click)."""
    make = frame if callable(frame) else (lambda: frame)
    st.download_button(t("export.csv"), data=lambda: export.csv_bytes(make()),
                       file_name=f"{file_name}.csv", mime="text/csv",
                       icon=":material/table:", key=key or f"csv_{file_name}", on_click="ignore")


def chart_buttons(chart: alt.TopLevelMixin | Figure | Callable[[], alt.TopLevelMixin | Figure],
                  file_name: str, table=None, csv_key: str | None = None, *,
                  key: str | None = None) -> None:
    """A Download menu under a chart: PNG and SVG of it (`chart`, or a function that makes
    it on a click: the Vega drawing of a canvas figure), and with a table (or a function that
    makes it) its CSV first.

    key: the menu of a view section (layout.Page.view), named for its place on the page (not
    for the file, which changes with the head): its buttons are drawn only while it is open,
    opening it reruns the section alone. A closed menu then costs a click in that section one
    message instead of four (README, "Performance")."""
    make = chart if callable(chart) else (lambda: chart)
    lazy = {"key": key, "on_change": "rerun"} if key else {}
    row = st.popover(t("export.download"), icon=":material/download:", **lazy)
    if key and not row.open:
        return
    if table is not None:
        with row:
            csv_button(table, file_name, key=csv_key)
    row.download_button(t("export.png"), data=lambda: export.chart_png(make()),
                        file_name=f"{file_name}.png", mime="image/png", icon=":material/image:",
                        key=f"png_{file_name}", on_click="ignore")
    row.download_button(t("export.svg"), data=lambda: export.chart_svg(make()),
                        file_name=f"{file_name}.svg", mime="image/svg+xml",
                        icon=":material/draw:", key=f"svg_{file_name}", on_click="ignore")
