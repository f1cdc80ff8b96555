"""The canvas heatmap's figures (attention/charts/canvas.py): what the browser draws is the
analysis' numbers, coloured as charts.colors colours them, with the tokens as labels."""
import base64
import json
import math
import struct

import numpy as np
import pytest
import torch

from attention.analysis import frames
from attention.analysis import analyze
from attention.charts import heatmap
from attention.charts.canvas import (BAR_LABELS_MAX, MAGIC, amend, bars_figure, cells_figure,
                                     grid_figure, matrix_figure, nice_ticks, overview_figure,
                                     pack, row_figure, unpack)
from attention.charts.colors import SCHEMES, colorize
from attention.charts.heatmap import NUMBERS_MAX, number_labels
from attention.analysis.pooled import pooled_matrices
from attention.measures.pooling import blocks_for
from attention.spec import AttentionSpec
from attention.measures.heads import grid_frame, grid_image, grid_labels
from attention.ui.canvas import parse_brush, parse_choice, parse_pick
from tests.apptest import TIP, figure_cells, figure_images

CAT = AttentionSpec(tokens=("the", "cat", "sat", "on", "the", "mat"), heads=2, d_k=8,
                    d_model=16, seed=4)


def figure_for(spec: AttentionSpec, head: int, queries: range, keys: range, shared=True):
    a = analyze(spec)
    return a, cells_figure(frames.window(a, head, queries, keys),
                           heatmap.cell_axes(a.tokens, queries, keys), "en", shared=shared)


def test_cells_are_the_heads_weights_coloured_on_one_shared_scale():
    a, figure = figure_for(CAT, 1, range(6), range(6))
    w, u = a.scaled.weights[1].double(), a.unscaled.weights[1].double()   # (6, 6)
    images = figure_images(figure)
    top = max(float(w.max()), float(u.max()))                              # one scale for both
    np.testing.assert_allclose(images["weight"], colorize(w.numpy(), (0, top), "blues"), atol=1)
    np.testing.assert_allclose(images["unscaled_weight"], colorize(u.numpy(), (0, top), "blues"),
                               atol=1)
    m = float((w - u).abs().max())                                         # centred on 0
    np.testing.assert_allclose(images["difference"],
                               colorize((w - u).numpy(), (-m, m), "redblue"), atol=1)
    cells = figure_cells(figure).sort_values(["query_pos", "key_pos"])
    torch.testing.assert_close(torch.tensor(cells["weight"].to_numpy()).view(6, 6), w,
                               atol=TIP, rtol=0)
    raw = a.q[1].double() @ a.k[1].double().T                               # q.k, by hand
    torch.testing.assert_close(torch.tensor(cells["raw_score"].to_numpy()).view(6, 6), raw,
                               atol=5e-4 + 1e-6, rtol=0)
    scaled = raw / math.sqrt(CAT.d_k) / CAT.temperature
    torch.testing.assert_close(torch.tensor(cells["scaled_score"].to_numpy()).view(6, 6), scaled,
                               atol=5e-4 + 1e-6, rtol=0)
    assert figure["y"]["labels"] == list(CAT.tokens) == figure["x"]["labels"]
    assert figure["tip"]["query_tokens"] == list(CAT.tokens)


def test_own_scales_give_each_weight_panel_its_own_legend():
    a, figure = figure_for(CAT, 0, range(6), range(6), shared=False)
    u = a.unscaled.weights[0].double()
    np.testing.assert_allclose(figure_images(figure)["unscaled_weight"],
                               colorize(u.numpy(), (0, float(u.max())), "blues"), atol=1)
    assert [p["legend"] is not None for p in figure["panels"]] == [True, True, True]
    _, shared = figure_for(CAT, 0, range(6), range(6))
    assert [p["legend"] is not None for p in shared["panels"]] == [False, True, True]
    assert shared["panels"][1]["legend"]["title"] == "Weight (both panels)"


def test_a_tiny_negative_difference_prints_as_zero_not_minus_zero():
    assert number_labels(np.array([-0.004, 0.004, -0.05, 0.371, 1.0])) == \
        [".00", ".00", "-.05", ".37", "1.00"]


