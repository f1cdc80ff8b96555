"""Model heads charts drawn by Vega (the grid is the canvas component's:
tests/test_charts_canvas.py)."""
from attention.charts import model as charts
from attention.files.export import chart_spec

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
