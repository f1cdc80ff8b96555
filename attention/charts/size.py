"""How a single-view chart is sized: its own width and height, not the container's."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Callable

import altair as alt

# width/height are the plotting area; title, axes and legend come on top. Streamlit's default
# ("fit" into width x height) squeezes labels and legend into that box and leaves the plot a
# sliver.
NATURAL_SIZE = alt.AutoSizeParams(type="pad")


def natural_size(chart):
    """The chart with NATURAL_SIZE autosizing."""
    return chart.properties(autosize=NATURAL_SIZE)


# A chart that takes the width the page gives it, labels and legend included: the plotting
# area is what is left. The page gives it FIT_PX, which Streamlit narrows to the column on a
# narrow screen (a phone's 390 px cut a 420 px plot with its labels in half); the height
# stays the chart's own.
FIT_SIZE = alt.AutoSizeParams(type="fit-x", contains="padding")
FIT_PX = 640


# Room on the right for the last x label: fitting to a new width changes the ticks after the
# layout was measured, and a phone's screen cut 2 px of "0.8".
FIT_PADDING = {"left": 5, "top": 5, "right": 12, "bottom": 5}


def fit_width(chart):
    """The chart with FIT_SIZE autosizing, as wide as its container (draw it with
    width=FIT_PX or "stretch")."""
    return with_properties(chart, width="container", autosize=FIT_SIZE, padding=FIT_PADDING)


def with_properties(chart, **values):
    """chart.properties(**values) without altair's JSON-schema check of each value, which
    took most of a chart's build (the Sharper page: 545 -> 335 ms); the same chart object, so
    the same spec. Only for values known to be valid: the tests validate every chart a page
    builds (chart.to_dict())."""
    copy = shallow_copy(chart)
    for key, value in values.items():
        setattr(copy, key, value)
    return copy


def shallow_copy(chart):
    """chart.copy(deep=False) without running the class's __init__ again: a layer's __init__
    deep-copies every layer twice (to merge their parameters), which made each shallow copy
    of a layered chart cost as much as building it. The copy shares the children and has its
    own top-level properties, as chart.copy(deep=False) does."""
    copy = object.__new__(type(chart))
    object.__setattr__(copy, "_args", chart._args)
    object.__setattr__(copy, "_kwds", dict(chart._kwds))
    return copy


@dataclass(frozen=True)
class Panels:
    """A figure of several panels drawn as separate charts, `columns` to a row on a wide
    screen and one under the other on a phone (Streamlit stacks columns below 640 px): a
    Vega-Lite concat or facet keeps its panels' widths and ran 500 px past a phone's screen.
    Every panel is fit_width; `whole` is the same figure as one chart, for the downloads, or
    a function that makes it when a download asks (building the one-chart figure cost the
    Score analysis page's first paint ~130 ms of altair for a file nobody had asked for)."""
    charts: tuple
    columns: int
    whole: alt.TopLevelMixin | Callable[[], alt.TopLevelMixin]


def panel_title(text: str):
    """A panel's title, broken into lines that fit a phone (a list when it needs two)."""
    lines = title_lines(text)
    return lines[0] if len(lines) == 1 else lines


def _units(text: str) -> int:
    """Display width in half-widths: a CJK or full-width character counts two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def title_lines(text: str, units: int = 44) -> list[str]:
    """A chart title broken into lines of at most `units` half-widths (44: about 330 px of a
    bold 13 px title, so it fits a phone's 390 px screen), at spaces or between CJK
    characters. Vega does not wrap a title: it cuts it with an ellipsis ("...每…")."""
    pieces = re.findall(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]|[^\s\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]+\s*|\s+",
                        text)
    lines, line = [], ""
    for piece in pieces:
        if line and _units((line + piece).rstrip()) > units:
            lines.append(line.rstrip())
            line = piece.lstrip()
        else:
            line += piece
    if line.strip():
        lines.append(line.rstrip())
    return lines
