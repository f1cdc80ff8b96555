"""Heatmap chart builders: data equal to the analysis, positions not token text, no NaN."""
import base64
import io
import json
import math
import re

import altair as alt
import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from attention.analysis import frames
from attention.analysis import analyze
from attention.charts import heatmap as charts
from attention.charts import heads_grid as grid_charts
from attention.files.export import chart_spec
from attention.charts.colors import colorize
from attention.charts.vega import page_spec
from attention.analysis.pooled import pooled_cells, pooled_matrices
from attention.measures.pooling import blocks_for
from attention.spec import AttentionSpec

CAT = AttentionSpec(tokens=tuple("the cat sat on the mat".split()), heads=2, d_k=8, d_model=16)


@pytest.fixture(scope="module")
def cat():
    return analyze(CAT)


def spec_of(chart) -> dict:
    return chart_spec(chart)


def data_of(spec: dict) -> pd.DataFrame:
    """The chart's top-level dataset (the one all panels share)."""
    values = spec["datasets"][spec["data"]["name"]]
    return pd.DataFrame(values)


def panels(spec: dict) -> list[dict]:
    """Each panel's rect layer (the first layer of every hconcat entry)."""
    return [p["layer"][0] for p in spec["hconcat"]]


def eval_label_expr(expr: str, value: int) -> str:
    """Evaluate our labelExpr form `[...labels...][datum.value - start]` in Python."""
    match = re.fullmatch(r"(\[.*\])\[datum\.value - (\d+)\]", expr)
    assert match, expr
    return json.loads(match.group(1))[value - int(match.group(2))]


def test_the_cat_sat_on_the_mat_is_a_6_by_6_grid_keyed_by_position(cat):
    frame = frames.cells(cat, heads=[0])
    chart = charts.comparison_chart(frame, charts.cell_axes(cat.tokens, range(6), range(6)))
    spec = spec_of(chart)
    data = data_of(spec)
    assert len(data) == 36                                        # not 25: "the" twice
    assert sorted(set(data["query_pos"])) == list(range(6))
    for layer in panels(spec):
        x, y = layer["encoding"]["x"], layer["encoding"]["y"]
        assert (x["field"], y["field"]) == ("key_pos", "query_pos")
        assert x["scale"]["domain"] == y["scale"]["domain"] == list(range(6))
    axis = panels(spec)[0]["encoding"]["y"]["axis"]
    labels = [eval_label_expr(axis["labelExpr"], p) for p in range(6)]
    assert labels == list(CAT.tokens)                             # positions 0 and 4 both "the"


def test_chart_data_equals_the_analysis(cat):
    for head in range(cat.heads):
        frame = frames.cells(cat, heads=[head])
        data = data_of(spec_of(charts.comparison_chart(
            frame, charts.cell_axes(cat.tokens, range(6), range(6)))))
        raw = cat.q[head] @ cat.k[head].T                           # (n, n) q.k by hand
        for row in data.itertuples():
            q, k = row.query_pos, row.key_pos
            assert row.weight == pytest.approx(float(cat.scaled.weights[head, q, k]), abs=1e-6)
            assert row.unscaled_weight == pytest.approx(float(cat.unscaled.weights[head, q, k]), abs=1e-6)
            assert row.raw_score == pytest.approx(float(raw[q, k]), rel=1e-5, abs=1e-5)
            assert row.scaled_score == pytest.approx(float(raw[q, k]) / math.sqrt(8), rel=1e-5, abs=1e-5)
            assert row.difference == pytest.approx(row.weight - row.unscaled_weight, abs=1e-6)
            assert (row.query_token, row.key_token) == (CAT.tokens[q], CAT.tokens[k])


