"""Every number in a conclusion sentence is formatted from the frames it is given: expected
strings are computed here from the frames, and changing a frame changes the sentence."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attention import importance as I
from attention.conclusions.importance import conclusions, fmt


def _agreement(raw=(0.5, 0.4, 0.1), roll=(0.6, 0.6, 0.7), flow=(0.55, 0.5, 0.6)):
    rows = []
    for score, values in (("attention", raw), ("rollout", roll), ("flow", flow),
                          ("attention_mean", (0.0,) * 3), ("norm", (0.1,) * 3)):
        for layer, v in enumerate(values):
            for target, shift in (("occlusion", 0.0), ("gradient", -0.1)):
                rows.append({"layer": layer, "score": score, "target": target,
                             "spearman": v + shift, "texts": 2})
    return pd.DataFrame(rows)


def _heads(sign=1.0):
    rng = np.random.default_rng(0)
    sharp = rng.uniform(0.2, 1.0, 24)
    return pd.DataFrame({"layer": np.repeat(range(2), 12), "head": np.tile(range(12), 2),
                         "ablation": sign * sharp + rng.normal(0, 0.05, 24),
                         "gradient": rng.uniform(size=24), "entropy": 2 - sharp,
                         "max_weight": sharp})


def _sweep(metric=(0.60, 0.70, 0.75, 0.72, 0.65)):
    taus = (0.25, 0.5, 1.0, 2.0, 4.0)
    return pd.DataFrame({"layer": 3, "tau": taus, "metric": metric,
                         "max_weight": np.linspace(0.9, 0.2, 5), "metric_name": "ranking_accuracy"})


def _pruning(metric=(0.80, 0.79, 0.78, 0.70, 0.50)):
    return pd.DataFrame({"removed": [0, 18, 36, 54, 72], "metric": metric,
                         "metric_name": "ranking_accuracy"})


def _texts(**frames):
    return {c.key: c.text("en") for c in conclusions(**frames)}


def test_agreement_sentences_carry_the_frames_numbers():
    agreement = _agreement()
    got = _texts(agreement=agreement)
    occ = agreement[agreement["target"] == "occlusion"]
    means = occ.groupby("score")["spearman"].mean()
    grad = agreement[agreement["target"] == "gradient"].groupby("score")["spearman"].mean()
    for value in (means["attention"], means["rollout"], means["flow"], grad["attention"],
                  grad["rollout"], grad["flow"]):
        assert fmt(value) in got["c_agreement"]
    assert "c_rollout_better" in got and "c_raw_better" not in got
    assert fmt(max(means["rollout"], means["flow"])) in got["c_rollout_better"]
    raw = occ[occ["score"] == "attention"].sort_values("layer")["spearman"]
    assert fmt(raw.iloc[0]) in got["c_raw_drops"] and fmt(raw.iloc[-1]) in got["c_raw_drops"]
    # a different frame: raw attention wins and holds up
    changed = _texts(agreement=_agreement(raw=(0.7, 0.8, 0.9), roll=(0.1, 0.1, 0.1),
                                          flow=(0.2, 0.2, 0.2)))
    assert "c_raw_better" in changed and "c_raw_holds" in changed
    assert changed["c_agreement"] != got["c_agreement"]
    assert fmt(0.8) in changed["c_agreement"]          # mean of 0.7, 0.8, 0.9


def test_sharpness_sentence_follows_the_spearman():
    heads = _heads(+1.0)
    got = _texts(heads=heads)
    rho = I.spearman(heads["ablation"], heads["max_weight"])
    assert "c_sharp_matter" in got and fmt(rho) in got["c_sharp_matter"]
    assert fmt(I.spearman(heads["ablation"], heads["entropy"])) in got["c_sharp_matter"]
    flipped = _heads(-1.0)
    got = _texts(heads=flipped)
    assert "c_flat_matter" in got
    assert fmt(I.spearman(flipped["ablation"], flipped["max_weight"])) in got["c_flat_matter"]


@pytest.mark.parametrize("metric,key", [((0.60, 0.70, 0.75, 0.72, 0.65), "c_inverted_u"),
                                        ((0.80, 0.75, 0.70, 0.65, 0.60), "c_sharper_better"),
                                        ((0.60, 0.65, 0.70, 0.75, 0.80), "c_flatter_better"),
                                        ((0.70, 0.701, 0.70, 0.70, 0.70), "c_sweep_flat")])
def test_sweep_sentence_is_written_from_the_curve(metric, key):
    sweep = _sweep(metric)
    got = _texts(sweep=sweep)
    assert list(got) == [key]
    text = got[key]
    assert fmt(metric[0]) in text and fmt(metric[-1]) in text
    if key != "c_sweep_flat":
        best = int(np.argmax(metric))
        assert fmt(metric[best]) in text and fmt(sweep["tau"][best]) in text
        assert fmt(sweep["max_weight"][best]) in text


def test_pruning_sentence_counts_heads_from_the_curve():
    got = _texts(pruning=_pruning())["c_pruning"]
    # 95% of 0.80 is 0.76: 0.79 and 0.78 keep it, 0.70 does not -> 36 heads
    assert "36 of 72" in got and fmt(50.0) in got and fmt(0.80) in got and fmt(0.50) in got
    got = _texts(pruning=_pruning((0.80, 0.70, 0.78, 0.70, 0.50)))["c_pruning"]
    assert "0 of 72" in got         # the first drop counts, even if it recovers


def test_chinese_sentences_have_the_same_numbers():
    agreement = _agreement()
    for c in conclusions(agreement=agreement, heads=_heads(), sweep=_sweep(),
                         pruning=_pruning()):
        for _, value in c.params:
            assert value in c.text("zh") and value in c.text("en")
