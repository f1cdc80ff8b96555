"""The "Does the model use it?" page in AppTest, English and Chinese, on its default view:
every text of bundled:en on the bundled MiniLM, read from the results shipped with the code
(attention/data/importance/), never computed. The agreement table, the faithfulness and
pruning curves, head importance and the conclusions are those of the shipped frames; a
corpus that is not shipped is computed once (a tiny model) and then read back."""
from __future__ import annotations

import json

import numpy as np
import pytest

from attention import config, models as M
from attention.conclusions.importance import conclusions
from attention.errors import UserError
from attention import diskcache
from attention.importance import store
from attention.importance import live
from attention.spec import AttentionSpec
from tests.apptest import chart_frames, chart_places, open_page
from tests.tiny_models import tiny  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow     # the importance page over a corpus: left out of make test-fast

PAGE = "pages/5_Does_the_model_use_it.py"


@pytest.fixture(scope="module")
def record():
    texts = store.shipped_texts()
    got = diskcache.read(store.shipped_path(), store.key(M.BUNDLED, texts))
    assert got is not None, ("the shipped importance results are not those of this code: "
                             "run .venv/bin/python -m attention.corpus ship --importance")
    return got


def test_the_shipped_file_is_small_and_of_this_code(record):
    path = store.shipped_path()
    assert path.stat().st_size < 3 * 2**20
    fixed = store.fixed_path(M.BUNDLED, store.SHIPPED)       # the corpus-free parts beside it
    every = [store.shipped_path(c) for c in store.SHIPPED_CORPORA]     # one record a corpus
    assert sorted(p.name for p in store.SHIPPED.glob("*.zip")) == \
        sorted([p.name for p in every] + [fixed.name])
    assert diskcache.read(fixed, store.fixed_key(M.BUNDLED)) is not None
    from attention.text.corpora import load
    assert record.values["texts"] == len(store.shipped_texts()) == len(load("bundled:en"))
    assert record.values["head_texts"] == min(store.HEAD_TEXTS, record.values["texts"]) >= 100
    assert {"tokens", "agreement_words", "agreement_all", "faithfulness", "heads",
            "sharpness", "pruning", "sweep"} <= set(record.frames)


def _open(lang, monkeypatch, **view):
    """The default view (plus `view`'s URL parameters), with computing forbidden: it must come
    from the shipped file."""
    def refuse(*_a, **_k):
        raise AssertionError("the default view computed something")
    monkeypatch.setattr(live, "compute", refuse)
    return open_page(PAGE, AttentionSpec(), timeout=300, lang=lang, **view)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_default_view_shows_the_shipped_results(lang, record, monkeypatch):
    page = _open(lang, monkeypatch)
    assert not page.exception and not page.error
    assert len(page.dataframe) == 0          # the tables wait for their toggle (imp_tables)
    assert page.toggle(key="view_imp_tables").value is False
    page = _open(lang, monkeypatch, imp_tables="True")
    assert not page.exception and page.toggle(key="view_imp_tables").value is True
    frames = record.frames
    agreement = frames["agreement_words"]
    table = page.dataframe[0].value
    assert len(table) == len(agreement)
    rho = table.iloc[:, 1].to_numpy(dtype=float)
    assert np.allclose(rho, agreement["spearman"].to_numpy(), equal_nan=True)
    assert np.allclose(table.iloc[:, 2], agreement["ci_low"], equal_nan=True)
    assert np.allclose(table.iloc[:, 5], agreement["null_high"], equal_nan=True)
    faith = frames["faithfulness"]
    faith = faith[faith["texts"] > 0].drop_duplicates(subset=["method", "layer"])
    aopc = page.dataframe[1].value                                   # AOPC per method
    assert len(aopc) == len(faith)
    assert np.allclose(aopc.iloc[:, 1].to_numpy(dtype=float), faith["aopc"], equal_nan=True)
    shown = " ".join(m.value for m in page.markdown)
    assert f"**{record.values['texts']}**" in shown           # the count (every text) is stated
    sharp = frames["sharpness"]
    sharp = sharp[(sharp["importance"] == "ablation") & (sharp["sharpness"] == "max_weight")]
    layer = M.load_model().layers - 1
    sweep = frames["sweep"][frames["sweep"]["layer"] == layer]
    want = conclusions(agreement, frames["faithfulness"], sharp, frames["pruning"], sweep,
                       texts=record.values["head_texts"])
    assert want
    for c in want:
        assert c.text(lang) in shown
    assert not any("unlike Abnar" in m.value for m in page.markdown)
    datasets = chart_frames(page)
    assert any({"null_low", "ci_low", "spearman"} <= set(f) and len(f) > 20 for f in datasets)
    assert any({"random_low", "random_high", "metric"} <= set(f) for f in datasets)  # pruning
    assert any({"fraction", "change"} <= set(f) for f in datasets)                    # faith
    heads = [f for f in datasets if {"layer", "head", "ablation"} <= set(f)]
    assert heads and len(heads[0]) == 72
    for f in datasets:
        numeric = f.select_dtypes("number")
        assert not numeric.isna().any().any()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_chinese_corpus_is_shipped_too(lang, monkeypatch):
    """bundled:zh's view comes from its shipped record (computing is refused): its counts,
    and the unknown-piece share that leads its conclusions, are those of the record."""
    texts = store.shipped_texts("bundled:zh")
    zh = diskcache.read(store.shipped_path("bundled:zh"), store.key(M.BUNDLED, texts))
    from attention.text.corpora import load
    assert zh is not None and zh.values["texts"] == len(texts) == len(load("bundled:zh"))
    page = _open(lang, monkeypatch, imp_corpus="bundled:zh", imp_tables="True")
    assert not page.exception and not page.error
    agreement = zh.frames["agreement_words"]
    rho = page.dataframe[0].value.iloc[:, 1].to_numpy(dtype=float)
    assert np.allclose(rho, agreement["spearman"].to_numpy(), equal_nan=True)
    from attention.conclusions import unknown
    lead = unknown.sentence(unknown.count(zh.frames["tokens"]), zh.values["model"], "importance")
    assert lead.text(lang) in " ".join(m.value for m in page.markdown)   # MiniLM reads little


