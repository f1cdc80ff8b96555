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

from attention import diskcache, models as M
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


def test_a_killed_ship_resumes_from_its_finished_parts(tiny, monkeypatch, tmp_path):
    """ship keeps each finished part in its work folder: a run killed midway, run again,
    computes only the parts it had not finished, and ships the record one whole run gives."""
    source = str(tiny["gpt2"])
    whole = run(monkeypatch, source, (2, 2, 2, 2))
    monkeypatch.setattr(store, "SHIPPED", tmp_path / "shipped")
    monkeypatch.setattr(store, "shipped_texts", lambda corpus=None: list(TEXTS))
    computed, original = [], shipped.compute_part

    def killed_at_faithfulness(part, *args):
        if part[1] == "faithfulness" and part[2] == 1:
            raise KeyboardInterrupt                               # the kill, midway
        computed.append(part[1:3])
        return original(part, *args)
    monkeypatch.setattr(shipped, "compute_part", killed_at_faithfulness)
    with pytest.raises(KeyboardInterrupt):
        shipped.ship("bundled:en", workers=1, work=tmp_path / "work", source=source)
    first = list(computed)
    kept = sorted(p.name for p in (tmp_path / "work").glob("*/*"))
    assert kept and all(p.endswith(".pickle") for p in kept)             # no half file
    assert ("faithfulness", 1) not in first and ("tokens", 0) in first
    computed.clear()
    monkeypatch.setattr(shipped, "compute_part", lambda part, *a: (computed.append(part[1:3]),
                                                                   original(part, *a))[1])
    path = shipped.ship("bundled:en", workers=1, work=tmp_path / "work", source=source)
    assert ("faithfulness", 1) in computed and not set(computed) & set(first)
    assert len(computed) + len(first) == len(shipped.plan(source, TEXTS))
    shipped_record = diskcache.read(path, diskcache.stored_key(path))
    for table in whole.frames:
        same(shipped_record.frames[table], whole.frames[table], table)
