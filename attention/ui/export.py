"""Download buttons for tables and charts; files are made only when the button is clicked."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import altair as alt
import pandas as pd
import streamlit as st

from attention.files import export
from attention.charts.size import Panels
from attention.charts.vega import Figure
from attention.ui.text import t

Chartlike = alt.TopLevelMixin | Figure


def csv_button(frame: pd.DataFrame | Callable[[], pd.DataFrame], file_name: str, *,
               key: str | None = None) -> None:
    """frame: the table, or a function that makes it (called only on a click)."""
    make = frame if callable(frame) else (lambda: frame)
    st.download_button(t("export.csv"), data=lambda: export.csv_bytes(make()),
                       file_name=f"{file_name}.csv", mime="text/csv",
                       icon=":material/table:", key=key or f"csv_{file_name}", on_click="ignore")


@dataclass(frozen=True)
class ChartFiles:
    """One chart's files in a Download menu: PNG and SVG of `chart` (or of what a function
    makes on a click: the Vega drawing of a canvas figure) and, with a table (or a function
    that makes it), its CSV first; `heading` names the chart in a menu of several."""
    chart: Chartlike | Callable[[], Chartlike]
    file_name: str
    table: pd.DataFrame | Callable[[], pd.DataFrame] | None = None
    csv_key: str | None = None
    heading: str = ""


def chart_buttons(chart: Chartlike | Callable[[], Chartlike], file_name: str, table=None,
                  csv_key: str | None = None, *, key: str | None = None) -> None:
    """A Download menu under one chart (see download_menu); Panels: the files of the whole
    figure."""
    if isinstance(chart, Panels):
        chart = chart.whole
    download_menu([ChartFiles(chart, file_name, table, csv_key)], key=key)


def download_popover(key: str | None = None):
    """A Download menu's button, to be filled by download_menu (possibly later in the run:
    a section's top bar holds its menu before the charts below it are drawn).

    key: the menu of a view section (layout.Page.view), named for its place on the page (not
    for the file, which changes with the head): its buttons are drawn only while it is open,
    opening it reruns the section alone. A closed menu then costs a click in that section one
    message instead of four (README, "Performance")."""
    lazy = {"key": key, "on_change": "rerun"} if key else {}
    return st.popover(t("export.download"), icon=":material/download:", **lazy)


def download_menu(charts: Sequence[ChartFiles], *, key: str | None = None, menu=None) -> None:
    """A Download menu with every file of `charts`, each chart's under its heading: in `menu`
    (a download_popover made earlier) or in a new one, lazy under `key`."""
    menu = download_popover(key) if menu is None else menu
    if menu.open is False:                  # a keyed menu, closed: no buttons to draw
        return
    for files in charts:
        make = files.chart if callable(files.chart) else (lambda c=files.chart: c)
        if files.heading:
            menu.caption(files.heading)
        row = menu.container(horizontal=True)           # a chart's buttons side by side
        if files.table is not None:
            with row:
                csv_button(files.table, files.file_name, key=files.csv_key)
        row.download_button(t("export.png"), data=lambda make=make: export.chart_png(make()),
                            file_name=f"{files.file_name}.png", mime="image/png",
                            icon=":material/image:", key=f"png_{files.file_name}",
                            on_click="ignore")
        row.download_button(t("export.svg"), data=lambda make=make: export.chart_svg(make()),
                            file_name=f"{files.file_name}.svg", mime="image/svg+xml",
                            icon=":material/draw:", key=f"svg_{files.file_name}",
                            on_click="ignore")
