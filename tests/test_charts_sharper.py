"""Every chart "Is sharper better?" draws is valid Vega-Lite, in English and Chinese, for both
real models, the per-layer charts and the Download menus' combined figures included.

The page sends its specs without altair's schema validation (attention/charts/vega.py
page_spec, size.with_properties): this is where they are validated instead, against the
Vega-Lite schema altair ships. The toy section reads the results shipped for seed 0 and the
real-models section the shipped sweeps: nothing is trained.
"""
from __future__ import annotations

import json

import altair as alt
import pytest
from altair.utils.schemapi import validate_jsonschema
from altair.vegalite.v6.schema.core import load_schema

from attention.charts.size import FIT_PADDING, FIT_SIZE, Panels, fit_width, with_properties
from tests.apptest import open_page

PAGE = "pages/4_Is_sharper_better.py"
SCHEMA = load_schema()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("model", ["toy", "lm", "sentence"])
def test_every_chart_on_the_page_is_valid_vega_lite(lang, model):
    """Each part with every chart it can show: the toy part's 8; a real model's part with its
    per-layer (and, for the language model, per-head) charts."""
    views = ({"sh_part": "toy"} if model == "toy" else
             {"sh_part": "real", "sh_model": model, "sh_layers": "True", "sh_heads": "True"})
    at = open_page(PAGE, lang=lang, timeout=120, **views)
    assert not at.exception
    specs = [json.loads(chart.proto.spec) for chart in at.get("vega_lite_chart")]
    assert len(specs) == {"toy": 8, "lm": 9, "sentence": 4}[model]
    for spec in specs:
        validate_jsonschema(spec, SCHEMA)                    # raises on an invalid spec


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_download_figures_are_valid_vega_lite(lang):
    from attention.charts import experiment as charts
    from attention.experiment import store

    study = store.sharpening_study(0)
    sweep = store.scaling_sweep(store.scaling_seeds(0))
    for panels in (charts.sharpening_panels(study.sweep, lang),
                   charts.sample_panels(study.sample, lang),
                   charts.scaling_panels(sweep, lang)):
        assert isinstance(panels, Panels) and callable(panels.whole)   # built on a click
        panels.whole().to_dict()                                       # validates
        for panel in panels.charts:
            panel.to_dict()


def test_with_properties_gives_the_spec_properties_gives():
    chart = alt.Chart(alt.NamedData(name="frame_0")).mark_point().encode(
        x=alt.X("a:Q"), y=alt.Y("b:Q"), y2=alt.Y2("c:Q"), text=alt.Text("d:N"))
    strings = alt.Chart(alt.NamedData(name="frame_0")).mark_point().encode(
        x="a:Q", y="b:Q", y2="c:Q", text="d:N")
    assert chart.to_dict() == strings.to_dict()          # channel objects: the same spec
    assert (json.dumps(with_properties(chart, title=["a", "b"], height=200).to_dict())
            == json.dumps(chart.properties(title=["a", "b"], height=200).to_dict()))
    assert (json.dumps(fit_width(chart).to_dict()) == json.dumps(chart.properties(
        width="container", autosize=FIT_SIZE, padding=FIT_PADDING).to_dict()))
    assert "height" not in chart.to_dict()               # the original is left as it was
