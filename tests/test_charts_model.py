"""Model heads charts: what vl-convert's Vega draws from the compact grid data, and one
layout for every head a click picks."""
import html
import re

import pytest
import torch

from attention.charts import model as charts
from attention.export import chart_spec
from attention.headstats import grid_frame

TOKENS = ("[CLS]", "a", '"quote', "<b>x</b>", "猫", "[SEP]")


@pytest.fixture(scope="module")
def frame():
    torch.manual_seed(0)
    weights = torch.softmax(torch.randn(2, 3, 6, 6), -1)                 # (layers, heads, n, n)
    return grid_frame(weights, TOKENS, cells=12)


def test_grid_draws_every_block_with_its_tokens_from_compact_data(frame):
    """Only numbers travel (small integer types); Vega works out each rect's tokens from the
    layout's labels: every drawn block's description names the block's own pieces."""
    import vl_convert as vlc

    figure = charts.grid_chart(frame, "en", current=(1, 2))
    cells = figure.data["cells"]
    assert list(cells.columns) == ["layer", "head", "qb", "kb", "weight"]
    assert cells["layer"].dtype.itemsize == 1 and cells["weight"].dtype.itemsize == 4
    spec = chart_spec(figure)
    assert spec["config"]["mark"]["aria"] is False                       # thousands of rects
    del spec["config"]["mark"]["aria"]        # here: each rect's description, to read it back
    svg = vlc.vegalite_to_svg(spec)
    step = 6 + 1                                       # 6 blocks a head, then one blank
    drawn = {}
    for label in re.findall(r'aria-label="(Head: [^"]*)"', svg):
        # "Head" and "Layer" here are the x and y axes: head * step + key block, and
        # layer * step + query block, as the layout computes them
        fields = dict(part.split(": ", 1) for part in html.unescape(label).split("; "))
        (head, kb), (layer, qb) = divmod(int(fields["Head"]), step), divmod(int(fields["Layer"]), step)
        drawn[layer, head, qb, kb, fields["Query"], fields["Key"]] = float(fields["Weight"])
    expected = {(r.layer, r.head, r.qb, r.kb, r.query, r.key): r.weight for r in frame.itertuples()}
    assert drawn.keys() == expected.keys() and len(drawn) == 2 * 3 * 36
    assert all(drawn[k] == pytest.approx(v, abs=1e-6) for k, v in expected.items())


def test_another_head_or_layer_is_the_same_layout(frame):
    one = charts.grid_chart(frame, "en", current=(0, 0))
    two = charts.grid_chart(frame, "en", current=(1, 2))
    assert one.spec_json is two.spec_json
    assert one.data["cells"].equals(two.data["cells"])                  # resent unchanged
    step = 6 + 1                                                         # 6 blocks + one blank
    assert two.data["box"].to_dict("records") == [{"x": 2 * step - 0.25, "x2": 2 * step + 6.25,
                                                   "y": 1 * step - 0.25, "y2": 1 * step + 6.25}]


def test_an_exported_figure_writes_a_missing_number_as_null():
    """A one-piece text has no previous token: its statistic is NaN, and the PNG/SVG export
    (Figure.inline, then vl-convert) must still be valid JSON that draws."""
    import json

    import pandas as pd
    import vl_convert as vlc

    table = pd.DataFrame({"layer": [0, 0], "head": [0, 1], "to_prev": [float("nan"), 0.25]})
    figure = charts.head_stat_chart(table, "to_prev", "en")
    spec = chart_spec(figure)
    assert [row["to_prev"] for row in spec["datasets"]["table"]] == [None, 0.25]
    json.dumps(spec, allow_nan=False)                                  # strict JSON
    assert vlc.vegalite_to_svg(spec).startswith("<svg")