def test_printed_numbers_and_their_ink_follow_the_cells():
    a, figure = figure_for(CAT, 0, range(6), range(6))
    w = a.scaled.weights[0].double()
    numbers = figure["panels"][0]["numbers"]
    for q, k in [(0, 0), (2, 5), (5, 1)]:
        x = float(w[q, k])
        assert float(numbers[q][k]) == pytest.approx(x, abs=0.005)        # ".37" parses
        assert not numbers[q][k].startswith("0")
    top = max(float(w.max()), float(a.unscaled.weights[0].max()))
    assert figure["panels"][0]["dark"] == (w > 0.55 * top).tolist()
    long = AttentionSpec(tokens=tuple(f"t{i}" for i in range(NUMBERS_MAX + 1)), heads=1)
    _, big = figure_for(long, 0, range(long.n), range(long.n))
    assert all("numbers" not in p for p in big["panels"])                 # too small to read


def test_a_causal_window_leaves_masked_cells_blank_and_the_json_strict():
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(40)), heads=1, causal=True)
    _, figure = figure_for(spec, 0, range(10, 26), range(18, 34))
    json.dumps(figure, allow_nan=False)                      # the browser's JSON.parse takes it
    allowed = np.array([[18 + j <= 10 + i for j in range(16)] for i in range(16)])
    for image in figure_images(figure).values():
        assert ((image[..., 3] == 255) == allowed).all()      # masked cells transparent
    tips = figure["tip"]["values"]["weight"]
    assert all((tips[i][j] is None) == (not allowed[i, j]) for i in range(16) for j in range(16))
    assert all(figure["panels"][0]["numbers"][i][j] == "" for i in range(16) for j in range(16)
               if not allowed[i, j])


def test_long_tokens_are_clipped_on_the_axes_and_whole_in_the_tooltips():
    token = "<img src=x onerror=alert(1)>"
    spec = AttentionSpec(tokens=(token, "b"), heads=1)
    _, figure = figure_for(spec, 0, range(2), range(2))
    assert figure["y"]["labels"][0] == token[: heatmap.LABEL_CHARS - 1] + "…"
    assert figure["tip"]["query_tokens"][0] == token                       # text, as it is


def test_same_window_shape_is_the_same_layout_another_is_not():
    _, a = figure_for(CAT, 0, range(6), range(6))
    _, b = figure_for(CAT, 1, range(6), range(6))
    assert a["layout"] == b["layout"] and a["panels"] != b["panels"]      # repaint only
    other = AttentionSpec(tokens=("a", "cat", "sat", "on", "the", "mat"), heads=2, d_k=8)
    _, c = figure_for(other, 0, range(6), range(6))
    assert c["layout"] == a["layout"] and c["labels_key"] != a["labels_key"]   # relabel only
    _, d = figure_for(CAT, 0, range(5), range(6))
    assert d["layout"] != a["layout"]                                      # another shape: rebuild


def test_overview_is_the_pooled_images_with_the_window_outlined():
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(600)), heads=2)
    a = analyze(spec)
    blocks = blocks_for(a.n, 256)
    pooled, _ = pooled_matrices(a, [1], 256, "max")
    images = heatmap.pooled_images({v: m.numpy() for v, m in pooled.items()})
    figure = overview_figure(images, heatmap.block_axes(blocks, "max"), "en", box=(40, 56, 8, 24))
    assert [p["image"] for p in figure["panels"]] == [images[v]["urls"][0] for v in heatmap.VALUES]
    assert figure["box"] == [40, 56, 8, 24] and figure["brush"] and figure["n"] == 600
    assert figure["rows"] == figure["cols"] == blocks.count
    assert figure["x"]["ticks"] == [0, 100, 200, 300, 400, 500, 600]


def test_legend_is_the_scheme_with_round_ticks_inside_the_domain():
    a, figure = figure_for(CAT, 0, range(6), range(6))
    legend = figure["panels"][2]["legend"]                                   # the difference
    run = SCHEMES["redblue"]
    assert legend["colors"] == ["#" + run[i:i + 6] for i in range(0, len(run), 6)]
    assert all(0 <= at <= 1 for at, _ in legend["ticks"])
    labels = [float(text) for _, text in legend["ticks"]]
    assert 0.0 in labels and labels == sorted(labels)


