"""Drawing a chart: every page's altair charts go through `show`, which ships the data apart
from the spec under stable names (charts.vega.page_spec), so a rerun that changes only numbers
updates the chart in place in the browser instead of building a new Vega view; and `place`,
where a switch shows or hides content in the middle of a page, so the charts below keep
their places (and the browser its views of them)."""
from __future__ import annotations

import altair as alt
import streamlit as st

from attention.charts.size import Panels
from attention.charts.vega import Figure, page_spec


def show(chart: alt.TopLevelMixin | Figure | Panels, width: str | int | None = None,
         **kwargs) -> None:
    """Draw an altair chart or a charts.vega.Figure: st.altair_chart without altair's schema
    validation and with stable dataset names. width None: Streamlit's own default (stretch,
    but content for concatenated and faceted charts); kwargs (key, on_select,
    selection_mode) go to st.vega_lite_chart. Panels: each panel as wide as its column, the
    columns a row at a time, so that a phone stacks them in reading order."""
    if isinstance(chart, Panels):
        for start in range(0, len(chart.charts), chart.columns):
            row = chart.charts[start:start + chart.columns]
            for column, panel in zip(st.columns(chart.columns, gap="medium"), row):
                with column:
                    st.vega_lite_chart(spec=page_spec(panel), width="stretch")
        return
    st.vega_lite_chart(spec=page_spec(chart), width=width, **kwargs)


def place():
    """A place for content that a switch (toggle, picker) shows or hides, drawn either way:
    `with place(): if shown: ...`. Each element sits at an index in its block, and one that
    moves is unmounted and drawn again from scratch by the browser (a chart re-embedded,
    its Vega view compiled again; a keyed canvas figure is kept); in a place the elements
    below keep their indices. On "Does the model use it?" the Tables toggle's click went
    480 -> 180 ms so; on "Is sharper better?" its Tables toggle no longer embeds the 4
    charts below again."""
    return st.container()
