"""What a newcomer meets on "Does the model use it?", a user's steps on a tiny model with the
bundled MiniLM's tokenizer (tests/tiny_models.py): the share of [UNK] pieces is stated and,
when high, leads the conclusions, equal to a count made with the tokenizer itself; the
"Words only" toggle changes the counts and the correlations as a recomputation by hand does;
the time is estimated before the computation and reported beside the estimate after it;
the parts that do not depend on the corpus are not computed again for another corpus."""
from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.stats import spearmanr

from attention import config, models as M
from attention.conclusions import unknown
from attention.importance import store
from attention.i18n import translate
from attention.importance import curves, live
from attention.importance.tokens import token_importance
from attention.spec import AttentionSpec
from attention.ui import estimate
from tests.apptest import open_page
from tests.tiny_models import tiny  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow     # the importance page computing a corpus

PAGE = "pages/5_Does_the_model_use_it.py"
ZH = ["我 昨天 在 图书馆 借 了 三 本 书 。", "今天 的 天气 很 好", "the cat 坐 在 垫子 上"]
EN = ["the cat sat on the mat .", "a dog barked at the moon all night", "she said it was late"]


@pytest.fixture
def small(monkeypatch, tiny):
    monkeypatch.setattr(store, "N_BOOT", 50)
    monkeypatch.setattr(store, "ORDERS", 2)
    monkeypatch.setenv(config.ENV_LOCAL, "1")           # a local folder, as `make run` permits
    from attention.ui.views import importance as view

    monkeypatch.setattr(view, "model_source", lambda spec: str(tiny["bert_base"]))
    estimate.RATES.clear()
    return str(tiny["bert_base"])


def _open(texts, **view):
    spec = AttentionSpec(tokens=("x",), source="pretrained", text="\n".join(texts))
    return open_page(PAGE, spec, timeout=600, imp_corpus="sidebar", **view)


def _shown(at) -> list[str]:
    return [m.value for m in at.markdown]


def test_the_unknown_share_leads_the_conclusions_and_is_the_tokenizers(small):
    at = _open(ZH)
    assert not at.exception and not at.error, [e.value for e in at.error]
    tokenizer = M.load_model(small, trusted=True).tokenizer
    added = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    ids = [i for text in ZH for i in tokenizer(text)["input_ids"] if i not in added]
    unk = sum(i == tokenizer.unk_token_id for i in ids)
    assert unk / len(ids) > unknown.THRESHOLD                       # the case the rule is for
    want = translate("en", "unknown.high_importance", model="bert_base", unknown=f"{unk:,}",
                     words=f"{len(ids):,}", share=f"{100 * unk / len(ids):.0f}%",
                     read=f"{len(ids) - unk:,}", reader=unknown.READER, threshold="10%")
    shown = _shown(at)
    title = shown.index(next(m for m in shown if m.startswith("- ")))
    assert shown[title] == f"- {want}"                    # the first sentence of the conclusions
    short = translate("en", "unknown.short_importance", model="bert_base",
                      share=f"{100 * unk / len(ids):.0f}%", read=f"{len(ids) - unk:,}",
                      reader=unknown.READER)
    assert short in shown[:title]             # and the answer's first sentence, above the charts
    assert want not in shown and shown.count(f"- {want}") == 1    # the detail stays below


def test_a_readable_corpus_states_its_share_and_does_not_lead_with_it(small):
    at = _open(EN)
    assert not at.exception and not at.error
    shown = _shown(at)
    low = [m for m in shown if m.startswith(translate("en", "unknown.low", model="bert_base",
                                                      unknown="0", words="X", share="0%")[:20])]
    assert low and "0 of the" in low[0] and "(0%)" in low[0]
    first = next(m for m in shown if m.startswith("- "))
    assert "[UNK]" not in first


