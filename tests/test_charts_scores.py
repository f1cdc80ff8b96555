"""Score analysis: the tables (scorestats, saturation) equal independent computations, the
findings (conclusions) carry the measured numbers, and the builders' charts stay finite and
small."""
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from attention.measures import rows as metrics

from attention.analysis import saturation

from attention.analysis import scorestats
from attention.analysis import DK_SWEEP, analyze, dk_sweep
from attention.charts import scores
from attention.conclusions.scores import score_findings
from attention.models.toy import embed
from attention.files.export import chart_spec
from attention.models.toy import project
from attention.spec import AttentionSpec
from tests.fresh import run_fresh

TOKENS = ("the", "cat", "sat", "on", "the", "mat", "and", "the", "dog", "sat")


def _spec(**kw):
    return AttentionSpec(**{"tokens": TOKENS, "d_k": 64, "heads": 3, "causal": True, **kw})


def _raw_by_hand(spec):
    """q.k for every head from the projections themselves, causal cells dropped: (cells,)."""
    x = embed(spec.tokens, spec.d_model, spec.seed, spec.positional)     # (n, d_model)
    q, k, _ = project(x, spec.d_k, spec.heads, spec.seed)               # (heads, n, d_k)
    raw = torch.einsum("hqd,hkd->hqk", q, k)                            # (heads, n, n)
    if spec.causal:
        keep = torch.ones(spec.n, spec.n, dtype=torch.bool).tril()
        return raw[:, keep]                                             # (heads, cells)
    return raw.flatten(1)


def _p_by_hand(spec, scaled):
    """Softmax rows computed here, independently of attention.core: (heads, n, n)."""
    x = embed(spec.tokens, spec.d_model, spec.seed, spec.positional)
    q, k, _ = project(x, spec.d_k, spec.heads, spec.seed)
    z = q @ k.transpose(-2, -1) / (math.sqrt(spec.d_k) if scaled else 1.0) / spec.temperature
    if spec.causal:
        z = z.masked_fill(~torch.ones(spec.n, spec.n, dtype=torch.bool).tril(), -torch.inf)
    return torch.softmax(z.double(), dim=-1)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
@pytest.mark.parametrize("causal", [True, False])
def test_score_stats_match_torch_std(causal, temperature):
    spec = _spec(causal=causal, temperature=temperature)
    a = analyze(spec)
    stats = scorestats.score_stats(a, scorestats.head_list(a, None)).set_index("series")
    raw = _raw_by_hand(spec).flatten()
    assert stats.loc["raw", "count"] == raw.numel() == 3 * (55 if causal else 100)
    assert stats.loc["raw", "std"] == pytest.approx(raw.std().item(), rel=1e-5)
    assert stats.loc["raw", "mean"] == pytest.approx(raw.mean().item(), abs=1e-4)
    scaled = raw / 8.0 / temperature
    assert stats.loc["scaled", "std"] == pytest.approx(scaled.std().item(), rel=1e-5)
    assert stats.loc["raw", "expected_std"] == 8.0
    assert stats.loc["scaled", "expected_std"] == pytest.approx(1.0 / temperature)


def test_one_head_stats_are_that_heads_scores():
    spec = _spec()
    a = analyze(spec)
    stats = scorestats.score_stats(a, [1]).set_index("series")
    raw = _raw_by_hand(spec)[1]
    assert stats.loc["raw", "std"] == pytest.approx(raw.std().item(), rel=1e-5)
    assert stats.loc["raw", "min"] == pytest.approx(raw.min().item(), rel=1e-6)