def test_a_stored_view_loads_no_model_and_a_refused_one_reads_nothing(record, monkeypatch):
    """The default view is drawn from its record alone (model name, layers, readout): no
    model is loaded on a cold link. A model the server's policy refuses gets the loader's one
    sentence, and nothing is read or computed for it."""
    from attention.ui.views import importance as view

    def no_load(*_a, **_k):
        raise AssertionError("the page loaded a model")
    monkeypatch.setattr(M, "load_model", no_load)
    page = _open("en", monkeypatch)
    assert not page.exception and not page.error
    assert any(record.values["model"] in m.value for m in page.markdown)   # the intro
    layers = page.selectbox(key=f"view_{view.LAYER_KEY}")
    assert layers.options == [str(i) for i in range(record.values["layers"])]
    monkeypatch.setattr(view, "model_source", lambda spec: "/etc")
    monkeypatch.setattr(store, "results", no_load)
    page = _open("en", monkeypatch)
    assert not page.exception
    want = str(UserError("model.not_allowed", source=config.shown("/etc"),
                         allowed=", ".join(config.policy().sources), env=config.ENV_LOCAL))
    assert [e.value for e in page.error] == [want]


def test_tables_words_only_and_layer_are_in_the_url_and_switch_the_frames(record, monkeypatch):
    page = _open("en", monkeypatch)
    assert page.query_params.get("imp_words") in ("True", ["True"])
    page.toggle(key="view_imp_tables").set_value(True).run(timeout=300)
    assert page.query_params.get("imp_tables") in ("True", ["True"]) and len(page.dataframe) == 2
    page.toggle(key="view_imp_words").set_value(False).run(timeout=300)
    assert not page.exception
    table = page.dataframe[0].value
    assert np.allclose(table.iloc[:, 1].to_numpy(dtype=float),
                       record.frames["agreement_all"]["spearman"], equal_nan=True)
    page.selectbox(key="view_imp_layer").set_value(2).run(timeout=300)
    assert not page.exception
    sweep = [f for f in chart_frames(page) if {"tau", "diff"} <= set(f)]
    want = record.frames["sweep"]
    assert np.allclose(sweep[0].sort_values("tau")["diff"],
                       want[want["layer"] == 2].sort_values("tau")["diff"])


