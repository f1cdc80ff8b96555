"""A table computed in parts equals the table computed whole, for every table of the
importance page's pipeline (attention.importance.shipped): token importance and
faithfulness by parts of texts, head importance by parts of texts (every part ablating with
the corpus's mean head outputs, not its own), the pruning band by parts of random orders,
the sweep by parts of layers. The whole is one part each, and for the head and token tables
also the plain calls on every text at once."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attention import models as M
from attention.importance import store
from attention.importance import shipped
from attention.importance.heads import head_importance
from attention.importance.tokens import token_importance
from tests.tiny_models import tiny  # noqa: F401

pytestmark = pytest.mark.slow      # the whole pipeline twice on tiny models (about a minute)

TEXTS = ["the cat sat on the mat .", "a dog barked at the moon tonight", "it rained all day",
         "we walked home along the river", "she reads every night", "the old bridge is closed"]


def run(monkeypatch, source, sizes):
    for name, size in zip(("TOKEN_CHUNK", "HEAD_CHUNK", "ORDER_CHUNK", "LAYER_CHUNK"), sizes):
        monkeypatch.setattr(store, name, size)
    monkeypatch.setattr(store, "ORDERS", 4)
    monkeypatch.setattr(store, "N_BOOT", 200)
    return shipped.compute(source, TEXTS)


def same(a: pd.DataFrame, b: pd.DataFrame, name: str) -> None:
    a, b = a.reset_index(drop=True), b.reset_index(drop=True)
    assert list(a.columns) == list(b.columns), name
    pd.testing.assert_frame_equal(a, b, check_exact=False, check_dtype=False, atol=1e-6, rtol=1e-6,
                                  obj=name)


@pytest.mark.parametrize("name", ["gpt2", "bert_base"])
def test_every_table_in_parts_equals_the_whole(tiny, monkeypatch, name):
    source = str(tiny[name])
    parts = run(monkeypatch, source, (1, 2, 1, 1))       # 6 token parts, 3 head parts, ...
    whole = run(monkeypatch, source, (100, 100, 100, 100))
    assert set(parts.frames) == set(whole.frames) == {
        "tokens", "agreement_words", "agreement_all", "faithfulness", "heads", "sharpness",
        "pruning", "sweep"}
    for table in parts.frames:
        same(parts.frames[table], whole.frames[table], table)
    assert parts.values == whole.values
    model = M.load_model(source, trusted=True)
    heads = head_importance(model, TEXTS[:store.HEAD_TEXTS])
    cols = [c for c in heads.columns]
    same(parts.frames["heads"][cols], heads, "heads against one call")
    tokens = token_importance(model, TEXTS)
    same(parts.frames["tokens"][list(tokens.columns)], tokens, "tokens against one call")
    # the mean ablation is the corpus's: its column moves when each part used its own means
    assert np.abs(parts.frames["heads"]["mean_ablation"]).max() > 0