def test_histogram_counts_every_finite_score_once():
    spec = _spec()
    a = analyze(spec)
    heads = scorestats.head_list(a, None)
    hist = scorestats.score_histogram(a, heads, bins=20)
    raw = _raw_by_hand(spec).flatten().numpy()
    assert hist.groupby("series")["count"].sum().tolist() == [raw.size, raw.size]
    ref, edges = np.histogram(raw, bins=20, range=(raw.min(), raw.max()))
    got = hist[hist["series"] == "raw"]
    assert np.abs(got["count"].to_numpy() - ref).sum() <= 2   # at most a float tie at an edge
    np.testing.assert_allclose(got["bin_start"], edges[:-1], rtol=1e-5, atol=1e-5)
    assert np.isclose(got["share"].sum(), 1.0)


def test_histogram_of_a_single_score_is_finite():
    a = analyze(AttentionSpec(tokens=("solo",), heads=1))
    hist = scorestats.score_histogram(a, [0], bins=5)
    assert hist["count"].sum() == 2 and np.isfinite(hist[["bin_start", "bin_end"]]).all().all()


def test_row_metrics_equal_hand_computed_rows():
    spec = _spec()
    a = analyze(spec)
    frame = scorestats.row_metric_frame(a, [0, 2]).set_index(["variant", "metric", "query_pos"])
    for variant, scaled in (("scaled", True), ("unscaled", False)):
        p = _p_by_hand(spec, scaled)[[0, 2]]                               # (2, n, n)
        entropy = -(torch.where(p > 0, p * p.log(), torch.zeros_like(p))).sum(-1)
        eye = torch.diag_embed(p)                                          # (2, n, n, n)
        jac = torch.linalg.matrix_norm(eye - p[..., :, None] * p[..., None, :])  # (2, n)
        want = {"entropy": entropy, "effective_tokens": entropy.exp(),
                "max_weight": p.amax(-1), "jacobian_norm": jac}
        for name, value in want.items():
            got = frame.sort_index().loc[(variant, name)]["value"].to_numpy()
            np.testing.assert_allclose(got, value.mean(0).numpy(), rtol=1e-4, atol=1e-5,
                                       err_msg=f"{variant} {name}")
    # position keys the rows, so the three "the" keep three rows each
    assert (frame.reset_index().query("metric == 'entropy' and variant == 'scaled'")
            ["query_token"] == "the").sum() == 3


def test_row_metric_bins_cover_every_row():
    spec = _spec()
    a = analyze(spec)
    bins = scorestats.row_metric_bins(a, [0, 1, 2], bins=7)
    counts = bins.groupby(["metric", "variant"])["count"].sum()
    assert (counts == 3 * spec.n).all() and len(counts) == 8


def test_sweep_rows_match_projections_by_hand():
    spec = AttentionSpec(tokens=TOKENS, heads=2, causal=False)
    sweep = dk_sweep(spec)
    assert sorted(sweep["d_k"].unique()) == list(DK_SWEEP)
    x = embed(spec.tokens, spec.d_model, spec.seed, spec.positional)
    for d_k in (1, 64, 1024):
        q, k, _ = project(x, d_k, spec.heads, spec.seed)
        raw = q @ k.transpose(-2, -1)                                     # (heads, n, n)
        row = sweep.set_index(["d_k", "scaled"]).loc[(d_k, False)]
        assert row["score_std"] == pytest.approx(raw.std().item(), rel=1e-4)
        scaled = sweep.set_index(["d_k", "scaled"]).loc[(d_k, True)]
        assert scaled["score_std"] == pytest.approx((raw / math.sqrt(d_k)).std().item(), rel=1e-4)
        p = torch.softmax(raw.double(), -1)
        assert row["max_weight"] == pytest.approx(p.amax(-1).mean().item(), rel=1e-4)
    long = scores.sweep_long(sweep)
    assert len(long) == len(sweep) * len(scores.SWEEP_METRICS)
    ref = scores.sweep_reference(sweep["d_k"], 2.0)
    np.testing.assert_allclose(ref["value"], np.sqrt(DK_SWEEP) / 2.0)