def test_rendered_axis_labels_and_cell_numbers(cat):
    """Render the chart (vl-convert runs Vega): the y axis reads the tokens top to bottom,
    repeated tokens included, and each cell prints its own weight."""
    import vl_convert as vlc

    tokens = ("zebra", "quokka", "zebra", "<b>x</b>", "猫")
    a = analyze(AttentionSpec(tokens=tokens, heads=1, d_k=4, d_model=8))
    chart = charts.comparison_chart(frames.cells(a), charts.cell_axes(tokens, range(5), range(5)))
    svg = vlc.vegalite_to_svg(chart_spec(chart))
    y_labels = re.findall(r'<text text-anchor="end" transform="translate\(-2,[\d.]+\)"[^>]*>([^<]*)</text>', svg)
    assert y_labels == ["zebra", "quokka", "zebra", "&lt;b&gt;x&lt;/b&gt;", "猫"]   # panel 1 only
    x_labels = re.findall(r'rotate\(270\) translate\(0,4\)"[^>]*>([^<]*)</text>', svg)
    assert x_labels[:5] == y_labels and len(x_labels) == 15                      # three panels
    mark_texts = re.search(r'<g class="mark-text role-mark[^"]*"[^>]*>(.*?)</g>', svg).group(1)
    printed = re.findall(r">([^<]*)</text>", mark_texts)                        # scaled panel
    w = a.scaled.weights[0].flatten()                                            # query-major
    assert [float(x) for x in printed] == pytest.approx(w.tolist(), abs=0.005)


def colour_domains(spec: dict) -> list[list[float]]:
    """Per panel, the ends its colour scale spans: the rows of its invisible end points."""
    out = []
    for value, p in zip(charts.VALUES, spec["hconcat"]):
        (ends,) = [layer for layer in p["layer"] if layer["mark"].get("opacity") == 0]
        assert ends["mark"]["type"] == "point" and ends["encoding"]["color"]["field"] == value
        out.append([row[value] for row in spec["datasets"][ends["data"]["name"]]])
    return out


def test_colour_scales_shared_for_weights_and_centred_for_differences(cat):
    frame = frames.cells(cat, heads=[1])
    spec = spec_of(charts.comparison_chart(frame, charts.cell_axes(cat.tokens, range(6), range(6))))
    scaled, unscaled, diff = (p["encoding"]["color"]["scale"] for p in panels(spec))
    assert "domain" not in scaled and scaled["nice"] is False and scaled["zero"] is False
    top = max(frame["weight"].max(), frame["unscaled_weight"].max())
    d_scaled, d_unscaled, d_diff = colour_domains(spec)
    assert d_scaled == d_unscaled == [0, pytest.approx(top)]
    assert scaled["scheme"] == unscaled["scheme"]
    m = frame["difference"].abs().max()
    assert d_diff == [pytest.approx(-m), pytest.approx(m)] and diff["domainMid"] == 0
    own = spec_of(charts.comparison_chart(frame, charts.cell_axes(cat.tokens, range(6), range(6)),
                                          shared=False))
    assert colour_domains(own)[0] == [0, pytest.approx(frame["weight"].max())]


def test_colours_drawn_are_those_of_the_explicit_domain(cat):
    """vl-convert's Vega draws the chart (domain from the end points) pixel for pixel as the
    same chart with the domain written into each scale and no end points."""
    import vl_convert as vlc

    frame = frames.cells(cat, heads=[1])
    for shared in (True, False):
        spec = spec_of(charts.comparison_chart(
            frame, charts.cell_axes(cat.tokens, range(6), range(6)), shared=shared))
        explicit = json.loads(json.dumps(spec))
        for p, domain in zip(explicit["hconcat"], colour_domains(spec)):
            ends = p["layer"].pop()
            legend = ends["encoding"]["color"].get("legend", {})
            for layer in p["layer"]:
                colour = layer["encoding"]["color"]
                if "field" in colour:
                    colour["scale"]["domain"] = domain
                    colour["legend"] = legend
        ours, ref = (np.asarray(Image.open(io.BytesIO(vlc.vegalite_to_png(s, scale=1))))
                     for s in (spec, explicit))
        assert ours.shape == ref.shape
        assert np.abs(ours.astype(int) - ref.astype(int)).max() <= 2


