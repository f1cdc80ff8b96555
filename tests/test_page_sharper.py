"""The "Is sharper better?" page in AppTest: it runs, takes its seed from the URL, draws the
sweep functions' own numbers, and writes its conclusions from them.

Training is shortened (fewer steps, a smaller held-out set) by patching the experiment's
constants: AppTest runs the page in this process, so the page and the reference calls below
see the same settings."""
from __future__ import annotations

import io
import json

import pandas as pd
import pyarrow as pa
import pytest

from attention.experiment import training as ex
from attention.i18n import translate
from tests.apptest import run_page

PAGE = "pages/4_Is_sharper_better.py"
SEED = 1


@pytest.fixture(scope="module")
def short_runs():
    patch = pytest.MonkeyPatch()
    patch.setattr(ex, "SHARPEN_STEPS", 40)
    patch.setattr(ex, "SCALING_STEPS", 30)
    patch.setattr(ex, "EVAL_SIZE", 2048)
    yield
    patch.undo()


@pytest.fixture(scope="module")
def expected(short_runs):
    return ex.sharpening_study(SEED), ex.scaling_sweep((SEED, SEED + 1, SEED + 2))


@pytest.fixture(scope="module")
def page(short_runs):
    return run_page(PAGE, sh_seed=str(SEED))


def charts(at) -> list[tuple[dict, list[pd.DataFrame]]]:
    out = []
    for chart in at.get("vega_lite_chart"):
        frames = [pa.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pandas()
                  for d in chart.proto.datasets]
        out.append((json.loads(chart.proto.spec), frames))
    return out


def frame_with(frames: list[pd.DataFrame], *columns: str) -> pd.DataFrame:
    found = [f for f in frames if set(columns) <= set(f.columns)]
    assert found, f"no dataset with {columns}"
    return found[0]


def test_runs_without_exception_and_reads_the_seed(page):
    assert not page.exception
    assert not page.error
    assert page.number_input[0].value == SEED
    assert page.query_params["sh_seed"] in (str(SEED), [str(SEED)])


# The toy part: five figures and five conclusions (the real models are the page's other part,
# tests/test_sweeps_page.py). Three figures are two panels each, drawn as two charts side by
# side (stacked on a phone): the charts' places on the page.
TOY_INFOS = 5
SHARPENING, MASS, SAMPLE, LEAVE_ONE_OUT, SCALING = (0, 1), (2,), (3, 4), (5,), (6, 7)
TOY_CHARTS = 8


def toy_infos(at) -> list[str]:
    return [i.value for i in at.info][:TOY_INFOS]


def test_a_link_opens_the_toy_part_alone(page):
    """Only the open part is drawn: the toy part's eight charts, no real-models section."""
    titles = [h.value for h in page.header]
    assert len(page.get("vega_lite_chart")) == TOY_CHARTS
    assert translate("en", "realsharp.title") not in titles
    assert page.query_params["sh_part"] in ("toy", ["toy"])


def test_sharpening_charts_show_the_sweep(page, expected):
    study, _ = expected
    cols = ["multiplier", "accuracy", "max_weight", "effective_tokens", "relevant_mass"]
    got = charts(page)
    for spec, frames in [got[i] for i in SHARPENING + MASS]:   # inverted U, relevant mass
        drawn = frame_with(frames, *cols)[cols].reset_index(drop=True)
        pd.testing.assert_frame_equal(drawn, study.sweep[cols], check_dtype=False)


def test_sample_and_leave_one_out_charts_show_the_study(page, expected):
    study, _ = expected
    got = charts(page)
    sample = pd.concat([f for i in SAMPLE for f in got[i][1] if "weight" in f.columns],
                       ignore_index=True)
    cols = ["multiplier", "position", "relevant", "weight"]
    pd.testing.assert_frame_equal(sample[cols], study.sample[cols], check_dtype=False)
    cols = ["sample", "position", "relevant", "weight", "effect"]
    drawn = frame_with(got[LEAVE_ONE_OUT[0]][1], *cols)[cols]   # leave-one-out: after the sample
    pd.testing.assert_frame_equal(drawn, study.leave_one_out[cols], check_dtype=False)