def test_saturation_frame_samples_real_rows():
    spec = _spec()
    a = analyze(spec)
    pts = scorestats.saturation_frame(a, [0, 1, 2], max_points=12, seed=3)
    assert len(pts) == 24 and set(pts["variant"]) == {"scaled", "unscaled"}
    for r in pts.itertuples():
        m = a.scaled_metrics if r.variant == "scaled" else a.unscaled_metrics
        assert r.max_weight == pytest.approx(m["max_weight"][r.head, r.query_pos].item())
        assert r.query_token == spec.tokens[r.query_pos]
    # the same rows for both variants, so a row's two points can be compared
    s, u = pts[pts.variant == "scaled"], pts[pts.variant == "unscaled"]
    assert s[["head", "query_pos"]].values.tolist() == u[["head", "query_pos"]].values.tolist()


def test_saturation_curve_is_the_jacobian_of_that_row():
    curve = saturation.saturation_curve(4, points=4)
    for m, norm in zip(curve["max_weight"], curve["jacobian_norm"]):
        p = torch.tensor([m] + [(1 - m) / 3] * 3, dtype=torch.float64)
        jac = torch.diag(p) - torch.outer(p, p)                               # (4, 4)
        assert norm == pytest.approx(torch.linalg.matrix_norm(jac).item())
    assert curve["jacobian_norm"].iloc[0] == pytest.approx(math.sqrt(1 / 4 - 1 / 16))  # uniform
    assert curve["jacobian_norm"].iloc[-1] == pytest.approx(0.0, abs=1e-12)              # one-hot
    # docs/science.md: 4 tokens, one logit ahead by 5: p_max 0.980, ||J||_F 2.8e-2
    p = torch.softmax(torch.tensor([5.0, 0, 0, 0], dtype=torch.float64), 0)
    m = p.max().item()
    assert m == pytest.approx(0.980, abs=1e-3)
    assert metrics.jacobian_norm(p).item() == pytest.approx(2.8e-2, abs=1e-3)


def test_summary_and_conclusions_carry_the_measured_numbers():
    spec = AttentionSpec(tokens=TOKENS, d_k=256, heads=2)
    a = analyze(spec)
    heads = [0, 1]
    summ = scorestats.summary(a, heads)
    p = _p_by_hand(spec, scaled=False)
    sat = p.amax(-1) > scorestats.SATURATED
    assert summ.loc["unscaled", "max_weight"] == pytest.approx(p.amax(-1).mean().item(), rel=1e-5)
    assert summ.loc["unscaled", "saturated"] == pytest.approx(sat.double().mean().item())
    stats = scorestats.score_stats(a, heads)
    sweep = dk_sweep(spec)
    en = score_findings(summ, stats, sweep, 256, "en")
    zh = score_findings(summ, stats, sweep, 256, "zh")
    assert len(en) == len(zh) == 5
    u_max = f"{summ.loc['unscaled', 'max_weight']:.2f}"
    assert u_max in en[1] and u_max in zh[1]
    assert f"{stats.set_index('series').loc['raw', 'std']:.2f}" in en[0]
    assert f"{sweep.set_index(['d_k', 'scaled']).loc[(1024, False), 'max_weight']:.2f}" in en[4]
    assert en[1] != zh[1]


def test_conclusions_follow_the_numbers_not_a_script():
    """At d_k = 1 scaling changes nothing: the sentences must say so, not claim sharpening."""
    spec = AttentionSpec(tokens=TOKENS, d_k=1, heads=2)
    a = analyze(spec)
    summ = scorestats.summary(a, [0, 1])
    lines = score_findings(summ, scorestats.score_stats(a, [0, 1]), dk_sweep(spec), 1, "en")
    assert lines[1].startswith("Here the unscaled rows are not sharper")


def _datasets(chart):
    spec = chart_spec(chart)
    return spec, spec.get("datasets", {})