def test_another_head_is_the_same_spec_with_other_data(cat):
    """What the browser draws in place: a head change (or a new zoom box on the overview)
    changes the data sets only, never the spec's JSON, and the layout is built once."""
    axes = charts.cell_axes(cat.tokens, range(6), range(6))
    one, two = (charts.comparison_chart(frames.cells(cat, heads=[h]), axes) for h in (0, 1))
    assert one.spec_json is two.spec_json                       # the cached layout
    assert set(one.data) == {"cells", "extent"} and not one.data["cells"].equals(two.data["cells"])
    long = analyze(AttentionSpec(tokens=tuple(f"t{i}" for i in range(100)), heads=2))
    figures = []
    for head, box in ((0, (0, 16, 0, 16)), (1, (32, 48, 8, 24))):
        pooled, blocks = pooled_matrices(long, [head], 64, "max")
        images = charts.pooled_images({v: m.numpy() for v, m in pooled.items()})
        figures.append(charts.overview_chart(images, charts.block_axes(blocks, "max"), box=box))
    one, two = figures
    assert one.spec_json == two.spec_json
    assert one.data["span"]["url_weight"][0] != two.data["span"]["url_weight"][0]
    assert [f.data["box"].to_dict("records") for f in figures] == \
        [[{"q0": 0, "q1": 16, "k0": 0, "k1": 16}], [{"q0": 32, "q1": 48, "k0": 8, "k1": 24}]]
    # the page's spec: the same JSON, the data sets as DataFrames beside it
    spec = page_spec(one)
    assert json.dumps({k: v for k, v in spec.items() if k != "datasets"}) == one.spec_json
    assert all(isinstance(d, pd.DataFrame) for d in spec["datasets"].values())


def test_numbers_in_cells_only_when_small(cat):
    small = spec_of(charts.comparison_chart(frames.cells(cat, heads=[0]),
                                            charts.cell_axes(cat.tokens, range(6), range(6))))
    assert [layer["mark"]["type"] for layer in small["hconcat"][0]["layer"]] == ["rect", "text", "point"]
    a = analyze(AttentionSpec(tokens=tuple(f"w{i}" for i in range(20)), heads=1))
    big = spec_of(charts.comparison_chart(frames.cells(a), charts.cell_axes(a.tokens, range(20), range(20))))
    assert [layer["mark"]["type"] for layer in big["hconcat"][0]["layer"]] == ["rect", "point"]


def test_tooltip_has_tokens_positions_scores_and_weights(cat):
    spec = spec_of(charts.comparison_chart(frames.cells(cat, heads=[0]),
                                           charts.cell_axes(cat.tokens, range(6), range(6))))
    fields = [t["field"] for t in panels(spec)[0]["encoding"]["tooltip"]]
    assert fields == ["query_token", "query_pos", "key_token", "key_pos", "raw_score",
                      "scaled_score", "weight", "unscaled_weight", "difference"]


def test_causal_zoom_window_has_no_nan_and_keeps_empty_columns():
    a = analyze(AttentionSpec(tokens=tuple(f"t{i}" for i in range(12)), causal=True, heads=1))
    queries, keys = range(2, 6), range(3, 9)
    frame = frames.cells(a, queries=queries, keys=keys)
    spec = spec_of(charts.comparison_chart(frame, charts.cell_axes(a.tokens, queries, keys)))
    data = data_of(spec)
    assert len(data) == sum(1 for q in queries for k in keys if k <= q)
    assert not data.select_dtypes("number").isna().any().any()
    assert panels(spec)[0]["encoding"]["x"]["scale"]["domain"] == list(keys)   # masked keys stay
    assert eval_label_expr(panels(spec)[0]["encoding"]["x"]["axis"]["labelExpr"], 8) == "t8"


def overview(a, max_blocks=64, how="max", box=None, shared=True):
    pooled, blocks = pooled_matrices(a, [0], max_blocks, how)
    images = charts.pooled_images({v: m.numpy() for v, m in pooled.items()}, shared)
    return ({v: m[0] for v, m in pooled.items()}, images,
            charts.overview_chart(images, charts.block_axes(blocks, how), box=box, shared=shared))


