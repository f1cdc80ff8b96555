"""The conclusions of the "Does the model use it?" page: every sentence carries its interval
and its number of texts, says the data cannot tell when the interval meets the null band (or
includes 0 for a difference) or the corpus has fewer than 20 texts, and makes no causal claim
about heads beyond ablation. Expected strings are formatted here from the frames."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attention.conclusions.importance import MIN_TEXTS, conclusions, fmt

ROOT = Path(__file__).resolve().parent.parent
CANNOT = {"en": "cannot tell", "zh": "无法"}


def _row(method, layer=np.nan, rho=0.4, low=0.3, high=0.5, null=(-0.05, 0.05), texts=100,
         mean=False, baseline=False):
    return {"method": method, "layer": layer, "spearman": rho, "ci_low": low, "ci_high": high,
            "null_low": null[0], "null_high": null[1], "texts": texts, "skipped": 0,
            "pieces": 10 * texts, "baseline": baseline, "layer_mean": mean}


def _agreement(texts=100, rollout=(0.45, 0.40, 0.50), attention=(0.20, 0.15, 0.25),
               gradient=(0.02, -0.04, 0.07)):
    rows = []
    for family, (rho, low, high) in (("attention", attention), ("rollout", rollout),
                                     ("flow", (-0.3, -0.35, -0.25)), ("norm", (0.1, 0.05, 0.15))):
        for layer in range(2):
            rows.append(_row(family, float(layer), rho, low, high, texts=texts))
        rows.append(_row(family, np.nan, rho, low, high, texts=texts, mean=True))
    rows.append(_row("gradient", np.nan, *gradient, texts=texts))
    rows.append(_row("integrated_gradients", np.nan, 0.6, 0.55, 0.65, texts=texts))
    for name, rho in (("random", 0.0), ("position_start", 0.12), ("position_end", -0.12),
                      ("inverse_frequency", 0.05)):
        rows.append(_row(name, np.nan, rho, rho - 0.04, rho + 0.04, texts=texts, baseline=True))
    return pd.DataFrame(rows)


def _by_key(items, lang="en"):
    out = {}
    for c in items:
        out.setdefault(c.key, []).append(c.text(lang))
    return out


def test_each_agreement_sentence_states_its_interval_and_texts():
    agreement = _agreement()
    got = conclusions(agreement=agreement)
    texts = [c.text("en") for c in got]
    roll = agreement[(agreement["method"] == "rollout") & agreement["layer_mean"]].iloc[0]
    sentence = next(s for s in texts if s.startswith("rollout, mean over layers"))
    for value in (roll["spearman"], roll["ci_low"], roll["ci_high"], roll["null_low"],
                  roll["null_high"]):
        assert fmt(value) in sentence
    assert "100 texts" in sentence and "ranks pieces like occlusion" in sentence
    flow = next(s for s in texts if s.startswith("attention flow, mean over layers"))
    assert "ranks pieces against occlusion" in flow
    # gradient's interval (-0.04 to 0.07) meets the null band (-0.05 to 0.05): cannot tell
    grad = next(s for s in texts if "gradient × input" in s and "occlusion" in s)
    assert grad.startswith("The data cannot tell") and fmt(-0.04) in grad and fmt(0.07) in grad
    assert "100 texts" in grad
    for s in texts:
        assert "texts" in s, s


def test_rollout_against_raw_attention_only_when_the_intervals_part():
    keys = _by_key(conclusions(agreement=_agreement()))
    assert "c_compare_above" in keys
    assert fmt(0.40) in keys["c_compare_above"][0] and fmt(0.25) in keys["c_compare_above"][0]
    close = _by_key(conclusions(agreement=_agreement(attention=(0.38, 0.30, 0.44))))
    assert "c_compare_overlap" in close and "c_compare_above" not in close
    assert close["c_compare_overlap"][0].startswith("The data cannot tell")


def test_the_abnar_and_zuidema_sentence_is_gone():
    for lang in ("en", "zh"):
        text = (ROOT / f"attention/locales/{lang}/importance.toml").read_text(encoding="utf-8")
        assert "unlike Abnar" not in text and "c_raw_better" not in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_fewer_than_20_texts_cannot_tell_and_says_why(lang):
    small = _agreement(texts=MIN_TEXTS - 1)
    got = conclusions(agreement=small)
    assert got and all(c.key == "c_agree_few" for c in got)
    for c in got:
        text = c.text(lang)
        assert CANNOT[lang] in text and "19" in text and "20" in text
        assert fmt(0.45) in text or fmt(0.20) in text or fmt(0.02) in text or \
            fmt(-0.3) in text or fmt(0.1) in text or fmt(0.6) in text
    enough = conclusions(agreement=_agreement(texts=MIN_TEXTS))
    assert not any(c.key == "c_agree_few" for c in enough)


def _faith(texts=100, top=(0.30, 0.25, 0.35), rand=(0.10, 0.08, 0.12)):
    rows = []
    for method, layer, (aopc, low, high) in (("occlusion", np.nan, top),
                                             ("gradient", np.nan, (0.11, 0.09, 0.14)),
                                             ("attention", 1.0, (0.05, 0.03, 0.07)),
                                             ("random", np.nan, rand)):
        for fraction in (0.1, 0.5):
            rows.append({"method": method, "layer": layer, "fraction": fraction,
                         "change": aopc * fraction * 2, "ci_low": 0.0, "ci_high": 1.0,
                         "aopc": aopc, "aopc_low": low, "aopc_high": high, "texts": texts,
                         "baseline": method == "random"})
    return pd.DataFrame(rows)


def test_faithfulness_is_judged_against_the_random_order():
    keys = _by_key(conclusions(faithfulness=_faith()))
    above = keys["c_faith_above"][0]
    assert above.startswith("Removing the pieces occlusion") and "100 texts" in above
    for v in (0.30, 0.25, 0.35, 0.10, 0.08, 0.12):
        assert fmt(v) in above
    assert keys["c_faith_null"][0].startswith("The data cannot tell whether gradient")
    assert "c_faith_below" in keys                                   # attention, layer 1
    few = _by_key(conclusions(faithfulness=_faith(texts=5)))
    assert set(few) == {"c_faith_few"} and "5 texts are fewer than 20" in few["c_faith_few"][0]


def _sharp(pooled=(-0.44, -0.6, -0.25), layer5=(0.09, -0.5, 0.6)):
    rows = []
    for layer, (rho, low, high) in ((0.0, (-0.6, -0.85, -0.3)), (5.0, layer5), (np.nan, pooled)):
        rows.append({"layer": layer, "importance": "ablation", "sharpness": "max_weight",
                     "spearman": rho, "ci_low": low, "ci_high": high, "null_low": -0.2,
                     "null_high": 0.2, "heads": 72 if np.isnan(layer) else 12})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_sharpness_is_a_correlation_per_layer_and_pooled_never_a_cause(lang):
    got = _by_key(conclusions(sharpness=_sharp(), texts=100), lang)
    pooled = got["c_sharp_neg"][0]
    for v in (-0.44, -0.6, -0.25, -0.2, 0.2):
        assert fmt(v) in pooled
    assert "72" in pooled and "100" in pooled
    if lang == "en":
        assert "not an effect of sharpness" in pooled
        assert "not the ones the model needs" not in pooled
    layers = got["c_sharp_layers"][0]
    assert "1" in layers and fmt(-0.6) in layers and fmt(0.09) in layers   # 1 of 2 layers clear
    unclear = _by_key(conclusions(sharpness=_sharp(pooled=(-0.1, -0.3, 0.1)), texts=100), lang)
    assert CANNOT[lang] in unclear["c_sharp_null"][0]
    few = _by_key(conclusions(sharpness=_sharp(), texts=5), lang)
    assert CANNOT[lang] in few["c_sharp_few"][0] and "5" in few["c_sharp_few"][0]
    # no layer clear of its band: said in words, with no empty list after a colon
    none = _by_key(conclusions(sharpness=_sharp(layer5=(0.09, -0.5, 0.6)).assign(
        null_low=-0.9, null_high=0.9), texts=100), lang)
    assert "c_sharp_layers" not in none
    text = none["c_sharp_layers_none"][0]
    assert "2" in text and fmt(-0.6) in text and "–." not in text and "：–" not in text


def test_pruning_states_the_full_models_interval_and_the_random_orders():
    pruning = pd.DataFrame({"removed": [0, 12, 24, 36, 48, 72],
                            "metric": [0.71, 0.70, 0.66, 0.52, 0.40, 0.30],
                            "ci_low": [0.53, 0.52, 0.5, 0.4, 0.3, 0.2],
                            "ci_high": [0.87, 0.86, 0.8, 0.7, 0.6, 0.5],
                            "random_mean": [0.71, 0.6, 0.5, 0.45, 0.4, 0.3],
                            "random_low": 0.2, "random_high": 0.8, "orders": 20,
                            "metric_name": "retrieval_accuracy"})
    (c,) = conclusions(pruning=pruning)
    text = c.text("en")
    assert "24 of 72" in text and "random orders (mean of 20) 12" in text
    assert fmt(0.71) in text and fmt(0.53) in text and fmt(0.87) in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_sweep_differences_are_paired_intervals(lang):
    def sweep(low):
        return pd.DataFrame({"layer": 5, "tau": [0.25, 0.5, 1.0, 2.0],
                             "metric": [0.77, 0.74, 0.71, 0.69],
                             "diff": [0.06, 0.03, 0.0, -0.02], "diff_low": [low, -0.01, 0, -0.05],
                             "diff_high": [0.123, 0.07, 0, 0.01], "ci_low": 0.5, "ci_high": 0.9,
                             "max_weight": 0.5, "metric_name": "retrieval_accuracy"})
    unclear = _by_key(conclusions(sweep=sweep(-0.005)), lang)
    text = unclear["c_sweep_null"][0]
    assert CANNOT[lang] in text or "无法区分" in text
    assert fmt(0.06) in text and fmt(-0.005) in text and fmt(0.123) in text
    clear = _by_key(conclusions(sweep=sweep(0.01)), lang)
    assert "c_sweep_sharper" in clear and fmt(0.01) in clear["c_sweep_sharper"][0]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_pruning_cannot_tell_when_every_head_stays_inside_the_interval(lang):
    pruning = pd.DataFrame({"removed": [0, 36, 72], "metric": [0.71, 0.64, 0.54],
                            "ci_low": [0.52, 0.44, 0.36], "ci_high": [0.87, 0.81, 0.73],
                            "random_mean": [0.71, 0.65, 0.54], "random_low": 0.5,
                            "random_high": 0.8, "orders": 20, "metric_name": "retrieval_accuracy"})
    (c,) = conclusions(pruning=pruning)
    assert c.key == "c_pruning_null"
    text = c.text(lang)
    assert CANNOT[lang] in text and fmt(0.54) in text and fmt(0.52) in text and "72" in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_pruning_and_sweep_follow_min_texts(lang):
    """A 2-text corpus does not get "sharper heads do better" nor a count of heads: the
    metric's units (texts of an LM, pairs of a sentence model) and the texts behind the
    importance order each need MIN_TEXTS."""
    pruning = pd.DataFrame({"removed": [0, 36, 72], "metric": [-3.0, -4.0, -9.0],
                            "ci_low": [-3.1, -4.1, -9.1], "ci_high": [-2.9, -3.9, -8.9],
                            "random_mean": [-3.0, -5.0, -9.0], "random_low": -10,
                            "random_high": -2, "orders": 20, "units": 2,
                            "metric_name": "negative_loss"})
    (c,) = conclusions(pruning=pruning, texts=2)
    assert c.key == "c_pruning_few" and CANNOT[lang] in c.text(lang)
    assert "2" in c.text(lang) and str(MIN_TEXTS) in c.text(lang)
    pairs = pruning.assign(units=320, metric_name="retrieval_accuracy")
    (c,) = conclusions(pruning=pairs, texts=2)                  # 320 pairs, but 2 texts
    assert c.key == "c_pruning_few"
    (c,) = conclusions(pruning=pairs, texts=MIN_TEXTS)
    assert c.key == "c_pruning"
    sweep = pd.DataFrame({"layer": 0, "tau": [0.5, 1.0, 2.0], "metric": [-2.0, -3.0, -3.5],
                          "diff": [1.0, 0.0, -0.5], "diff_low": [0.9, 0.0, -0.6],
                          "diff_high": [1.1, 0.0, -0.4], "ci_low": -4, "ci_high": -1,
                          "max_weight": 0.5, "units": 2, "metric_name": "negative_loss"})
    (c,) = conclusions(sweep=sweep)
    assert c.key == "c_sweep_few" and CANNOT[lang] in c.text(lang)
    assert ("2 texts" in c.text(lang)) if lang == "en" else ("2 段文本" in c.text(lang))
    (c,) = conclusions(sweep=sweep.assign(units=MIN_TEXTS))
    assert c.key == "c_sweep_sharper"