def test_scaling_chart_shows_the_sweep(page, expected):
    _, scaling = expected
    cols = ["d_k", "scaled", "seed", "accuracy", "max_weight", "effective_tokens"]
    for i in SCALING:                                   # the toy section's last: both panels
        drawn = frame_with(charts(page)[i][1], *cols)[cols]
        pd.testing.assert_frame_equal(drawn.reset_index(drop=True), scaling[cols],
                                      check_dtype=False)
        assert set(drawn["seed"]) == {SEED, SEED + 1, SEED + 2}


def test_conclusions_quote_the_measured_numbers(page, expected):
    study, scaling = expected
    rows = study.sweep.set_index("multiplier")
    infos = toy_infos(page)
    best = rows["accuracy"].idxmax()
    assert f"{rows.loc[best, 'accuracy']:.3f}" in infos[0]
    assert f"{rows.loc['argmax', 'accuracy']:.3f}" in infos[0]
    assert f"{rows.loc['argmax', 'relevant_mass']:.1%}" in infos[1]
    big = scaling[scaling["d_k"] == 256].groupby("scaled")["accuracy"].mean()
    assert f"{study.spearman_pooled:.2f}" in infos[3]
    assert f"{big[False]:.3f}" in infos[4] and f"{big[True]:.3f}" in infos[4]


def test_tables_wait_behind_a_toggle_and_downloads_in_closed_menus(page):
    """A cold link draws no table and no download button: the tables behind a toggle kept
    in the URL (?sh_tables=), each chart's PNG/SVG only in its menu once opened."""
    assert not page.dataframe
    assert page.toggle[0].value is False
    assert page.query_params["sh_tables"] in ("False", ["False"])
    assert not page.get("download_button")


@pytest.fixture(scope="module")
def tables_page(short_runs):
    return run_page(PAGE, sh_seed=str(SEED), sh_tables="True")


def test_tables_and_downloads(tables_page, expected):
    study, scaling = expected
    from attention.ui.views.experiment import HEADERS
    from tests.apptest import open_menu

    page = tables_page
    assert page.toggle[0].value is True
    tables = [d.value for d in page.dataframe]
    headers = {c: translate("en", f"sharper.{k}") for c, k in HEADERS.items()}   # on screen
    want = scaling.assign(scaled=[translate("en", "sharper.variant_scaled" if s else
                                            "sharper.variant_unscaled") for s in scaling["scaled"]])
    pd.testing.assert_frame_equal(tables[0].reset_index(drop=True),
                                  study.sweep.rename(columns=headers), check_dtype=False)
    pd.testing.assert_frame_equal(tables[1].reset_index(drop=True),
                                  want.rename(columns=headers), check_dtype=False)
    assert len(page.get("download_button")) == 3                # the tables' CSVs
    for menu in ("menu_sharpening", "menu_scaling"):      # the whole figures, built on opening
        page = open_menu(page, menu)
        assert not page.exception
    ids = " ".join(b.proto.id for b in page.get("download_button"))   # menus open: their files
    assert len(page.get("download_button")) == 3 + 2 * 2
    assert all(f"{kind}_{name}" in ids for kind in ("png", "svg")
               for name in ("sharpening", "scaling"))


def test_the_tables_toggle_moves_no_chart(short_runs):
    """The tables open in a place there either way (ui.chart.place): every chart below them,
    the real models' section, keeps its place in the page, so the browser keeps its views."""
    from tests.apptest import chart_places

    at = run_page(PAGE, sh_seed=str(SEED))
    places = chart_places(at)
    assert len(places) > 5                          # the toy five and the real models' below
    at.toggle(key="view_sh_tables").set_value(True).run()
    assert at.dataframe and chart_places(at) == places
    at.toggle(key="view_sh_tables").set_value(False).run()
    assert not at.dataframe and chart_places(at) == places


def test_bad_tables_value_in_url_falls_back_to_hidden(short_runs):
    at = run_page(PAGE, sh_seed=str(SEED), sh_tables="maybe")
    assert not at.exception and not at.error
    assert at.toggle[0].value is False and not at.dataframe


def test_chinese_page_uses_the_cached_run(short_runs, expected):
    study, _ = expected
    at = run_page(PAGE, sh_seed=str(SEED), lang="zh")
    assert not at.exception
    assert "准确率" in at.info[0].value
    assert f"{study.sweep.set_index('multiplier').loc['argmax', 'accuracy']:.3f}" in at.info[0].value


def test_bad_seed_in_url_falls_back_to_default(short_runs):
    at = run_page(PAGE, sh_seed="not-a-number")
    assert not at.exception
    assert at.number_input[0].value == 0