def test_every_chart_dataset_is_finite_and_small_under_a_causal_mask():
    spec = _spec()
    a = analyze(spec)
    heads = scorestats.head_list(a, None)
    stats = scorestats.score_stats(a, heads)
    charts = [
        scores.score_distribution_chart(scorestats.score_histogram(a, heads, stats), stats, "en"),
        scores.row_metric_chart(scorestats.row_metric_frame(a, heads), a.tokens, "zh"),
        scores.row_metric_hist_chart(scorestats.row_metric_bins(a, heads), "en"),
        scores.sweep_chart(dk_sweep(spec), "en", current_dk=64),
        scores.saturation_chart(scorestats.saturation_frame(a, heads), saturation.saturation_curve(a.n),
                                a.n, "en"),
    ]
    for chart in charts:
        spec_dict, datasets = _datasets(chart)
        json.dumps(spec_dict, allow_nan=False)            # raises on NaN or inf anywhere
        assert datasets and all(len(rows) <= 2000 for rows in datasets.values())


def test_token_labels_survive_quotes_and_repeats():
    """The position axis labels render through Vega itself, quotes and repeats included."""
    import vl_convert as vlc

    tokens = ('say "hi"', "it's", 'say "hi"', "x\\y")
    frame = pd.DataFrame({"query_pos": range(4), "query_token": tokens, "variant": "scaled",
                          "metric": "entropy", "value": [0.1, 0.2, 0.3, 0.4]})
    svg = vlc.vegalite_to_svg(chart_spec(scores.row_metric_chart(frame, tokens, "en")))
    for pos, tok in enumerate(tokens):
        shown = tok.replace("&", "&amp;").replace('"', "&quot;").replace("'", "&#39;")
        assert f"{shown} ·{pos}" in svg or f"{tok} ·{pos}" in svg, tok


def test_one_logit_ahead_is_the_closed_form():
    """Logits (g, 0, 0, 0): p_max = e^g / (e^g + 3), the others r = 1 / (e^g + 3), and
    ||diag(p) - p p^T||_F^2 = (3 m r)^2 + 3 (r (1 - r))^2 + 6 (m r)^2 + 6 r^4, written out
    entry by entry. docs/science.md quotes g = 5: 0.980 / 2.8e-2 and g = 20: 8.7e-9."""
    table = saturation.one_logit_ahead(gaps=(0.0, 5.0, 10.0, 20.0))
    for row in table.itertuples():
        r = 1.0 / (math.exp(row.gap) + 3.0)
        m = math.exp(row.gap) * r
        norm = math.sqrt((3 * m * r) ** 2 + 3 * (r * (1 - r)) ** 2 + 6 * (m * r) ** 2 + 6 * r ** 4)
        assert row.max_weight == pytest.approx(m, rel=1e-12)
        assert row.jacobian_norm == pytest.approx(norm, rel=1e-6)
    assert table["jacobian_norm"].iloc[0] == pytest.approx(math.sqrt(3) / 4)   # uniform: 0.433


def test_chart_modules_do_not_import_torch():
    """Charts take tables: every chart module imports in a fresh interpreter without torch."""
    run_fresh("import sys\n"
              "import attention.charts.scores, attention.charts.model, attention.charts.heatmap\n"
              "import attention.charts.experiment, attention.charts.colors, attention.conclusions.scores\n"
              "assert 'torch' not in sys.modules, 'torch imported by a chart module'\n")


def test_a_chart_that_fits_its_column_downloads_at_the_pages_width():
    """fit_width charts are "container" wide on the page; a file has no container, and
    vl-convert drew them at its default 300 px. The PNG is FIT_PX wide (times the scale)."""
    import io

    import altair as alt
    import pandas as pd
    from PIL import Image

    from attention.charts.size import FIT_PX, fit_width
    from attention.files.export import chart_png

    chart = fit_width(alt.Chart(pd.DataFrame({"x": [0, 1], "y": [1, 0]})).mark_line()
                      .encode(x="x:Q", y="y:Q").properties(height=100))
    assert chart.to_dict()["width"] == "container"
    width, _ = Image.open(io.BytesIO(chart_png(chart, scale=1.0))).size
    assert abs(width - FIT_PX) <= 2


