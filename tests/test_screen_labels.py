"""No raw column id on screen, in either language: every page, in the views a user opens, is
walked in AppTest, and every table header, axis title, legend title and tooltip key it
shows (tests/screen.py reads them as the browser would) is a translated label, never a
snake_case id, never a field shown without a title, and never Latin words in the Chinese
interface. The Corpus page's Pattern column shows the patterns' names, not their ids."""
from __future__ import annotations

import pytest

from attention.i18n import LANGUAGES, translate
from attention.corpus.store import SHARES
from attention.ui.pages import SCRIPTS
from tests.apptest import open_page
from tests.screen import Shown, chart_labels, labels, raw

TEXT = {"source": "pretrained", "text": "the cat sat on the mat"}
VIEWS = [
    ("app.py", {}),
    ("pages/1_Heatmap.py", {}), ("pages/1_Heatmap.py", {"hm_view": "grid"}),
    ("pages/1_Heatmap.py", {"hm_view": "row"}), ("pages/1_Heatmap.py", TEXT),
    ("pages/2_Score_analysis.py", {}), ("pages/2_Score_analysis.py", {"sc_head": "0"}),
    *[("pages/2_Score_analysis.py", {"sc_figure": figure})      # one figure at a time
      for figure in ("rows", "sweep", "saturation")],
    *[("pages/3_Model_heads.py", {**TEXT, "mh_tab": part})
      for part in ("heads", "table", "iv", "upload")],
    ("pages/4_Is_sharper_better.py", {}),
    ("pages/4_Is_sharper_better.py", {"sh_model": "sentence"}),
    ("pages/5_Does_the_model_use_it.py", {"imp_tables": "True"}),
    ("pages/5_Does_the_model_use_it.py", {"imp_tables": "True", "imp_words": "False"}),
    ("pages/6_Corpus.py", {"cp_table": "True"}),          # the table shows the patterns
    ("pages/6_Corpus.py", {"cp_folder": "shipped:zh", "cp_stat": "entropy", "cp_table": "True"}),
]


def test_every_page_is_walked():
    assert {path for path, _ in VIEWS} == set(SCRIPTS)


@pytest.mark.parametrize("lang", list(LANGUAGES))
@pytest.mark.parametrize("path,view", VIEWS, ids=[f"{p}-{'&'.join(v)}" for p, v in VIEWS])
def test_no_raw_id_on_screen(path, view, lang):
    at = open_page(path, timeout=300, lang=lang, **view)
    assert not at.exception, at.exception
    shown = labels(at)
    bad = sorted({(s.kind, s.text) for s in shown if raw(s, lang)})
    assert not bad, f"raw ids on {path} ({lang}): {bad}"
    if path == "pages/6_Corpus.py":
        header = translate(lang, "corpus.pattern")
        table = at.dataframe[-1].value
        names = {translate(lang, f"model.col_{p}") for p in SHARES}
        assert set(table[header]) <= names and not set(table[header]) & set(SHARES)


def test_the_checker_catches_what_it_should():
    """The reader of labels can fail: a field without a title, a snake_case title, English in
    the Chinese interface, a tooltip of every field."""
    spec = {"layer": [
        {"mark": "bar", "encoding": {"x": {"field": "ci_low", "type": "quantitative"},
                                     "y": {"field": "layer", "type": "ordinal",
                                           "title": "Layer"},
                                     "tooltip": [{"field": "mean_ablation"},
                                                 {"field": "head", "title": "头"}]}},
        {"mark": "rule", "encoding": {"x": {"field": "x", "title": "Share"}}}]}
    got = chart_labels(spec)
    assert Shown("axis", "Share", "x") in got                  # an explicit title wins
    assert not any(s.text == "ci_low" for s in got)            # over the field of a layer
    assert [s.text for s in got if raw(s, "en")] == ["mean_ablation"]
    assert {s.text for s in got if raw(s, "zh")} == {"mean_ablation", "Share", "Layer"}
    assert raw(Shown("column", "max_weight", None), "en")
    assert not raw(Shown("column", "95% 区间下限", None), "zh")
    assert not raw(Shown("column", "AOPC", None), "zh")
