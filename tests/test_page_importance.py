"""The "Does the model use it?" page in AppTest on MiniLM: the numbers on screen equal the
frames computed here independently of the page, and the conclusions are written from them."""
from __future__ import annotations

import numpy as np
import pytest

from attention import importance as I
from attention import models as M
from attention.conclusions.importance import conclusions
from attention.spec import AttentionSpec
from tests.apptest import chart_frames, open_page
from tests.tiny_models import tiny  # noqa: F401  (fixture)

TEXT = "the cat sat on the mat ."


@pytest.fixture(scope="module")
def page():
    spec = AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained")
    return open_page("pages/5_Does_the_model_use_it.py", spec, timeout=600)  # heavy first run


@pytest.fixture(scope="module")
def frames():
    model = M.load_model()
    tokens = I.token_importance(model, (TEXT,))
    heads = I.head_importance(model, (TEXT,))
    return model, tokens, I.layer_agreement(tokens), heads


def test_page_runs(page):
    assert not page.exception
    assert not page.error


def test_agreement_table_is_the_frame(page, frames):
    _, _, agreement, _ = frames
    table = page.dataframe[0].value
    assert len(table) == 6
    want = agreement[(agreement["score"] == "rollout") & (agreement["target"] == "occlusion")]
    column = "rollout / occlusion"
    assert np.allclose(table[column].to_numpy(), want["spearman"].to_numpy(), atol=1e-4)


def test_token_table_is_the_frame(page, frames):
    _, tokens, _, _ = frames
    table = page.dataframe[1].value
    assert list(table["Token"]) == list(tokens["token"])
    assert np.allclose(table["occlusion"], tokens["occlusion"], atol=1e-4)
    assert np.allclose(table["gradient × input"], tokens["gradient"], rtol=1e-3, atol=1e-5)
    assert np.allclose(table["rollout"], tokens["rollout"], atol=1e-5)


def test_head_chart_and_conclusions_come_from_the_frames(page, frames):
    _, _, agreement, heads = frames
    scatter = [f for f in chart_frames(page) if {"ablation", "max_weight"} <= set(f)]
    assert scatter and len(scatter[0]) == 72
    got = scatter[0].sort_values(["layer", "head"])
    assert np.allclose(got["ablation"], heads["ablation"], atol=1e-5)
    shown = " ".join(m.value for m in page.markdown)
    for c in conclusions(agreement, heads):
        assert c.text("en") in shown
    assert not any(f.isna().any().any() for f in chart_frames(page)
                   if "metric" in f or "spearman" in f)


def test_words_only_toggle_recomputes_the_table_without_special_pieces(page, frames):
    _, tokens, _, _ = frames
    page.toggle(key="view_imp_words").set_value(True).run(timeout=600)
    assert not page.exception
    table = page.dataframe[0].value
    want = I.layer_agreement(tokens, words_only=True)
    want = want[(want["score"] == "attention") & (want["target"] == "occlusion")]
    assert np.allclose(table["raw attention (readout query) / occlusion"].to_numpy(),
                       want["spearman"].to_numpy(), atol=1e-4)
    shown = " ".join(m.value for m in page.markdown)
    for c in conclusions(I.layer_agreement(tokens, words_only=True), frames[3]):
        assert c.text("en") in shown


def test_each_frame_is_computed_once_per_text_and_model(tiny, monkeypatch):
    """A rerun, the words-only toggle and another layer's sweep read the frames back from the
    server's store: each computation runs once per (model, texts) (sweeps once per layer)."""
    from attention.ui.views import importance as importance_view

    calls = []
    for name in ("token_importance", "head_importance", "pruning_curve", "temperature_sweep"):
        real = getattr(I, name)
        monkeypatch.setattr(I, name, lambda *a, _real=real, _name=name, **k:
                            calls.append(_name) or _real(*a, **k))
    monkeypatch.setattr(importance_view, "model_source", lambda spec: str(tiny["bert_base"]))
    at = open_page("pages/5_Does_the_model_use_it.py", AttentionSpec(tokens=tuple(TEXT.split())))
    assert not at.exception and not at.error
    assert sorted(calls) == ["head_importance", "pruning_curve", "temperature_sweep",
                             "token_importance"]
    at.run()
    at.toggle(key="view_imp_words").set_value(True).run()
    assert not at.exception and len(calls) == 4
    at.selectbox(key="view_imp_layer").set_value(0).run()
    assert not at.exception and calls.count("temperature_sweep") == 2 and len(calls) == 5
    # another text is another entry
    at.sidebar.text_area(key="in_text").input("a dog barked").run()
    assert not at.exception and calls.count("token_importance") == 2


def test_agreement_chart_dash_legend_is_drawn_by_a_plain_line_layer():
    """The dashes tell occlusion from gradient x input: the strokeDash legend must come from
    a line layer without point markers (with mark_line(point=True) Vega-Lite draws that
    legend's symbols as circles and its entries showed no dash at all)."""
    import pandas as pd

    from attention.charts.importance import agreement_chart

    frame = pd.DataFrame([dict(layer=layer, score=score, target=target, spearman=0.1 * layer)
                          for layer in range(3) for score in ("rollout", "flow")
                          for target in ("occlusion", "gradient")])
    spec = agreement_chart(frame, "en").to_dict()
    dashed = [layer for layer in spec["layer"] if "strokeDash" in layer.get("encoding", {})]
    assert len(dashed) == 1
    mark = dashed[0]["mark"]
    assert mark == "line" or (mark["type"] == "line" and not mark.get("point"))
    assert dashed[0]["encoding"]["strokeDash"]["legend"]["symbolType"] == "stroke"
    assert any(layer["mark"] in ("circle", {"type": "circle", "size": 30})
               for layer in spec["layer"])
