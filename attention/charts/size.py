"""How a single-view chart is sized: its own width and height, not the container's."""
from __future__ import annotations

import altair as alt

# width/height are the plotting area; title, axes and legend come on top. Streamlit's default
# ("fit" into width x height) squeezes labels and legend into that box and leaves the plot a
# sliver.
NATURAL_SIZE = alt.AutoSizeParams(type="pad")


def natural_size(chart):
    """The chart with NATURAL_SIZE autosizing."""
    return chart.properties(autosize=NATURAL_SIZE)