@pytest.mark.parametrize("lo, hi, count, expected", [
    (0, 2048, 8, [0, 500, 1000, 1500, 2000]),
    (0, 1, 4, [0.0, 0.5, 1.0]),
    (-0.6, 0.6, 4, [-0.5, 0.0, 0.5]),
    (0, 0.0066, 4, [0.0, 0.002, 0.004, 0.006]),
    (3, 3, 4, [3]),
])
def test_nice_ticks(lo, hi, count, expected):
    assert nice_ticks(lo, hi, count) == pytest.approx(expected)


@pytest.mark.parametrize("box", [None, "x", {"query_start": [1, 2]}, {"query_start": [1, 2, 3],
                                 "key_start": [1, 2]}, {"query_start": [1, "2"], "key_start": [1, 2]},
                                 {"query_start": [1, float("nan")], "key_start": [1, 2]},
                                 {"query_start": [True, 2], "key_start": [1, 2]}])
def test_a_malformed_brush_from_the_browser_is_ignored(box):
    assert parse_brush(box) is None


def test_a_brush_keeps_its_two_edges():
    assert parse_brush({"query_start": [600.5, 640], "key_start": [400, 440.2], "panel": 1}) \
        == {"query_start": [600.5, 640], "key_start": [400, 440.2]}


def test_a_packed_figure_is_its_json_then_its_pngs_and_unpacks_to_itself():
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(40)), heads=1, causal=True)
    _, figure = figure_for(spec, 0, range(10, 26), range(18, 34))
    data = pack(figure)
    assert data[:4] == MAGIC
    (size,) = struct.unpack("<I", data[4:8])
    head = json.loads(data[8:8 + size])
    pngs = [base64.b64decode(p["image"].split(",", 1)[1]) for p in figure["panels"]]
    assert len(data) == 8 + size + sum(map(len, pngs))             # no base64 in the bytes
    for panel, png in zip(head["panels"], pngs):
        start, length = panel["image"]["png"]
        assert data[8 + size + start:8 + size + start + length] == png
    assert unpack(data) == figure
    with pytest.raises(ValueError):                               # NaN cannot be sent
        pack({**figure, "box": [float("nan")]})


def test_row_figure_is_one_querys_weights_over_every_key_with_gaps_where_masked():
    spec = AttentionSpec(tokens=tuple(f"k{i}" for i in range(90)), heads=2, causal=True, seed=2)
    a = analyze(spec)
    figure = row_figure(frames.window(a, 1, range(40, 41), range(a.n)), a.tokens, "en")
    json.dumps(figure, allow_nan=False)
    scaled, unscaled = (s["values"] for s in figure["series"])
    w, u = a.scaled.weights[1, 40].double(), a.unscaled.weights[1, 40].double()   # (90,)
    torch.testing.assert_close(torch.tensor(scaled[:41], dtype=torch.float64), w[:41], atol=TIP, rtol=0)
    torch.testing.assert_close(torch.tensor(unscaled[:41], dtype=torch.float64), u[:41], atol=TIP, rtol=0)
    assert scaled[41:] == [None] * 49 and unscaled[41:] == [None] * 49         # keys after 40
    raw = a.q[1, 40].double() @ a.k[1].double().T                               # (90,) q.k
    torch.testing.assert_close(torch.tensor(figure["tip"]["raw_score"][:41], dtype=torch.float64), raw[:41],
                               atol=5e-4 + 1e-6, rtol=0)
    assert figure["tip"]["key_tokens"] == list(spec.tokens)
    assert [s["name"] for s in figure["series"]] == ["Scaled (÷√d_k)", "Unscaled"]
    assert figure["x"]["ticks"][0] == 0 and figure["x"]["ticks"][-1] <= 89
    assert unpack(pack(figure)) == figure                                       # no images