def test_words_only_changes_the_counts_and_the_correlations_as_a_recomputation(small):
    at = _open(EN, imp_tables="True")
    assert not at.exception and not at.error
    tokens = token_importance(M.load_model(small, trusted=True), EN)   # an independent run
    special = int(tokens["special"].sum())
    assert special == 2 * len(EN)                                      # [CLS] and [SEP]

    def count(page) -> int:
        line = next(m for m in _shown(page) if m.startswith(f"**{len(EN)}** texts"))
        return int(re.findall(r"\*\*([\d,]+)\*\*", line)[1].replace(",", ""))

    def rho(page, method: str) -> float:
        table = page.dataframe[0].value
        label = translate("en", "importance.label_layer",
                          method=translate("en", "importance.method_attention"), layer=1)
        row = table[table.iloc[:, 0] == label] if method == "attention_1" else None
        return float(row.iloc[0, 1])

    def by_hand(words_only: bool) -> float:
        rows = tokens[~tokens["special"]] if words_only else tokens
        return float(np.mean([spearmanr(g["attention_1"], g["occlusion"])[0]
                              for _, g in rows.groupby("text")]))

    assert count(at) == len(tokens) - special
    assert rho(at, "attention_1") == pytest.approx(by_hand(True), abs=1e-4)
    pieces = at.dataframe[0].value.iloc[:, -1]
    assert (pieces == len(tokens) - special).any()        # the table counts what the header says
    at.toggle(key="view_imp_words").set_value(False).run(timeout=600)
    assert not at.exception and not at.error
    assert count(at) == len(tokens)                       # the special pieces enter the counts
    assert rho(at, "attention_1") == pytest.approx(by_hand(False), abs=1e-4)
    assert by_hand(False) != pytest.approx(by_hand(True), abs=1e-3)     # and the correlations
    assert (at.dataframe[0].value.iloc[:, -1] == len(tokens)).any()


def test_the_time_is_estimated_before_and_reported_after(small, monkeypatch):
    said = []
    real_before, real_after = estimate.before, estimate.after
    monkeypatch.setattr(estimate, "before", lambda where, s, probed: said.append(
        ("before", s, probed)) or real_before(where, s, probed))
    monkeypatch.setattr(estimate, "after", lambda where, what, s, e: said.append(
        ("after", s, e)) or real_after(where, what, s, e))
    texts = EN + ["a corpus of its own, computed here"]        # not stored by another test
    at = _open(texts)
    assert not at.exception and not at.error
    assert [k for k, *_ in said] == ["before", "after"]            # before it starts, then after
    (_, guess, probed), (_, took, again) = said
    assert probed and guess > 0 and took > 0 and again == guess
    caption = translate("en", "estimate.after", time=estimate.duration(took),
                        estimate=estimate.duration(guess))
    assert caption in [c.value for c in at.caption]                # the actual beside it
    for stage in ("tokens", "heads", "faithfulness", "order"):     # rates kept per process
        assert estimate.RATES.rate(("importance", small, stage)) is not None
    said.clear()
    at = _open(texts[1:])                                          # another corpus, same model
    assert said[0][0] == "before" and said[0][2] is False          # from the measured rates


def test_the_corpus_free_parts_are_computed_once_per_model(small, monkeypatch, tmp_path):
    calls = {"random": 0, "sweep": 0}
    real_random, real_sweep = curves.random_curves, curves.paired_sweep

    def random_curves(*a, **k):
        calls["random"] += 1
        return real_random(*a, **k)

    def paired_sweep(*a, **k):
        calls["sweep"] += 1
        return real_sweep(*a, **k)
    monkeypatch.setattr(curves, "random_curves", random_curves)
    monkeypatch.setattr(curves, "paired_sweep", paired_sweep)
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path))  # nothing stored before
    first = live.compute(small, EN)
    once = dict(calls)
    assert once["random"] > 0 and once["sweep"] > 0
    second = live.compute(small, EN[:2] + ["birds sing in the morning"])
    assert calls == once                                   # nothing corpus-free recomputed
    model = M.load_model(small, trusted=True)
    want = real_random(model, ["unrelated"], range(store.ORDERS), orders=store.ORDERS,
                       seed=store.SEED, steps=store.PRUNING_STEPS)     # the pairs, not the texts
    np.testing.assert_allclose(second.frames["pruning"]["random_mean"], want.mean(axis=0),
                               atol=1e-9)
    np.testing.assert_allclose(second.frames["sweep"]["diff"], first.frames["sweep"]["diff"])
    assert live.work(small, EN)["pruning"] == 0.0       # and the estimate knows it
