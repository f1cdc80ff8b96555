"""The importance page's per-text rows are products of the corpus job (`--what importance`,
attention.importance.product): a table computed in shards of one text equals the table
computed whole, for every table (token importance, faithfulness, head importance: every
shard ablating with the corpus's mean head outputs from the prepass, not its own) and for
every frame of the record assembled from them (attention.importance.record); the record
equals the plain functions called on the whole corpus at once, holds the per-text rows (their
mean recomputes its means), and is what the page's live compute gives. A killed ship resumes
computing only the shards it had not finished; the Ray engine gives what the local one does."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attention import diskcache, models as M
from attention.corpus.compute import Settings
from attention.corpus.job import do_job
from attention.corpus.store import read_table
from attention.importance import erasure, live, product, record, store
from attention.importance.heads import head_importance
from attention.importance.tokens import token_importance
from tests.tiny_models import tiny  # noqa: F401

pytestmark = pytest.mark.slow      # the pipeline a few times on tiny models (about a minute)

TEXTS = ["the cat sat on the mat .", "a dog barked at the moon tonight", "it rained all day",
         "we walked home along the river", "she reads every night", "the old bridge is closed"]


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(store, "ORDERS", 4)
    monkeypatch.setattr(store, "N_BOOT", 200)
    monkeypatch.setattr(store, "HEAD_TEXTS", 4)        # the heads of the first 4 texts only


def corpus_file(tmp_path) -> str:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return str(path)


def job(source, corpus, out, batch_size, engine="local") -> dict[str, pd.DataFrame]:
    do_job(source, corpus, out, engine=engine, workers=2,
           settings=Settings(what=("importance",), batch_size=batch_size))
    return {name: read_table(out, name) for name in product.TABLES}


def same(a: pd.DataFrame, b: pd.DataFrame, name: str, tol: float = 1e-6) -> None:
    a, b = a.reset_index(drop=True), b.reset_index(drop=True)
    assert list(a.columns) == list(b.columns), name
    pd.testing.assert_frame_equal(a, b, check_exact=False, check_dtype=False,
                                  check_categorical=False, atol=tol, rtol=tol, obj=name)


@pytest.mark.parametrize("name", ["gpt2", "bert_base"])
def test_every_table_in_shards_equals_the_whole_and_the_plain_functions(tiny, tmp_path, small,
                                                                        name):
    source = str(tiny[name])
    corpus = corpus_file(tmp_path)
    ones = job(source, corpus, tmp_path / "ones", 1)
    whole = job(source, corpus, tmp_path / "whole", 100)
    for table in product.TABLES:
        assert len(ones[table]), table
        same(ones[table], whole[table], table)
    assert set(ones["heads"]["text_id"]) == {0, 1, 2, 3}
    model = M.load_model(source, trusted=True)
    got, _ = record.build(model, source, TEXTS, ones)
    want, _ = record.build(model, source, TEXTS, whole)
    assert set(got.frames) == {
        "tokens", "agreement_words", "agreement_all", "faithfulness", "heads", "sharpness",
        "pruning", "sweep", "faithfulness_texts", "heads_texts"}
    for frame in got.frames:
        same(got.frames[frame], want.frames[frame], frame)
    assert got.values == want.values

    # the plain functions on the whole corpus at once
    tokens = token_importance(model, TEXTS)
    same(got.frames["tokens"][list(tokens.columns)], tokens, "tokens against one call")
    heads = head_importance(model, TEXTS[:4])
    same(got.frames["heads"][list(heads.columns)], heads, "heads against one call")
    faith = erasure.faithfulness(model, TEXTS, store.FRACTIONS, table=tokens,
                                 n_boot=store.N_BOOT, seed=store.SEED)
    same(got.frames["faithfulness"], faith, "faithfulness against one call")
    assert np.abs(got.frames["heads"]["mean_ablation"]).max() > 0

    # the per-text rows recompute the record's means
    rows = got.frames["faithfulness_texts"]
    assert rows["text_id"].dtype == np.int32 and isinstance(rows["method"].dtype,
                                                            pd.CategoricalDtype)
    mean = rows[rows["method"] == "occlusion"].groupby("fraction")["change"].mean()
    faith = got.frames["faithfulness"]
    assert np.allclose(mean.to_numpy(), faith[faith["method"] == "occlusion"]["change"])
    per_head = got.frames["heads_texts"].groupby(["layer", "head"])["ablation"].mean()
    assert np.allclose(per_head.to_numpy(), got.frames["heads"]["ablation"])

    # and the page's live compute gives the same record
    computed = live.compute(source, TEXTS)
    for frame in got.frames:
        same(computed.frames[frame], got.frames[frame], f"live {frame}")


def test_a_killed_ship_resumes_computing_only_the_missing_shards(tiny, monkeypatch, tmp_path,
                                                                 small):
    """ship_importance keeps each finished shard in its job folder: a run killed midway, run
    again, computes only the texts it had not finished, and ships the record one run gives."""
    from attention.corpus import ship

    source = str(tiny["gpt2"])
    corpus = corpus_file(tmp_path)
    monkeypatch.setattr(store, "SHIPPED", tmp_path / "shipped")
    monkeypatch.setattr(ship, "IMPORTANCE_SHARD", 2)
    computed, original = [], product.text_tables

    def killed_at_text_4(model, ids, *args, **kw):
        if 4 in ids:
            raise KeyboardInterrupt                               # the kill, midway
        computed.extend(ids)
        return original(model, ids, *args, **kw)
    monkeypatch.setattr(product, "text_tables", killed_at_text_4)
    with pytest.raises(KeyboardInterrupt):
        ship.ship_importance(corpus, tmp_path / "work", source=source, progress=False)
    first = list(computed)
    assert first == [0, 1, 2, 3]
    assert not list(store.SHIPPED.glob("*.zip")) if store.SHIPPED.exists() else True
    computed.clear()
    monkeypatch.setattr(product, "text_tables", lambda model, ids, *a, **kw: (
        computed.extend(ids), original(model, ids, *a, **kw))[1])
    path = ship.ship_importance(corpus, tmp_path / "work", source=source, progress=False)
    assert computed == [4, 5]
    shipped = diskcache.read(path, diskcache.stored_key(path))
    assert diskcache.read(path, store.key(source, TEXTS)) is not None
    model = M.load_model(source, trusted=True)
    whole = live.compute(source, TEXTS)
    for frame in whole.frames:
        same(shipped.frames[frame], whole.frames[frame], frame)
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert model.head != "none" and [p.name for p in store.SHIPPED.glob("*.zip")] == [path.name]


def test_importance_on_ray_equals_local(tiny, tmp_path, small):
    pytest.importorskip("ray")
    source = str(tiny["bert_base"])
    corpus = corpus_file(tmp_path)
    local = job(source, corpus, tmp_path / "local", 2)
    on_ray = job(source, corpus, tmp_path / "ray", 2, engine="ray")
    for table in product.TABLES:
        assert len(local[table]), table
        same(on_ray[table], local[table], table)


def test_ship_importance_refusals_are_one_sentence_and_exit_2(capsys):
    from attention.corpus.__main__ import main

    assert main(["ship", "--importance", "--corpus", "my.txt"]) == 2     # not a shipped corpus
    assert "bundled:en" in capsys.readouterr().err
    assert main(["ship", "--importance", "--model", "m"]) == 2           # the bundled model only
    assert main(["ship", "--work", "w"]) == 2                            # neither --model nor --importance
    assert "--model" in capsys.readouterr().err