def test_matrix_figure_is_the_matrix_on_its_own_scale_with_its_tokens():
    rng = np.random.default_rng(3)
    values = rng.uniform(0, 0.7, (7, 7))
    values[0, 3] = np.nan                                      # nothing there: blank, no tooltip
    tokens = ("[CLS]", "the", "cat", "sat", "on", "mat", "[SEP]")
    figure = matrix_figure(values, tokens, "en", title="Rollout", scheme="purples", size=320)
    json.dumps(figure, allow_nan=False)
    (panel,) = figure["panels"]
    top = float(np.nanmax(values))
    np.testing.assert_allclose(figure_images(figure)["weight"],
                               colorize(values, (0.0, top), "purples"), atol=1)
    assert panel["legend"]["title"] == "Rollout" and figure["panel"] == 320
    assert figure["y"]["labels"] == list(tokens) and figure["tip"]["titles"]["value"] == "Rollout"
    cells = figure_cells(figure).set_index(["query_pos", "key_pos"])["value"]
    assert (0, 3) not in cells.index and len(cells) == 48
    assert cells[(5, 2)] == pytest.approx(values[5, 2], abs=TIP)
    negative = matrix_figure(values - 0.5, tokens, "en", title="x")       # domain spans 0
    labels = [float(t) for _, t in negative["panels"][0]["legend"]["ticks"]]
    assert min(labels) < 0 <= max(labels)


GRID_TOKENS = ("[CLS]", "a", '"quote', "<b>x</b>", "猫", "[SEP]")


def test_grid_figure_is_every_heads_pooled_blocks_with_gaps_and_the_current_head():
    torch.manual_seed(0)
    weights = torch.softmax(torch.randn(2, 3, 6, 6), -1)                 # (layers, heads, n, n)
    image, blocks = grid_image(weights, cells=12)
    figure = grid_figure(image, blocks, grid_labels(GRID_TOKENS, cells=12), "en", current=(1, 2))
    json.dumps(figure, allow_nan=False)
    assert (figure["layers"], figure["heads"], figure["blocks"]) == (2, 3, 6)
    values = figure["tip"]["values"]                                      # (2 * 7, 3 * 7)
    step = blocks + 1
    # every block of the tidy grid table (an independent pooling) is at its own place
    for row in grid_frame(weights, GRID_TOKENS, cells=12).itertuples():
        got = values[row.layer * step + row.qb][row.head * step + row.kb]
        assert got == pytest.approx(row.weight, abs=5e-4 + 1e-9)
        assert figure["tip"]["labels"][row.qb] == row.query
    assert all(values[6][c] is None for c in range(3 * step))             # the gap rows
    (pixels,) = figure_images(figure).values()
    assert (pixels[6, :, 3] == 0).all() and (pixels[:6, :6, 3] == 255).all()
    np.testing.assert_allclose(pixels[:6, :6], colorize(image[:6, :6], (0, 1), "blues"), atol=1)
    assert figure["current"] == [1, 2]
    assert [text for _, text in figure["x"]["ticks"]] == ["H0", "H1", "H2"]
    assert [text for _, text in figure["y"]["ticks"]] == ["L0", "L1"]
    other = grid_figure(image, blocks, grid_labels(GRID_TOKENS, cells=12), "en", current=(0, 0))
    assert other["layout"] == figure["layout"]                           # another head: repaint


@pytest.mark.parametrize("value", [None, [1, 2], {"layer": 1}, {"layer": "1", "head": 0},
                                   {"layer": True, "head": 0}, {"layer": 2, "head": 0},
                                   {"layer": 0, "head": -1}, {"layer": 1.0, "head": 0}])
def test_a_malformed_or_foreign_head_pick_is_ignored(value):
    assert parse_pick(value, layers=2, heads=3) is None


def test_a_head_pick_of_the_model_is_kept():
    assert parse_pick({"layer": 1, "head": 2}, layers=2, heads=3) == (1, 2)


BAR_TITLES = {"x": "Key", "y": "norm", "shade": "weight", "token": "Key", "pos": "Position"}


