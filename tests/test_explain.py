"""The "how these views are computed" sections: drawn only while open (a click elsewhere on a
page does not render their paragraphs and formulas again), and whole once opened."""
from __future__ import annotations

import pytest

from attention.i18n import translate
from attention.spec import AttentionSpec
from attention.ui.views import heatmap as heatmap_view
from attention.ui.views import model as model_view
from attention.ui.views import scores as scores_view
from tests.apptest import explanation_steps, open_page

SPEC = AttentionSpec(tokens=("the", "cat", "sat", "on", "the", "mat"))

SECTIONS = {
    "pages/1_Heatmap.py": lambda: explanation_steps(heatmap_view.draw_explanation),
    "pages/2_Score_analysis.py": lambda: ("scores.formulas", list(scores_view.FORMULAS)),
    "pages/3_Model_heads.py": lambda: explanation_steps(model_view.draw_explanations),
}


@pytest.mark.parametrize("path", list(SECTIONS))
def test_an_explanation_is_drawn_only_while_open(path):
    title_key, steps = SECTIONS[path]()
    label = translate("en", title_key)
    at = open_page(path, SPEC)
    assert not at.exception
    box = next(e for e in at.expander if e.label == label)
    assert not box.latex and not box.markdown                        # closed: nothing inside
    at.session_state[f"explain_{title_key}"] = True                    # as a click opens it
    at.run()
    assert not at.exception
    box = next(e for e in at.expander if e.label == label)
    assert [f.value.strip("$\n") for f in box.latex] == [f for _, f in steps if f]   # $$..$$ off
    assert [m.value for m in box.markdown] == [translate("en", key) for key, _ in steps if key]