def heads_grid(a, max_blocks=16, value="weight"):
    pooled, blocks = pooled_matrices(a, list(range(a.heads)), max_blocks, "max")
    images = charts.pooled_images({v: m.numpy() for v, m in pooled.items()})
    return grid_charts.heads_grid_image_chart(images[value], charts.block_axes(blocks, "max"), value)


def png_pixels(url: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))


def test_overview_is_one_image_per_panel_coloured_from_the_pooled_matrix():
    a = analyze(AttentionSpec(tokens=tuple(f"t{i}" for i in range(300)), heads=1, causal=True))
    pooled, images, chart = overview(a, 64, box=(10, 26, 0, 16))
    spec = spec_of(chart)
    assert spec["usermeta"]["embedOptions"]["renderer"] == "canvas"
    top = float(torch.stack([pooled["weight"], pooled["unscaled_weight"]]).nan_to_num(0).max())
    (span,) = spec["datasets"][spec["data"]["name"]]             # every panel's image row
    for value, entry, domain in zip(charts.VALUES, spec["hconcat"], colour_domains(spec)):
        image, legend, box = entry["layer"]
        assert image["mark"]["type"] == "image"
        assert image["encoding"]["url"]["field"] == f"url_{value}"
        assert span[f"url_{value}"] == images[value]["urls"][0]
        assert {k: span[k] for k in ("key_start", "key_stop", "query_start", "query_stop")} \
            == {"key_start": 0, "key_stop": 300, "query_start": 0, "query_stop": 300}
        assert image["encoding"]["y"]["scale"]["reverse"] is True   # query 0 at the top
        pixels = png_pixels(images[value]["urls"][0])                  # (60, 60, 4): blocks of 5
        matrix = pooled[value].numpy()
        assert pixels.shape == (60, 60, 4)
        assert ((pixels[..., 3] == 0) == np.isnan(matrix)).all()  # masked blocks transparent
        lo, hi = images[value]["domain"]
        if value == "difference":
            assert lo == -hi and hi == pytest.approx(float(np.nanmax(np.abs(matrix))), rel=1e-6)
        else:
            assert (lo, hi) == (0.0, pytest.approx(top, rel=1e-6))
        np.testing.assert_array_equal(pixels, colorize(matrix, (lo, hi), images[value]["scheme"]))
        assert domain == [lo, hi] and "domain" not in legend["encoding"]["color"]["scale"]
        assert (legend["encoding"]["color"]["legend"] is None) == (value == "weight")
        assert box["mark"]["stroke"] == charts.BOX_COLOR
        assert spec["datasets"][box["data"]["name"]] == [{"q0": 10, "q1": 26, "k0": 0, "k1": 16}]


def test_overview_draws_as_vega_would_draw_the_rects():
    """vl-convert's Vega draws the overview image where one rect per block would be drawn,
    in the same colours (the image replaces the rects; nothing moves or changes colour)."""
    import vl_convert as vlc

    a = analyze(AttentionSpec(tokens=tuple(f"t{i}" for i in range(40)), heads=1))
    _, images, chart = overview(a, 8)
    blocks = pooled_cells(a, [0], 8, "max")                       # 8 x 8 blocks of 5 x 5
    axes = charts.block_axes(blocks_for(40, 8), "max")
    panels = []
    for i, value in enumerate(charts.VALUES):                     # same axes, titles and size
        image = images[value]
        panels.append(alt.Chart(blocks).mark_rect().encode(
            **charts.xy(axes, "en", show_y=i == 0),
            color=charts._color(value, alt.Scale(scheme=image["scheme"], domain=list(image["domain"])),
                                "en", True, value != "weight", charts.PANEL)
        ).properties(width=charts.PANEL, height=charts.PANEL,
                     title=charts.text("en", f"panel_{value}")))
    rects = alt.hconcat(*panels, spacing=12,
                        resolve=alt.Resolve(scale=alt.ScaleResolveMap(color="independent")))
    drawn = [np.asarray(Image.open(io.BytesIO(vlc.vegalite_to_png(spec_of(c), scale=1))))[..., :3]
             .astype(int) for c in (chart, rects)]
    # Where the rect drawing is coloured (blocks, legends), the image drawing has the same
    # colour, bar anti-aliased block edges.
    assert drawn[0].shape == drawn[1].shape
    ours, ref = drawn
    coloured = ref.std(axis=-1) > 8                                        # not grey or white
    off = np.abs(ours - ref).max(axis=-1)[coloured]
    assert coloured.sum() > 3 * 200 * 200
    assert off.mean() < 2 and (off > 10).mean() < 0.05


