"""Paraphrase pairs and retrieval: the bundled set's size, hard negatives and licence, every
refusal of a bad file as a sentence, and accuracy, MRR and their bootstrap intervals against
hand computations (and, in the slow tier, the bundled MiniLM's measured accuracy)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from attention.text.corpora import PAIRS, pair_groups, pairs, pairs_from_upload
from attention.errors import UserError
from attention.measures.retrieval import quality, retrieval_units


def words(sentence: str) -> set[str]:
    return set(re.findall(r"[a-z']+", sentence.lower()))


# ---------------------------------------------------------------------------- the bundled set


def test_bundled_pairs_count_licence_and_no_repeats():
    got = pairs("bundled:en")
    assert len(got) >= 300
    sentences = [s for pair in got for s in pair]
    assert len(set(sentences)) == len(sentences)              # a repeat would tie exactly
    assert all(a != b and a.isascii() and b.isascii() for a, b in got)
    head = PAIRS.read_text(encoding="utf-8").splitlines()[:3]
    assert any("licence" in line.lower() and "written for the project" in line.lower()
               for line in head)
    assert sum(a.endswith("?") for a, _ in got) >= 5           # questions, not only statements
    assert pairs(" Bundled:EN ") == got


def test_pairs_is_importable_from_the_corpus_face_like_load():
    import attention.corpus as corpus

    assert "pairs" in corpus.__all__ and "load" in corpus.__all__
    assert corpus.pairs("bundled:en") == pairs("bundled:en")
    with pytest.raises(UserError):
        corpus.pairs("bundled:zh")                             # the reason, not a number


def test_at_least_a_third_of_the_pairs_have_hard_negatives_in_the_set():
    got, groups = pairs("bundled:en"), pair_groups()
    assert len(groups) == len(got)
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        if g != "-":
            members.setdefault(g, []).append(i)
    hard = [i for ids in members.values() if len(ids) >= 2 for i in ids]
    assert all(len(ids) >= 2 for ids in members.values())     # a group of one negates nothing
    assert len(hard) >= len(got) / 3, (len(hard), len(got))
    for ids in members.values():                              # most words shared, meaning not
        for i in ids:
            for j in ids:
                if i < j:
                    a, b = words(got[i][0]), words(got[j][0])
                    assert len(a & b) >= 0.5 * min(len(a), len(b)), (got[i][0], got[j][0])
                    assert got[i][0] != got[j][0]


# ---------------------------------------------------------------------------- files


def refusal(call) -> UserError:
    with pytest.raises(UserError) as info:
        call()
    return info.value


def test_a_two_column_file_with_or_without_a_header(tmp_path):
    tsv = tmp_path / "p.tsv"
    tsv.write_text('# a note\nfirst\tsecond\nA "quoted" one.\tIts paraphrase.\n\nTwo.\tDeux.\n',
                   encoding="utf-8")
    assert pairs(str(tsv)) == [('A "quoted" one.', "Its paraphrase."), ("Two.", "Deux.")]
    csv_file = tmp_path / "p.csv"
    csv_file.write_text('"One, with a comma.",Its twin.\nTwo.,Deux.\n', encoding="utf-8")
    assert pairs(str(csv_file)) == [("One, with a comma.", "Its twin."), ("Two.", "Deux.")]
    assert pairs_from_upload("mine.TSV", "a\tb\nc\td\n".encode()) == [("a", "b"), ("c", "d")]


@pytest.mark.parametrize("name,content,key,values", [
    ("p.tsv", "a\tb\tc\nd\te\tf\n", "corpus.pairs_cells", {"line": 1, "cells": 3, "width": 2}),
    ("p.csv", "a,b\nd,\n", "corpus.pairs_empty_cell", {"line": 2}),
    ("p.tsv", "a\tb\n", "corpus.pairs_too_few", {"count": 1}),
    ("p.csv", "first,second\n", "corpus.pairs_too_few", {"count": 0}),
    ("p.txt", "a\tb\nc\td\n", "corpus.pairs_format", {}),
    ("p.csv", '"open,b\nc,d\n', "corpus.csv_unreadable", {}),
])
def test_bad_pair_files_are_refused_with_a_sentence(tmp_path, monkeypatch, name, content, key,
                                                     values):
    (tmp_path / name).write_text(content, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    err = refusal(lambda: pairs(name))
    assert err.key == key and {k: err.values[k] for k in values} == values
    assert f"“{name}”" in str(err) and str(tmp_path) not in str(err)   # as given, not resolved
    assert err.message("zh") != str(err)


def test_bad_sources_chinese_and_encoding(tmp_path):
    assert refusal(lambda: pairs("bundled:zh")).key == "corpus.pairs_no_chinese"
    assert "[UNK]" in str(refusal(lambda: pairs("bundled:zh")))
    assert refusal(lambda: pairs("bundled:fr")).key == "corpus.pairs_unknown_bundled"
    assert refusal(lambda: pairs(str(tmp_path / "none.tsv"))).key == "corpus.not_found"
    bad = tmp_path / "latin.tsv"
    bad.write_bytes("a\tb\ncaf\xe9\tc\n".encode("latin-1"))
    err = refusal(lambda: pairs(str(bad)))
    assert err.key == "corpus.encoding" and err.values["line"] == 2
    assert refusal(lambda: pairs_from_upload("x.pdf", b"a\tb")).key == "corpus.pairs_format"


# ---------------------------------------------------------------------------- retrieval by hand


def unit(*rows):
    e = np.asarray(rows, dtype=float)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


def test_retrieval_accuracy_and_mrr_by_hand():
    # pair 0: rows 0, 1; pair 1: rows 2, 3; pair 2: rows 4, 5 (2-D directions, by angle)
    angles = np.radians([0, 10, 20, 50, 90, 100])
    e = unit(*[(np.cos(a), np.sin(a)) for a in angles])
    # row 0: partner at 10 deg is nearest (rank 1); row 1: 20 deg (row 2) is 10 deg away, the
    # partner too: a tie counts against, rank 2; row 2: row 1 (10) nearer than its partner
    # (30 deg away): rank 2 (row 0 at 20 deg also nearer: rank 3); row 3 (50): partner 30 away,
    # rows 1 (40), 4 (40), 0 (50) farther: rank 1; row 4 (90): partner 5 at 10: rank 1;
    # row 5 (100): partner nearest: rank 1.
    ranks = np.array([1, 2, 3, 1, 1, 1])
    hit, rr = retrieval_units(e)
    assert np.allclose(hit, [(1 + 0) / 2, (0 + 1) / 2, (1 + 1) / 2])
    assert np.allclose(rr, (1 / ranks).reshape(-1, 2).mean(axis=1))
    q = quality(e, n_boot=200, seed=3)
    assert q["accuracy"] == pytest.approx(4 / 6) and q["pairs"] == 3
    assert q["mrr"] == pytest.approx(np.mean(1 / ranks))
    idx = np.random.default_rng(3).integers(0, 3, size=(200, 3))   # the documented draw
    units = np.array([0.5, 0.5, 1.0])
    means = np.array([units[row].mean() for row in idx])
    assert (q["acc_low"], q["acc_high"]) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))
    rr_units = (1 / ranks).reshape(-1, 2).mean(axis=1)
    means = np.array([rr_units[row].mean() for row in idx])
    assert (q["mrr_low"], q["mrr_high"]) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))


def test_identical_embeddings_tie_and_count_against():
    e = unit((1, 0), (1, 0), (1, 0), (0, 1))      # rows 0, 1, 2 the same direction
    hit, rr = retrieval_units(e)
    # row 0: partner 1 ties with row 2 -> rank 2; row 1 the same; row 2: partner 3 at 90 deg,
    # rows 0 and 1 nearer -> rank 3; row 3: partner 2 ties with 0 and 1 -> rank 3
    assert np.allclose(hit, [0, 0]) and np.allclose(rr, [1 / 2, 1 / 3])
    with pytest.raises(ValueError):
        retrieval_units(e[:3])


# ---------------------------------------------------------------------------- MiniLM, measured


@pytest.mark.slow
def test_minilm_retrieval_is_neither_perfect_nor_chance_and_equals_plain_transformers():
    """The unmodified bundled model with its 95% interval inside [0.3, 0.85] (a set it
    retrieves perfectly could tell nothing), and Metric's units equal retrieval computed from
    plain transformers' mean-pooled embeddings."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from attention import models as M
    from attention.importance.heads import Metric

    path = M.bundled_path()
    tok = AutoTokenizer.from_pretrained(path)
    eager = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    sentences = [s for pair in pairs("bundled:en") for s in pair]
    rows = []
    with torch.no_grad():
        for s in sentences:
            enc = tok(s, return_tensors="pt")
            rows.append(eager(**enc).last_hidden_state[0].mean(dim=0).numpy())
    e = np.asarray(rows)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    q = quality(e)
    assert 0.3 <= q["acc_low"] and q["acc_high"] <= 0.85, q
    metric = Metric(M.load_model(M.BUNDLED), [])
    hit, sharp = metric.units()
    assert np.allclose(hit, retrieval_units(e)[0])
    assert metric.name == "retrieval_accuracy" and len(sharp) == 6
