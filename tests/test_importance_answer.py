"""The importance page answers first (issue 43, section 4): at most three sentences above the
charts, the unknown-piece share first where the model cannot read most of the corpus; the
baselines' sentence before the methods', naming exactly the rows whose interval lies wholly
above the best baseline's; the pooled null band off 0 explained; the pruning and sweep
sentences name what they were measured on; a corpus of fewer than MIN_TEXTS texts gets no
pruning or sweep claim. Every expected number is recomputed here from the frames (pandas,
the method names spelled out), not taken from the module under test."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attention import config, diskcache
from attention.conclusions import unknown
from attention.conclusions.answer import answer
from attention.conclusions.importance import Label, MIN_TEXTS, conclusions
from attention.importance import store

BASE = ("random", "position_start", "position_end", "inverse_frequency")
ATTENTION = ("attention", "rollout", "flow", "norm")
SCORED = ATTENTION + ("gradient", "integrated_gradients")
CANNOT = {"en": "cannot tell", "zh": "无法"}


def two(x) -> str:
    """A number as a sentence shows it, formatted here on its own."""
    return f"{float(x):.2f}".replace("-0.00", "0.00")


def _record(corpus):
    texts = store.shipped_texts(corpus)
    got = diskcache.read(store.shipped_path(corpus), store.key(config.BUNDLED, texts))
    assert got is not None, "the shipped importance results are not those of this code"
    return got


def _pooled(frames):
    s = frames["sharpness"]
    s = s[(s["importance"] == "ablation") & (s["sharpness"] == "max_weight")]
    return s, s[s["layer"].isna()].iloc[0]


def _label(row) -> Label:
    return Label(row["method"], None if pd.isna(row["layer"]) else int(row["layer"]))


def _beating(agreement, families):
    """Rows of `families` (layer means left out) whose 95% interval lies wholly above the
    best baseline's (its lower end above the baseline's upper end), highest rho first."""
    base = agreement[agreement["method"].isin(BASE)].dropna(subset=["spearman"])
    best = base.sort_values("spearman").iloc[-1]
    rows = agreement[agreement["method"].isin(families) & ~agreement["layer_mean"]
                     & agreement["ci_low"].notna()]
    return best, rows, rows[rows["ci_low"] > best["ci_high"]].sort_values("spearman",
                                                                        ascending=False)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("corpus", ["bundled:en", "bundled:zh"])
def test_the_answer_quotes_the_shipped_frames(corpus, lang):
    record = _record(corpus)
    frames = record.frames
    agreement = frames["agreement_words"]
    agreement = agreement[agreement["texts"] > 0]
    sharp, pooled = _pooled(frames)
    heads_texts = int(record.values["head_texts"])
    tokens = frames["tokens"]
    flags = tokens["unknown"].astype(bool)
    share = flags.sum() / (~tokens["special"].astype(bool) | flags).sum()
    lead = unknown.sentence(unknown.count(tokens), record.values["model"], "importance")
    said = answer(agreement, sharp, heads_texts, lead)
    assert 2 <= len(said) <= 3
    texts = [c.text(lang) for c in said]
    if share > 0.5:                      # MiniLM on Chinese: most pieces are [UNK]
        assert corpus == "bundled:zh" and len(said) == 3
        assert f"{100 * share:.0f}%" in texts[0] and "[UNK]" in texts[0]
        texts = texts[1:]
    else:
        assert corpus == "bundled:en" and len(said) == 2
    attention_text, sharp_text = texts
    best, rows, above = _beating(agreement, ATTENTION)
    assert len(above) >= 1               # on both records some layer beats the baseline
    for _, row in above.iterrows():
        assert _label(row).text(lang) in attention_text
    for _, row in rows.drop(above.index).iterrows():        # none below it is named
        assert _label(row).text(lang) not in attention_text
    top = above.iloc[0]
    for value in (best["spearman"], best["ci_low"], best["ci_high"],
                  top["spearman"], top["ci_low"], top["ci_high"]):
        assert two(value) in attention_text
    assert Label(best["method"]).text(lang) in attention_text
    assert str(int(agreement["texts"].max())) in attention_text
    assert f"{len(above)}" in attention_text and f"{len(rows)}" in attention_text
    for value in (pooled["spearman"], pooled["ci_low"], pooled["ci_high"],
                  pooled["null_low"], pooled["null_high"]):
        assert two(value) in sharp_text
    assert str(heads_texts) in sharp_text and str(int(pooled["heads"])) in sharp_text
    clear = pooled["ci_low"] > pooled["null_high"] or pooled["ci_high"] < pooled["null_low"]
    assert (CANNOT[lang] in sharp_text) == (not clear)
    assert said[-1].key == ("answer_sharp_null" if not clear else
                            "answer_sharp_pos" if pooled["spearman"] > 0 else "answer_sharp_neg")


def test_the_baselines_come_first_and_name_exactly_the_rows_above_the_best():
    record = _record("bundled:en")
    frames = record.frames
    agreement = frames["agreement_words"]
    said = conclusions(agreement, frames["faithfulness"], *(_pooled(frames)[:1]),
                       frames["pruning"], frames["sweep"][frames["sweep"]["layer"] == 5],
                       texts=int(record.values["head_texts"]))
    keys = [c.key for c in said]
    assert keys[0] == "c_baseline"
    assert all(k.startswith(("c_agree", "c_compare", "c_faith", "c_sharp", "c_null", "c_pruning",
                             "c_sweep")) for k in keys[1:])
    best, rows, above = _beating(agreement, SCORED)
    text = said[0].text("en")
    named = set()
    for _, row in rows.iterrows():
        if _label(row).text("en") in text:
            named.add(_label(row))
    assert named == {_label(r) for _, r in above.iterrows()} and len(named) == 4
    assert f"{len(above)} of {len(rows)}" in text and two(best["ci_high"]) in text


def _wide_agreement(above: int, texts: int = 100) -> pd.DataFrame:
    """`above` attention layers clear of a baseline at 0.30 (0.25 to 0.35), the rest not."""
    rows = []

    def row(method, layer, rho, half, baseline=False, mean=False):
        rows.append({"method": method, "layer": layer, "spearman": rho, "ci_low": rho - half,
                     "ci_high": rho + half, "null_low": -0.05, "null_high": 0.05, "texts": texts,
                     "skipped": 0, "pieces": 10 * texts, "baseline": baseline,
                     "layer_mean": mean})
    for layer in range(8):
        rho = 0.50 + 0.02 * layer if layer < above else 0.36   # 0.36 - 0.05 < 0.35: not clear
        row("attention", float(layer), rho, 0.05)
    row("attention", np.nan, 0.45, 0.05, mean=True)
    row("gradient", np.nan, 0.34, 0.05)
    for name, rho in zip(BASE, (0.0, 0.1, -0.1, 0.30)):
        row(name, np.nan, rho, 0.05, baseline=True)
    return pd.DataFrame(rows)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_many_rows_above_are_the_top_few_and_how_many_in_all(lang):
    agreement = _wide_agreement(6)
    (first, *rest) = conclusions(agreement)
    assert first.key == "c_baseline" and rest
    text = first.text(lang)
    best, rows, above = _beating(agreement, SCORED)
    assert len(above) == 6
    named = [int(r["layer"]) for _, r in above.iterrows()
             if _label(r).text(lang) in text]
    assert named == [5, 4, 3, 2]                          # the highest four, by rho
    assert ("and 2 more" in text) if lang == "en" else ("另有 2 行" in text)
    none = conclusions(_wide_agreement(0))[0]
    assert none.key == "c_baseline_none"
    (said,) = answer(_wide_agreement(0), None, 100)
    assert said.key == "answer_attention_none" and two(0.36) in said.text(lang)


def test_a_null_band_off_zero_is_explained_once_and_only_then():
    def sharp(null):
        return pd.DataFrame([{"layer": np.nan, "importance": "ablation",
                              "sharpness": "max_weight", "spearman": -0.3, "ci_low": -0.45,
                              "ci_high": -0.12, "null_low": null[0], "null_high": null[1],
                              "heads": 72}])
    keys = [c.key for c in conclusions(sharpness=sharp((-0.32, -0.07)), texts=40)]
    assert keys.count("c_null_off_zero") == 1
    off = [c for c in conclusions(sharpness=sharp((-0.32, -0.07)), texts=40)
           if c.key == "c_null_off_zero"][0]
    assert two(-0.32) in off.text("en") and two(-0.07) in off.text("en")
    assert "c_null_off_zero" not in [c.key for c in conclusions(sharpness=sharp((-0.2, 0.2)),
                                                                texts=40)]


def _sweep(units, metric="retrieval_accuracy"):
    return pd.DataFrame({"layer": 5, "tau": [0.5, 1.0, 2.0], "metric": [0.70, 0.66, 0.60],
                         "diff": [0.04, 0.0, -0.06], "diff_low": [0.02, 0.0, -0.08],
                         "diff_high": [0.06, 0.0, -0.04], "ci_low": 0.6, "ci_high": 0.7,
                         "max_weight": 0.5, "units": units, "metric_name": metric})


def _pruning(units, metric="retrieval_accuracy"):
    return pd.DataFrame({"removed": [0, 36, 72], "metric": [0.66, 0.64, 0.50],
                         "ci_low": [0.61, 0.60, 0.45], "ci_high": [0.71, 0.69, 0.55],
                         "random_mean": [0.66, 0.60, 0.50], "random_low": 0.4,
                         "random_high": 0.7, "orders": 20, "units": units,
                         "metric_name": metric})


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_min_texts_holds_for_pruning_and_sweeps_on_the_fixed_pairs(lang):
    """320 sentence pairs behind the metric, but a corpus of 2 texts: no claim either way."""
    small = conclusions(pruning=_pruning(320), sweep=_sweep(320), texts=2)
    assert [c.key for c in small] == ["c_pruning_few", "c_sweep_few_texts"]
    for c in small:
        assert CANNOT[lang] in c.text(lang) and str(MIN_TEXTS) in c.text(lang)
    enough = conclusions(pruning=_pruning(320), sweep=_sweep(320), texts=MIN_TEXTS)
    assert [c.key for c in enough] == ["c_pruning", "c_sweep_sharper"]


def test_pruning_and_sweep_name_what_they_were_measured_on():
    pairs = conclusions(pruning=_pruning(320), sweep=_sweep(320), texts=20)
    for c in pairs:
        assert "320 English sentence pairs" in c.text("en")
        assert "whatever corpus" in c.text("en")
        assert "320 个英文句对" in c.text("zh")
    assert "first 20 texts" in pairs[0].text("en")            # the heads' order: the corpus
    texts = conclusions(pruning=_pruning(30, "negative_loss"),
                        sweep=_sweep(30, "negative_loss"), texts=30)
    for c in texts:
        assert "this corpus's 30 texts" in c.text("en") and "whatever" not in c.text("en")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_few_texts_make_the_answer_say_it_cannot_tell(lang):
    agreement = _wide_agreement(3, texts=5)
    sharp = pd.DataFrame([{"layer": np.nan, "importance": "ablation", "sharpness": "max_weight",
                           "spearman": -0.6, "ci_low": -0.7, "ci_high": -0.5, "null_low": -0.1,
                           "null_high": 0.1, "heads": 72}])
    said = answer(agreement, sharp, 5)
    assert [c.key for c in said] == ["answer_attention_few", "answer_sharp_few"]
    assert all(CANNOT[lang] in c.text(lang) for c in said)
    said = answer(_wide_agreement(3), sharp, 40)
    assert [c.key for c in said] == ["answer_attention_above", "answer_sharp_neg"]