def test_heads_grid_has_every_head_and_one_colour_scale(cat):
    frame = frames.cells(cat)
    spec = spec_of(grid_charts.heads_grid_chart(frame, charts.cell_axes(cat.tokens, range(6), range(6)),
                                           "difference"))
    data = data_of(spec)
    assert len(data) == cat.heads * 36
    assert spec["facet"]["field"] == "head"
    scale = spec["spec"]["encoding"]["color"]["scale"]
    assert scale["domainMid"] == 0 and scale["domain"][0] == -scale["domain"][1]


def test_the_heads_grid_titles_the_picked_head_as_vega_renders_it(cat):
    """Rendered by vl-convert: every panel is titled with its head, the picked head's title
    says so (in Chinese too), and no head is marked when none is picked."""
    import vl_convert as vlc

    frame, axes = frames.cells(cat), charts.cell_axes(cat.tokens, range(6), range(6))

    def titles(current, lang="en"):
        svg = vlc.vegalite_to_svg(chart_spec(grid_charts.heads_grid_chart(frame, axes, "weight", lang,
                                                                     current=current)))
        return re.findall(r">((?:Head|头) \d[^<]*)</text>", svg)                # drawn text

    assert cat.heads == 2
    assert titles(1) == ["Head 0", "Head 1 (picked)"]
    assert titles(None) == ["Head 0", "Head 1"]
    assert titles(0, "zh") == ["头 0（已选）", "头 1"]


def test_row_chart_scaled_vs_unscaled(cat):
    cells = frames.cells(cat, heads=[1], queries=range(2, 3))
    long = grid_charts.row_frame(cells)
    assert len(long) == 12
    spec = spec_of(grid_charts.row_chart(long, cat.tokens))
    data = pd.DataFrame(spec["datasets"][spec["data"]["name"]])
    scaled = data[data["kind"] == long["kind"].iloc[0]].sort_values("key_pos")["value"].to_numpy()
    torch.testing.assert_close(torch.tensor(scaled), cat.scaled.weights[1, 2], check_dtype=False)
    assert spec["mark"]["type"] == "bar"
    assert eval_label_expr(spec["encoding"]["x"]["axis"]["labelExpr"], 4) == "the"


def test_page_spec_draws_exactly_what_the_validated_spec_draws(cat):
    """The page skips altair's validation and names datasets by position (page_spec); both
    specs render the same SVG."""
    import vl_convert as vlc

    a = analyze(AttentionSpec(tokens=tuple(f"t{i}" for i in range(40)), heads=1, causal=True))
    charts_ = [
        charts.comparison_chart(frames.cells(cat, heads=[0]),
                                charts.cell_axes(cat.tokens, range(6), range(6))),
        overview(a, 8, box=(8, 24, 0, 16))[2],
        heads_grid(a, 8),
        grid_charts.heads_grid_chart(frames.cells(cat), charts.cell_axes(cat.tokens, range(6), range(6))),
    ]
    for chart in charts_:
        fast = page_spec(chart)
        assert all(isinstance(d, pd.DataFrame) for d in fast["datasets"].values())
        fast["datasets"] = {name: json.loads(json.dumps(d.to_dict("records"), default=float))
                            for name, d in fast["datasets"].items()}
        # Same marks, positions and colours; aria-labels differ only in float digits
        # (float32 through pandas' JSON vs altair's own serialiser); gradient and clip ids and
        # the view names of a brush's view come from counters.
        strip = lambda svg: re.sub(  # noqa: E731
            r' aria-label="[^"]*"|gradient_\d+|clip\d+|view_\w+', "", svg)
        assert strip(vlc.vegalite_to_svg(fast)) == strip(vlc.vegalite_to_svg(chart_spec(chart)))