def test_sweep_panels_draw_a_hand_softmax_of_every_d_k():
    """Each of the d_k sweep's six panels draws its own metric, and its points are those of
    a softmax computed here by hand from the toy projections (not through analysis); the
    one-chart figure of the downloads is made only when asked for, and holds the same rows."""
    spec = AttentionSpec(tokens=TOKENS, heads=2, causal=False)
    sweep = dk_sweep(spec)
    panels = scores.sweep_panels(sweep, "en", current_dk=64)
    assert len(panels.charts) == len(scores.SWEEP_METRICS) and callable(panels.whole)
    drawn = {}
    for metric, panel in zip(scores.SWEEP_METRICS, panels.charts):
        data = panel.data[~panel.data["is_ref"]]
        assert set(data["metric"]) == {metric}                      # one metric per panel
        drawn[metric] = data.set_index(["d_k", "variant"])["value"]
    x = embed(spec.tokens, spec.d_model, spec.seed, spec.positional)
    for d_k in (1, 8, 64, 1024):
        q, k, _ = project(x, d_k, spec.heads, spec.seed)
        raw = (q @ k.transpose(-2, -1)).double()                     # (heads, n, n)
        for variant, logits in (("scaled", raw / math.sqrt(d_k)), ("unscaled", raw)):
            e = (logits - logits.amax(-1, keepdim=True)).exp()
            p = e / e.sum(-1, keepdim=True)                          # (heads, n, n) by hand
            entropy = -(p * p.clamp_min(1e-300).log()).sum(-1)
            want = {"score_std": logits.std().item(), "max_weight": p.amax(-1).mean().item(),
                    "entropy": entropy.mean().item(),
                    "effective_tokens": entropy.exp().mean().item()}
            for metric, value in want.items():
                assert drawn[metric][(d_k, variant)] == pytest.approx(value, rel=1e-4, abs=1e-6), \
                    (metric, d_k, variant)
    whole = chart_spec(panels.whole())
    rows = [r for data in whole["datasets"].values() for r in data if not r.get("is_ref")]
    assert len(rows) == len(sweep) * len(scores.SWEEP_METRICS)


def test_the_first_figure_builds_without_altairs_schema_lookup(monkeypatch):
    """A shorthand string or alt.value/alt.datum dict in an encoding makes altair look its
    channel class up by hashing every schema class (about 11 ms a call): the first figure a
    cold link draws, and the Corpus page's map, pass channel objects instead."""
    import altair as alt
    from altair.utils import schemapi

    from attention.charts.corpus import qk_map
    from attention.charts.vega import page_spec

    calls = []
    real = schemapi.SchemaBase.from_dict.__func__

    def counted(cls, *args, **kwargs):
        calls.append(cls.__name__)
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(schemapi.SchemaBase, "from_dict", classmethod(counted))
    analysis = analyze(_spec())
    heads = scorestats.head_list(analysis, None)
    stats = scorestats.score_stats(analysis, heads)
    hist = scorestats.score_histogram(analysis, heads, stats)
    for panel in scores.score_distribution_panels(hist, stats, "en").charts:
        page_spec(panel)
    points = pd.DataFrame({"kind": ["q", "k"], "text_id": [0, 0], "position": [0, 0],
                           "x": [0.0, 1.0], "y": [1.0, 0.0], "token": ["a", "a"],
                           "frequency": [1, 1], "text": ["a", "a"]})
    labels = {k: k for k in ("query", "key", "kind", "position", "frequency", "token", "text",
                             "title")}
    for colour in ("kind", "position", "frequency"):
        page_spec(qk_map(points, "Model_heads?text=", colour, labels))
    assert calls == []
