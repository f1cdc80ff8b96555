"""The real-models section of "Is sharper better?": its conclusions from summaries built by
hand, its charts (no NaN drawn), and the page itself on shipped results in both languages."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from attention.conclusions import sweeps as conclusions
from attention.i18n import translate
from attention.sweeps import stats, store
from attention.sweeps.settings import LAYER_VARIANTS, settings_of

LAYERS, HEADS = 3, 2
TAU_EFFECT = {"0.25": 0.9, "0.5": 0.3, "0.75": 0.05, "1.5": -0.02, "2": 0.1, "4": 0.6}
SHARPNESS = {"0.25": 0.95, "0.5": 0.85, "0.75": 0.75, "1.5": 0.55, "2": 0.5, "4": 0.4}


def synthetic_rows(texts: int, seed: int = 0) -> pd.DataFrame:
    """Per-text rows of every sweep with known effects: no scale +1.6 nats and sharper, 1/d
    +3 and flatter, tau 1.5 slightly better (-0.02) and flatter, sinks +0.2."""
    rng = np.random.default_rng(seed)
    base = rng.normal(3.0, 0.3, texts)
    rows = []
    for s in settings_of(("global", "layers", "heads", "layers_rest"), LAYERS, HEADS):
        if s.family == "base":
            effect, sharp = 0.0, 0.65
        elif s.family == "scale":
            effect, sharp = {"none": (1.6, 0.95), "inv_d": (3.0, 0.25), "ssmax": (0.1, 0.6)}[s.variant]
        elif s.family == "tau":
            effect, sharp = TAU_EFFECT[s.variant], SHARPNESS[s.variant]
        elif s.family == "sinks":
            effect, sharp = 0.2, 0.7
        else:
            effect, sharp = 0.01 * (s.layer + 1) * (s.head + 1), 0.65
        if s.layer >= 0 and s.family in ("tau", "sinks", "scale"):
            effect = effect / LAYERS
        noise = rng.normal(0, 0.005, texts) if s.family != "base" else 0.0
        for t in range(texts):
            rows.append({"text_id": t, "family": s.family, "variant": s.variant,
                         "layer": s.layer, "head": s.head, "nll": base[t] + effect + noise[t]
                         if s.family != "base" else base[t], "predicted": 10,
                         "max_weight": sharp, "entropy": 1.0 - sharp,
                         "own_max_weight": 0.3 + 0.1 * (s.head + 1) + 0.05 * s.layer,
                         "own_entropy": 1.0})
    return pd.DataFrame(rows)


def _summaries(texts: int) -> pd.DataFrame:
    return stats.summary(synthetic_rows(texts), n_boot=200)


def test_answer_says_what_the_numbers_show():
    s = _summaries(40)
    g = s[(s["layer"] < 0) & (s["head"] < 0)]
    answer = conclusions.answer(g, "TinyLM", "en")
    assert len(answer) <= 3
    assert "sharper" in answer[0] and "worse" in answer[0] and "40 texts" in answer[0]
    # 5 sharper settings (none, 0.25, 0.5, 0.75, sinks) all worse; 5 flatter, 1.5 better
    assert "Sharper is not better: of the 5 settings that make attention sharper than trained, 5 make the model worse" \
        in answer[1]
    assert "4 are worse and 1 better" in answer[1]
    assert answer[2].startswith("A setting other than the trained one is better: τ = 1.5 in every layer")
    zh = conclusions.answer(g, "TinyLM", "zh")
    assert len(zh) == 3 and "40 段文本" in zh[0]


def test_too_few_texts_cannot_tell():
    s = _summaries(8)
    g = s[(s["layer"] < 0) & (s["head"] < 0)]
    (only,) = conclusions.answer(g, "TinyLM", "en")
    assert "cannot tell" in only and "8 texts" in only


def test_temperature_sinks_and_heads_sentences():
    s = _summaries(30)
    g = s[(s["layer"] < 0) & (s["head"] < 0)]
    layers = s[(s["layer"] >= 0) & (s["head"] < 0)]
    tau = conclusions.temperature_sentence(g, layers[layers["family"] != "scale"], "en")
    assert tau.startswith("τ = 1.5 in every layer is better")
    per = layers[layers["family"] == "tau"]                  # the counts, from the frame
    worse, better = int((per["d_lo"] > 0).sum()), int((per["d_hi"] < 0).sum())
    assert f"({worse} for the worse, {better} for the better; with no effect at all about " \
        f"{0.05 * len(per):.1f} would by chance)" in tau
    assert ("The best of the" in tau) == (better > 0)
    sinks = conclusions.sinks_sentence(g, layers, "en")
    assert "worse" in sinks and f"in {LAYERS} of {LAYERS} layers" in sinks
    per_head = stats.heads(s)
    assert len(per_head) == LAYERS * HEADS
    agree = stats.agreement(per_head, n_boot=200)
    sentence = conclusions.heads_sentence(agree, per_head, "en")
    assert "30 texts" in sentence and f"{LAYERS * HEADS} heads" in sentence


def test_scale_variants_one_layer_at_a_time():
    """The layers_rest sweep's sentence: per variant, the layers where the paired interval
    clears 0, counted here from the frame, and the layer of the largest change."""
    from attention.charts import experiment_real as charts

    s = _summaries(30)
    rest = s[(s["layer"] >= 0) & (s["head"] < 0) & (s["family"] == "scale")]
    assert len(rest) == 3 * LAYERS
    sentence = conclusions.scale_layers_sentence(rest, "en")
    for variant, name in (("none", "No scale"), ("inv_d", "1/d"), ("ssmax", "SSMax")):
        v = rest[rest["variant"] == variant]
        worse, better = int((v["d_lo"] > 0).sum()), int((v["d_hi"] < 0).sum())
        top = v.loc[v["d_nll"].abs().idxmax()]
        assert (f"{name}, one layer at a time: worse in {worse} and better in {better} of {LAYERS} layers; the largest "
                f"change is in layer {int(top['layer'])} (ΔNLL {top['d_nll']:+.3f}") in sentence
    assert sentence.count("one layer at a time") == 3
    few = conclusions.scale_layers_sentence(_summaries(8).query("layer >= 0 and family == 'scale'"), "en")
    assert "cannot tell" in few
    chart = charts.layer_chart(rest, "scale", "zh").to_dict()
    assert "NaN" not in json.dumps(chart)
    (data,) = [d for d in chart["datasets"].values() if "label" in d[0]]
    assert {r["label"] for r in data} == {"不缩放", "1/d", "SSMax"}
    assert sorted(round(r["d_nll"], 6) for r in data) == sorted(round(x, 6) for x in rest["d_nll"])


def test_charts_draw_every_number():
    from attention.charts import experiment_real as charts

    s = _summaries(30)
    g = s[(s["layer"] < 0) & (s["head"] < 0)]
    layers = s[(s["layer"] >= 0) & (s["head"] < 0)]
    per_head = stats.heads(s)
    for chart in (charts.quality_chart(g, "en"), charts.quality_chart(g, "zh", "entropy"),
                  charts.interval_bars(g, "en", "ppl", "ppl_lo", "ppl_hi", "ppl", log=True),
                  charts.tau_chart(g, "en"), charts.layer_chart(layers, "tau", "en"),
                  charts.heads_chart(per_head, "en"),
                  charts.agreement_chart(stats.agreement(per_head, n_boot=100), "en")):
        spec = json.dumps(chart.to_dict())
        assert "NaN" not in spec
    drawn = charts.quality_chart(g, "en").to_dict()
    data = list(drawn["datasets"].values())[0]
    assert sorted(round(r["ppl"], 6) for r in data) == sorted(round(v, 6) for v in g["ppl"])


@pytest.fixture
def shipped_results(tmp_path, monkeypatch):
    """Synthetic results shipped for the bundled LM under the current key, in tmp_path."""
    from attention import config
    from attention.corpus import load
    from attention.sweeps.ship import derive

    monkeypatch.setattr(store, "FOLDER", tmp_path)
    texts = load("bundled:en")
    rows = synthetic_rows(30)
    one_layer = (rows["layer"] >= 0) & (rows["head"] < 0)
    first = pd.Series(list(zip(rows["family"], rows["variant"]))).isin(LAYER_VARIANTS).to_numpy()
    for sweep, pick in (("global", (rows["layer"] < 0)),
                        ("layers", one_layer & first), ("layers_rest", one_layer & ~first),
                        ("heads", rows["head"] >= 0)):
        part = rows[pick | (rows["family"] == "base")]
        target = store.path(config.BUNDLED_LM, "bundled:en", texts, sweep)
        store.write(part, target)
        derive(part, target, sweep)
    return tmp_path


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_shows_the_real_model_section(shipped_results, lang):
    from tests.apptest import open_page

    at = open_page("pages/4_Is_sharper_better.py", lang=lang, timeout=120, sh_layers="True")
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    header = {"en": "On a real language model", "zh": "在真实的语言模型上"}[lang]
    assert any(h.value == header for h in at.header)
    assert ("30 texts" if lang == "en" else "30 段文本") in text
    infos = " ".join(i.value for i in at.info)
    assert ("Sinks" if lang == "en" else "汇点") in " ".join(s.value for s in at.subheader)
    assert infos
    # the real models' part alone: the answer's chart, the scale variants', the temperature's
    # and the sinks', with their three per-layer charts (?sh_layers=True)
    assert len(at.get("vega_lite_chart")) == 7
    assert translate(lang, "sharper.sec_sharpen") not in [s.value for s in at.subheader]
    # the scale variants one layer at a time (layers_rest): their chart's caption and sentence
    caption = {"en": "Each scale variant in one layer alone", "zh": "每种缩放只用于一层"}[lang]
    assert any(caption in c.value for c in at.caption)
    worse = {"en": f"worse in {LAYERS} and better in 0 of {LAYERS} layers",
             "zh": f"在 {LAYERS} 层中 {LAYERS} 层变差、0 层变好"}[lang]
    assert sum(worse in i.value for i in at.info) == 1


def test_per_layer_charts_and_numbers_wait_until_asked(shipped_results):
    """A cold link draws the section without its three per-layer charts (a toggle kept in
    the URL, ?sh_layers=) nor its two per-head ones (?sh_heads=), and with the summary
    tables' box closed (?sh_numbers=), every
    sentence still there; a link with both on reopens them; bad values fall back."""
    from tests.apptest import open_page

    page = "pages/4_Is_sharper_better.py"
    shown = open_page(page, timeout=120, sh_layers="True", sh_numbers="True", sh_heads="True")
    hidden = open_page(page, timeout=120, sh_part="real")
    bad = open_page(page, timeout=120, sh_layers="yes", sh_numbers="1", sh_heads="on")
    assert not shown.exception and not hidden.exception and not bad.exception and not bad.error
    charts = {name: len(at.get("vega_lite_chart")) for name, at in
              (("shown", shown), ("hidden", hidden), ("bad", bad))}
    assert charts["shown"] == charts["hidden"] + 3 + 2 == charts["bad"] + 3 + 2   # layers, heads
    assert [i.value for i in shown.info] == [i.value for i in hidden.info]
    assert shown.dataframe and not hidden.dataframe and not bad.dataframe
    assert hidden.query_params["sh_layers"] in ("False", ["False"])
    assert shown.query_params["sh_numbers"] in ("True", ["True"])
    assert bad.query_params["sh_numbers"] in ("False", ["False"])


def test_the_layers_and_heads_toggles_move_no_chart(shipped_results):
    """The per-layer and per-head charts open in places there either way (ui.chart.place):
    every other chart keeps its place in the page, so the browser keeps its views of them
    instead of embedding each again."""
    from tests.apptest import chart_places, open_page

    at = open_page("pages/4_Is_sharper_better.py", timeout=120, sh_part="real")
    before = chart_places(at)
    for key in ("view_sh_layers", "view_sh_heads"):
        at.toggle(key=key).set_value(True).run()
        assert not at.exception
    shown = chart_places(at)
    assert len(shown) == len(before) + 3 + 2 and set(before) <= set(shown)
    for key in ("view_sh_layers", "view_sh_heads"):
        at.toggle(key=key).set_value(False).run()
    assert chart_places(at) == before


def test_the_sentence_models_layers_toggle_moves_no_table():
    """The sentence model's per-layer chart is its last, but the summary tables' box is
    below it: open, its tables keep their places too (a grid mounted again is no cheaper)."""
    from tests.apptest import CHARTS, chart_places, open_page

    at = open_page("pages/4_Is_sharper_better.py", timeout=120, sh_model="sentence",
                   sh_numbers="True")
    kinds = (*CHARTS, "dataframe")
    before = chart_places(at, kinds)
    assert len(at.dataframe) == 2
    at.toggle(key="view_sh_layers").set_value(True).run()
    shown = chart_places(at, kinds)
    assert len(shown) == len(before) + 1 and set(before) <= set(shown)


def test_page_without_results_says_so(tmp_path, monkeypatch):
    from tests.apptest import open_page

    monkeypatch.setattr(store, "FOLDER", tmp_path)
    at = open_page("pages/4_Is_sharper_better.py", timeout=120, sh_part="real")
    assert not at.exception
    assert any("No shipped results" in w.value for w in at.warning)


def test_shipped_results_are_the_summaries_of_their_rows():
    """The results shipped for the bundled LM exist under the current key (a change to the
    code that computes them needs `python -m attention.corpus ship`), cover the corpus, and
    their summaries are recomputed from their own per-text rows (stored as float32)."""
    from attention import config
    from attention.corpus import load

    texts = load("bundled:en")
    summaries = store.read(config.BUNDLED_LM, "bundled:en", texts)
    rows = store.read(config.BUNDLED_LM, "bundled:en", texts, "rows")
    assert "global" in summaries and "global" in rows
    assert int(summaries["global"]["texts"].max()) == len(texts)
    for sweep, table in summaries.items():
        again = stats.summary(rows[sweep])
        pd.testing.assert_frame_equal(again.reset_index(drop=True),
                                      table.reset_index(drop=True), check_exact=False,
                                      rtol=1e-4, atol=1e-5, check_dtype=False)
        assert set(rows[sweep]["text_id"]) <= set(range(len(texts)))


# ------------------------------------------------------ the sentence model (paraphrase retrieval)


def test_the_sentence_models_shipped_results_are_the_summaries_of_their_rows():
    """MiniLM's retrieval sweeps ship under the current key over every bundled pair, and the
    summaries beside them are recomputed from their own per-pair rows (float32)."""
    from attention import config
    from attention.corpus import pairs
    from attention.sweeps import pairs as P

    got = pairs("bundled:en")
    summaries = P.read(config.BUNDLED, "bundled:en", got)
    rows = P.read(config.BUNDLED, "bundled:en", got, "rows")
    assert set(summaries) == set(rows) == {"global", "layers"}
    for sweep, table in summaries.items():
        assert int(table["pairs"].max()) == len(got)
        assert len(rows[sweep]) == len(got) * len(P.pair_settings(sweep, 6))
        again = P.summary(rows[sweep])
        pd.testing.assert_frame_equal(again.reset_index(drop=True),
                                      table.reset_index(drop=True), check_exact=False,
                                      rtol=1e-4, atol=1e-5, check_dtype=False)


def _pairs_shown(lang: str) -> dict:
    """What the page must show for MiniLM, computed here from the shipped per-pair rows."""
    from attention import config
    from attention.corpus import pairs

    from attention.sweeps import pairs as P

    rows = P.read(config.BUNDLED, "bundled:en", pairs("bundled:en"), "rows")["global"]
    base = rows[rows["family"] == "base"]
    none = rows[(rows["family"] == "scale") & (rows["variant"] == "none")]
    return {"acc0": float(base["hit"].mean()), "acc_none": float(none["hit"].mean()),
            "pairs": base["pair_id"].nunique()}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_shows_the_sentence_models_numbers_from_the_shipped_rows(lang):
    from tests.apptest import open_page

    want = _pairs_shown(lang)
    at = open_page("pages/4_Is_sharper_better.py", lang=lang, timeout=120, sh_model="sentence")
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    count = f"{want['pairs']} pairs" if lang == "en" else f"{want['pairs']} 个句对"
    answer = [m.value for m in at.markdown if f"{want['acc0']:.3f}" in m.value]
    assert answer, "the trained model's accuracy is not on the page"
    assert f"{want['acc0']:.3f} → {want['acc_none']:.3f}" in answer[0]
    assert count in answer[0]
    lines = answer[0].splitlines()
    assert len(lines) <= 3
    assert ("all-MiniLM-L6-v2" in text) and ("[UNK]" in " ".join(c.value for c in at.caption))
    infos = " ".join(i.value for i in at.info)
    assert count in infos
    assert len(at.get("vega_lite_chart")) == 3      # the answer's, the scale variants', the temperature's
    assert at.query_params.get("sh_model") in ("sentence", ["sentence"])


def test_sentence_model_conclusions_say_the_data_cannot_tell_when_it_cannot():
    from attention.sweeps import pairs as P

    rng = np.random.default_rng(2)
    rows = []
    for s in P.pair_settings("global", 2):
        # no scale: clearly worse; tau 0.5 clearly better; the rest a coin flip around base
        shift = {"none": -0.5, "0.5": 0.5}.get(s.variant, 0.0) if s.family != "base" else 0.0
        for p in range(40):
            hit = float(rng.integers(0, 2)) if shift == 0.0 else float(shift > 0)
            rows.append({"pair_id": p, "family": s.family, "variant": s.variant,
                         "layer": s.layer, "head": -1, "hit": hit if s.family != "base"
                         else float(p % 2), "rr": 0.5, "pieces": 20,
                         "max_weight": 0.9 if s.variant == "none" else 0.5,
                         "entropy": 1.0, "own_max_weight": 0.5, "own_entropy": 1.0})
    g = P.summary(pd.DataFrame(rows), n_boot=200)
    answer = conclusions.pairs_answer(g, "TinyBERT", "en")
    assert len(answer) == 3
    assert "sharper" in answer[0] and "worse" in answer[0] and "40 pairs" in answer[0]
    assert answer[2].startswith("A setting other than the trained one is better: τ = 0.5")
    few = conclusions.pairs_answer(g.assign(pairs=8), "TinyBERT", "en")
    from attention.conclusions.importance import MIN_TEXTS

    assert few == [f"The data cannot tell: 8 pairs are fewer than the {MIN_TEXTS} a statement "
                   "about the set needs."]
    sentence = conclusions.pairs_scale_sentence(g, "zh")
    assert "数据无法判断" in sentence or "变差" in sentence
