"""The small things a newcomer meets (issue 44, item 8), each by the user's own steps:
a link or a click, then the value on the page against an independent reference."""
import math

import numpy as np
import pytest
import torch

from attention.analysis import analyze
from attention.i18n import translate
from attention.spec import AttentionSpec
from tests.apptest import captions, figures, open_part, run_page

HEATMAP, SCORES, MODEL = "pages/1_Heatmap.py", "pages/2_Score_analysis.py", "pages/3_Model_heads.py"


def _difference_legend(at) -> dict:
    (figure,) = [f for f in figures(at) if f["kind"] == "cells"]
    return figure["panels"][2]["legend"]


@pytest.mark.parametrize("spec", [AttentionSpec(tokens=("cat",)),              # one token
                                  AttentionSpec(tokens=("a", "b", "c"), d_k=1)])  # scale 1
def test_the_difference_legend_says_no_difference_when_scaled_equals_unscaled(spec):
    a = analyze(spec)
    torch.testing.assert_close(a.scaled.weights, a.unscaled.weights)   # nothing to show indeed
    at = run_page(HEATMAP, spec)
    assert not at.exception
    assert _difference_legend(at)["ticks"] == [[0.5, "no difference"]]
    zh = run_page(HEATMAP, spec, lang="zh")
    assert _difference_legend(zh)["ticks"] == [[0.5, translate("zh", "heatmap.legend_no_difference")]]


def test_a_real_difference_keeps_its_ticks():
    legend = _difference_legend(run_page(HEATMAP, AttentionSpec()))
    assert len(legend["ticks"]) >= 3 and "no difference" not in str(legend)


def test_zoom_cells_of_a_long_input_print_the_digits_their_weights_need():
    spec = AttentionSpec(tokens=tuple(f"w{i % 97}" for i in range(1500)), heads=1, d_k=8)
    at = run_page(HEATMAP, spec, hm_q="700", hm_k="690")
    (zoom,) = [f for f in figures(at) if f["kind"] == "cells"]
    numbers = zoom["panels"][0]["numbers"]                         # the scaled panel, 16 x 16
    weights = analyze(spec).scaled.weights[0, 700:716, 690:706].double()
    assert weights.max() < 0.01                                    # ~1/1500: ".00" at 2 decimals
    decimals = len(numbers[0][0].split(".")[1])
    assert decimals == 1 - math.floor(math.log10(weights.abs().max()))
    printed = torch.tensor([[float(x) for x in row] for row in numbers], dtype=torch.float64)
    torch.testing.assert_close(printed, weights, atol=0.5 * 10 ** -decimals, rtol=0)
    assert len({x for row in numbers for x in row}) > 1            # not one ".00" everywhere


def test_the_heatmap_caption_follows_one_or_two_colour_scales():
    same = translate("en", "heatmap.compare_scales_shared")
    own = translate("en", "heatmap.compare_scales_own")
    at = run_page(HEATMAP, AttentionSpec())
    assert any(same in c for c in captions(at)) and not any(own in c for c in captions(at))
    at = run_page(HEATMAP, AttentionSpec(), hm_shared="False")
    assert any(own in c for c in captions(at)) and not any(same in c for c in captions(at))
    (figure,) = figures(at)
    assert all(p["legend"] is not None for p in figure["panels"])   # two weight legends indeed


def test_the_real_model_heatmap_names_its_model_and_layer():
    at = run_page(HEATMAP, AttentionSpec(source="pretrained", layer=3))
    assert not at.exception and not at.error
    assert [h.value for h in at.subheader][0] == "all-MiniLM-L6-v2 · layer 3"


def test_a_bad_layer_in_a_link_gets_the_sidebars_notice():
    at = run_page(HEATMAP, AttentionSpec(source="pretrained"), layer="9")   # MiniLM: 0..5
    assert not at.exception and not at.error
    notice = translate("en", "sidebar.model_layer_clamped", layer=9, last=5,
                       name="all-MiniLM-L6-v2")
    assert [w.value for w in at.warning] == [notice]
    assert at.query_params["layer"] == "5"
    assert at.subheader[0].value.endswith("layer 5")


def test_one_token_on_score_analysis_says_there_is_nothing_to_compare():
    at = run_page(SCORES, AttentionSpec(tokens=("cat",)))
    assert not at.exception and not at.error
    assert [i.value for i in at.info] == [translate("en", "scores.one_token")]
    assert not any("Saturated" in m.label for m in at.metric)       # no "Saturated rows 100%"
    assert not at.get("vega_lite_chart")                            # no charts of single points


def test_the_one_logit_ahead_table_has_one_number_format():
    """A static table (st.table): both weight columns written in one format, the values
    saturation.one_logit_ahead computes, under translated headers."""
    import re

    from attention.analysis.saturation import one_logit_ahead

    at = run_page(SCORES, AttentionSpec())
    (table,) = at.table
    shown = table.value
    weight, jacobian = translate("en", "scores.col_max_weight"), translate("en", "scores.col_jacobian")
    assert list(shown.columns) == [translate("en", "scores.col_gap"), weight, jacobian]
    cells = [*shown[weight], *shown[jacobian]]
    assert all(re.fullmatch(r"\d\.\d{3}e[+-]\d+", c) for c in cells), cells
    want = one_logit_ahead()
    np.testing.assert_allclose([float(c) for c in shown[jacobian]], want["jacobian_norm"],
                               rtol=1e-3)
    assert [float(c) for c in shown[translate("en", "scores.col_gap")]] == want["gap"].tolist()


def test_the_intervention_lists_offer_no_select_all_beside_their_own_all():
    at = open_part(run_page(MODEL, AttentionSpec(source="pretrained")), "iv")
    assert not at.exception
    lists = {m.label: m for m in at.multiselect}
    assert {"Layers", "Heads"} <= set(lists)
    for m in (lists["Layers"], lists["Heads"]):
        assert m.proto.select_all == 0                             # Streamlit's option hidden
        assert m.options[0] in ("All layers", "All heads")
