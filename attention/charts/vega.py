"""A chart's Vega-Lite dict for the page: data kept apart from the spec, under stable names.

Streamlit's chart element re-creates its Vega view whenever the spec's JSON changes, and only
swaps the data in place when the spec is the same and the datasets differ (that is what makes
a click cheap in the browser: no parse, no compile, no new canvas). `st.altair_chart` names
each dataset by a hash of its content, so any new number is a new spec. Here data sets are
named instead, so a chart whose spec holds no data-derived numbers (domains, image URLs,
thresholds: the builders keep those in columns) keeps one spec across heads, layers and zoom
boxes. Both ways skip altair's JSON-schema validation, which on a big chart takes longer than
building it; the builders' output is validated by the tests instead.

- `Figure`: what the charts a click redraws are built as. Its spec comes from a `layout`, a
  builder of the chart's shape alone whose JSON is kept per set of arguments (so a click
  builds no altair object at all), and its data sets are named by the builder.
- `frozen(chart)`: any altair chart as a Figure (its page_spec's JSON and data sets), for a
  chart a page keeps and sends again unchanged (charts of stored results: ui/cache.figure).
- `page_spec(chart)`: any altair chart, its data sets named by their order in the chart
  (`frame_0`, `frame_1`, ...; not `data_N`, which Vega-Lite gives its own data flow). Every
  encoding must name its type ("x:Q"): with the data detached, altair has no DataFrame to
  guess it from.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import altair as alt
import pandas as pd

from attention.charts.size import shallow_copy

_CHILDREN = ("layer", "hconcat", "vconcat", "concat")
LAYOUTS = 256   # layout JSONs kept (per builder): a few KB each, shared by every session
CANVAS = {"embedOptions": {"renderer": "canvas"}}   # usermeta: big grids draw faster on a canvas
# No per-mark ARIA descriptions: Vega builds one string of every field for each mark (an
# interpreted expression per mark), which slowed a 16 x 16 window as much as its drawing.
# Charts keep their accessible titles; the CSV downloads have every number.
NO_ARIA = alt.Config(mark=alt.MarkConfig(aria=False))


@dataclass(frozen=True)
class Figure:
    """A chart as the page sends it: the JSON of a Vega-Lite spec that holds no data, and the
    data sets its named data refer to."""
    spec_json: str
    data: Mapping[str, pd.DataFrame]

    def page_spec(self) -> dict:
        """For st.vega_lite_chart: the spec with its data sets as DataFrames (shipped as
        Arrow, outside the spec's JSON)."""
        return {**json.loads(self.spec_json), "datasets": dict(self.data)}

    def inline(self) -> dict:
        """A self-contained spec, the data sets written into it (export, vl-convert); a missing
        number is null, as altair writes it."""
        values = {name: json.loads(json.dumps(_records(frame), default=_plain))
                  for name, frame in self.data.items()}
        return {**json.loads(self.spec_json), "datasets": values}


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def _plain(value: Any) -> Any:
    """numpy scalars (float32 cells, bool flags) as JSON numbers and booleans."""
    return value.item() if hasattr(value, "item") else str(value)


def layout(build: Callable[..., alt.TopLevelMixin]) -> Callable[..., str]:
    """Decorator: a builder of a chart with named data only becomes a function of the same
    (hashable) arguments that returns the chart's spec JSON, built once per arguments."""
    @functools.lru_cache(maxsize=LAYOUTS)
    @functools.wraps(build)
    def cached(*args: Any) -> str:
        spec = build(*args).to_dict(validate=False)
        if "datasets" in spec:
            raise ValueError(f"{build.__name__}: a layout holds named data only")
        return json.dumps(spec)

    return cached


def page_spec(chart: alt.TopLevelMixin | Figure) -> dict:
    """The chart's Vega-Lite dict with every data set under the top-level `datasets` as a
    DataFrame: a Figure's named ones, or an altair chart's DataFrame or inline data renamed by
    their order."""
    if isinstance(chart, Figure):
        return chart.page_spec()
    datasets: dict[str, pd.DataFrame] = {}
    spec = _detach(chart, datasets, {}).to_dict(validate=False)
    if datasets:
        spec["datasets"] = datasets
    return spec


def frozen(chart: alt.TopLevelMixin) -> Figure:
    """The chart as a Figure: page_spec's dict without its data sets, as JSON, and the data."""
    spec = page_spec(chart)
    data = spec.pop("datasets", {})
    return Figure(json.dumps(spec), data)


def _detach(chart: Any, datasets: dict[str, pd.DataFrame], names: dict[int, str]) -> Any:
    """A shallow copy of chart whose data (and its children's) is alt.NamedData; the same frame
    used twice keeps one name."""
    bare = shallow_copy(chart)           # chart.copy(deep=False) re-ran a layer's __init__
    data = getattr(bare, "data", alt.Undefined)
    if isinstance(data, alt.InlineData):
        data = pd.DataFrame(data.values)
    if isinstance(data, pd.DataFrame):
        name = names.get(id(data))
        if name is None:
            name = names[id(data)] = f"frame_{len(datasets)}"
            datasets[name] = data
        bare.data = alt.NamedData(name=name)
    for attr in _CHILDREN:
        children = getattr(bare, attr, alt.Undefined)
        if children is not alt.Undefined:
            setattr(bare, attr, [_detach(c, datasets, names) for c in children])
    inner = getattr(bare, "spec", alt.Undefined)   # a facet's (or repeat's) inner chart
    if inner is not alt.Undefined and not isinstance(inner, dict):
        bare.spec = _detach(inner, datasets, names)
    return bare