def test_a_corpus_not_shipped_is_computed_once_then_read(tiny, monkeypatch):
    """The sidebar's lines on a tiny model: computed with progress, once; a rerun and the
    words-only toggle read it back from the server's store."""
    from attention.ui.views import importance as view

    calls = []
    real = live.compute
    monkeypatch.setattr(store, "N_BOOT", 50)
    monkeypatch.setattr(store, "ORDERS", 2)
    monkeypatch.setattr(live, "compute",
                        lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    monkeypatch.setattr(view, "model_source", lambda spec: str(tiny["bert_base"]))
    monkeypatch.setenv(config.ENV_LOCAL, "1")        # a local folder, as `make run` permits
    at = open_page(PAGE, AttentionSpec(tokens=("the", "cat", "sat"), source="pretrained"),
                   timeout=300,
                   imp_corpus="sidebar")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert calls == [["the cat sat"]]
    text = "the cat sat on the mat .\na dog barked at the moon"
    at.sidebar.text_area(key="in_text").input(text).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert len(calls) == 2 and list(calls[1]) == text.splitlines()
    shown = " ".join(m.value for m in at.markdown)
    assert "cannot tell" in shown and "fewer than 20" in shown
    at.toggle(key="view_imp_words").set_value(False).run()
    at.run()
    assert not at.exception and len(calls) == 2


def _in_order(node) -> list:
    """The page's elements in the order they are drawn (blocks walked depth first)."""
    children = getattr(node, "children", None)
    if children is None:
        return [node]
    out = []
    for key in sorted(children):
        out += _in_order(children[key])
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("corpus", ["bundled:en", "bundled:zh"])
def test_the_answer_comes_before_the_charts(corpus, lang, monkeypatch):
    """The answer's sentences (conclusions.answer on the shipped frames) are drawn above the
    first chart; the caption beside the corpus picker says the pruning and sweep metrics do
    not follow the corpus; bundled:zh leads with the unknown-piece share."""
    from attention.conclusions import unknown
    from attention.conclusions.answer import answer

    texts = store.shipped_texts(corpus)
    rec = diskcache.read(store.shipped_path(corpus), store.key(M.BUNDLED, texts))
    page = _open(lang, monkeypatch, imp_corpus=corpus)
    assert not page.exception and not page.error
    frames = rec.frames
    agreement = frames["agreement_words"]
    sharp = frames["sharpness"]
    sharp = sharp[(sharp["importance"] == "ablation") & (sharp["sharpness"] == "max_weight")]
    lead = unknown.sentence(unknown.count(frames["tokens"]), rec.values["model"], "importance")
    said = [c.text(lang) for c in answer(agreement[agreement["texts"] > 0], sharp,
                                         int(rec.values["head_texts"]), lead)]
    assert 2 <= len(said) <= 3
    drawn = _in_order(page.main)
    kinds = [type(e).__name__ for e in drawn]
    first_chart = next(i for i, e in enumerate(drawn)
                       if getattr(e, "type", None) == "vega_lite_chart")
    where = [next(i for i, e in enumerate(drawn) if getattr(e, "value", None) == s)
             for s in said]
    assert where == sorted(where) and where[-1] < first_chart, kinds
    assert (corpus == "bundled:zh") == (lead.key == "high_importance")
    if lead.key == "high_importance":
        assert "[UNK]" in said[0]
    units = int(frames["pruning"]["units"].iloc[0])
    note = t_of(lang, "importance.corpus_fixed_note", units=units)
    assert note in [c.value for c in page.caption]


def t_of(lang, key, **params):
    from attention.i18n import translate
    return translate(lang, key, **params)


def test_the_page_measures_whole_bundled_corpora_and_the_first_texts_of_any_other(tiny):
    """Every text of a bundled corpus on the bundled model (its record ships); the first
    PAGE_TEXTS of the sidebar's or an uploaded corpus, or on another model (computed live)."""
    texts = [f"text {i}" for i in range(3 * store.PAGE_TEXTS)]
    assert store.measured(config.BUNDLED, "bundled:zh", texts) == texts
    assert store.measured(config.BUNDLED, "sidebar", texts) == texts[:store.PAGE_TEXTS]
    assert store.measured(str(tiny["bert_base"]), "bundled:en", texts) == \
        texts[:store.PAGE_TEXTS]
    assert store.measured(config.BUNDLED, "upload", texts[:3]) == texts[:3]


def test_a_toggle_keeps_every_chart_in_its_place_and_builds_no_chart_again(record, monkeypatch):
    """The Tables toggle adds its tables inside places that are there either way: every chart
    keeps its place in the page (a shifted element is drawn again from scratch by the
    browser: 480 ms a click against 180). A click that leaves a chart as it is builds no chart:
    each comes from the server's store, and equals the chart built afresh."""
    from attention.charts import importance as charts
    from attention.charts.vega import page_spec

    page = _open("en", monkeypatch)
    places = chart_places(page)
    assert len(places) == 6
    built = []
    for name in ("agreement_chart", "faithfulness_chart", "heads_chart", "sharpness_chart",
                 "pruning_chart", "sweep_chart"):
        monkeypatch.setattr(charts, name, lambda *a, _real=getattr(charts, name), _name=name,
                            **k: built.append(_name) or _real(*a, **k))
    page.toggle(key="view_imp_tables").set_value(True).run(timeout=300)
    assert len(page.dataframe) == 2 and chart_places(page) == places
    page.toggle(key="view_imp_tables").set_value(False).run(timeout=300)
    assert len(page.dataframe) == 0 and chart_places(page) == places
    assert built == []
    page.toggle(key="view_imp_words").set_value(False).run(timeout=300)
    assert built == ["agreement_chart"] and chart_places(page) == places
    sent = page.get("vega_lite_chart")[0].proto.spec
    fresh = page_spec(charts.agreement_chart(record.frames["agreement_all"].query("texts > 0"), "en"))
    fresh.pop("datasets")
    assert json.loads(sent) == json.loads(json.dumps(fresh))