def test_bars_are_coloured_as_vegas_blues_scale_and_end_on_a_round_tick():
    """Shade 0 and 1 are the scheme's first and last colours and 0.5 its middle stop (Vega
    spaces a scheme's colours evenly on [0, 1]); the axis runs from 0 to a round tick at or
    above the tallest bar, and each tick sits at its share of that top."""
    blues = SCHEMES["blues"]
    first, middle, last = ("#" + blues[i:i + 6] for i in (0, 30, len(blues) - 6))   # 11 stops
    figure = bars_figure(np.array([0.104, 6.54, 5.7]), np.array([0.0, 0.5, 1.0]),
                         ["[CLS]", "the", "cat"], titles=BAR_TITLES)
    assert figure["kind"] == "bars" and figure["n"] == 3
    assert figure["colors"] == [first, middle, last]
    assert figure["heights"] == [0.104, 6.54, 5.7] and figure["shades"] == [0.0, 0.5, 1.0]
    assert figure["top"] == 8.0                                   # ticks 0 2 4 6, then 8
    assert figure["y"]["ticks"] == [[0.0, "0"], [0.25, "2"], [0.5, "4"], [0.75, "6"],
                                    [1.0, "8"]]
    assert figure["x"]["labels"] == ["[CLS] ·0", "the ·1", "cat ·2"]
    assert figure["legend"]["title"] == "weight"
    assert json.loads(json.dumps(figure, allow_nan=False)) == figure


def test_bars_past_the_label_limit_show_positions_and_an_unknown_bar_is_left_out():
    n = BAR_LABELS_MAX + 1
    heights = np.linspace(0.0, 0.3, n)
    heights[3] = np.nan
    figure = bars_figure(heights, np.full(n, 0.2), [f"<b>{i}</b>" for i in range(n)],
                         titles=BAR_TITLES)
    assert "labels" not in figure["x"] and figure["x"]["ticks"][0] == 0
    assert max(figure["x"]["ticks"]) <= n - 1
    assert figure["heights"][3] is None and figure["heights"][-1] == 0.3
    assert figure["top"] >= 0.3 and figure["tip"]["tokens"][5] == "<b>5</b>"   # text, kept
    assert json.loads(json.dumps(figure, allow_nan=False)) == figure
    flat = bars_figure(np.zeros(2), np.zeros(2), ["a", "b"], titles=BAR_TITLES)
    assert flat["top"] == 1.0                                     # all zero: a unit axis


def test_an_amended_packed_figure_is_the_figure_with_the_fields_added():
    """The grid is packed once and a pick adds its frame: what the browser unpacks is the
    figure packed with that field from the start, PNGs and all."""
    image = np.full((2 * 3, 3 * 3), np.nan)
    image[:2, :2] = 0.5
    figure = grid_figure(image, 2, ["a", "b"], "en")
    del figure["current"]
    amended = amend(pack(figure), current=[1, 2])
    assert unpack(amended) == unpack(pack({**figure, "current": [1, 2]}))
    assert json.loads(amended[8:8 + struct.unpack("<I", amended[4:8])[0]])["current"] == [1, 2]
    with pytest.raises(ValueError):
        amend(b"XXXX" + amended[4:], current=[0, 0])


@pytest.mark.parametrize("value, kept", [(24, 24), (64, 64), (20, None), (True, None),
                                         (24.0, None), ("24", None), (None, None),
                                         ({"size": 24}, None), (-16, None)])
def test_a_clicked_size_is_kept_only_when_it_is_one_of_the_windows(value, kept):
    """Any client can send anything as the size event: only one of the offered sizes counts."""
    assert parse_choice(value, (16, 24, 32, 48, 64)) == kept


@pytest.mark.parametrize("value, kept", [("weight", "weight"), ("difference", "difference"),
                                         ("Weight", None), (1, None), (["weight"], None),
                                         ("<script>", None), (None, None)])
def test_a_clicked_value_is_kept_only_when_it_is_one_offered(value, kept):
    """The all-heads grid's value buttons: only a value the figure offered counts."""
    assert parse_choice(value, ("weight", "unscaled_weight", "difference")) == kept
