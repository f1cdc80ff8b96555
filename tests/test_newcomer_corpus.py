"""What a newcomer meets on the Corpus page and on every page that runs something: the share
of [UNK] pieces, counted as the tokenizer counts it, leads the page when it is high; the rings
follow the chosen statistic; a run from the page says how long it will take and took, and
no page shows a path of the server's disk after it ran something."""
from __future__ import annotations

import sysconfig
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from attention import config
from attention.conclusions import unknown
from attention.corpus import store
from attention import diskcache
from attention.i18n import translate
from attention.spec import AttentionSpec
from attention.ui import estimate
from tests.apptest import chart_frames, chart_places, open_page
from tests.tiny_models import tiny  # noqa: F401  (fixture)

PAGE = "pages/6_Corpus.py"
SHIPPED = config.DATA / "corpus"
ROOT = Path(__file__).resolve().parent.parent
TEXTS = ["the cat sat on the mat .", "a dog ran past the old house while it rained",
         "she said that it was late"]


def _texts(at) -> list[str]:
    """Everything a page writes, as text: sentences, notices, table cells, chart data."""
    out = [e.value for kind in ("markdown", "caption", "info", "warning", "error", "success",
                                "title", "subheader", "header", "code", "latex")
           for e in getattr(at, kind)]
    for frame in at.dataframe:
        out += [str(c) for c in frame.value.columns]
        out += [str(v) for v in frame.value.astype(str).to_numpy().ravel()]
    for frame in chart_frames(at):
        out += [str(v) for v in frame.astype(str).to_numpy().ravel()]
    return out


def _disk() -> list[str]:
    """Folders of the server a page must never name."""
    places = {tempfile.gettempdir(), str(diskcache.cache_dir()), sysconfig.get_paths()["purelib"],
              str(ROOT), str(Path.home())}
    return sorted(p for p in places if len(p) > 1)


def _no_path(at) -> None:
    for text in _texts(at):
        for place in _disk():
            assert place not in text, f"the page shows {place!r}: {text[:200]!r}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_unknown_share_of_a_corpus_is_the_tokenizers_and_leads(lang):
    from transformers import AutoTokenizer

    from attention.models.loading import bundled_path

    at = open_page(PAGE, timeout=300, lang=lang, cp_folder="shipped:zh")
    assert not at.exception
    texts = pd.read_parquet(SHIPPED / "zh" / "view" / "texts.parquet")["text"]
    tokenizer = AutoTokenizer.from_pretrained(bundled_path())
    added = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    ids = [i for text in texts for i in tokenizer(text)["input_ids"] if i not in added]
    unk = sum(i == tokenizer.unk_token_id for i in ids)
    assert unk / len(ids) > unknown.THRESHOLD
    want = translate(lang, "unknown.high_corpus", model=config.BUNDLED, unknown=f"{unk:,}",
                     words=f"{len(ids):,}", share=f"{100 * unk / len(ids):.0f}%",
                     read=f"{len(ids) - unk:,}", reader=unknown.READER, threshold="10%")
    assert [w.value for w in at.warning][:1] == [want]
    at = open_page(PAGE, timeout=300, lang=lang, cp_folder="shipped:en")
    assert not at.warning and any(m.value.startswith(translate(
        lang, "unknown.low", model=config.BUNDLED, unknown="0", words="5,253", share="0%"))
        for m in at.markdown)


@pytest.mark.parametrize("stat", ["to_sep", "to_prev", "max_weight", "entropy"])
def test_the_rings_follow_the_chosen_statistic(stat):
    at = open_page(PAGE, timeout=300, cp_folder="shipped:en", cp_stat=stat)
    assert not at.exception
    grid = next(f for f in chart_frames(at) if {"mean", "ring", "layer", "head"} <= set(f))
    summary = pd.read_parquet(SHIPPED / "en" / "view" / "summary.parquet")
    merged = grid.merge(summary, on=["layer", "head"])
    assert (merged["mean"] == merged[f"{stat}_mean"]).all()
    if stat == "entropy":
        assert not merged["ring"].any()
        return
    want = (merged[f"{stat}_mean"] >= store.FIXED_SHARE) & \
           (merged[f"{stat}_cv"] < store.FIXED_CV)
    assert (merged["ring"] == want).all()
    assert (merged.loc[merged["ring"], "mean"] >= 0.5).all()     # no ring on a pale cell
    if stat == "to_sep":                         # the heads ringed by their own pattern before
        prev = merged[(merged["pattern"] == "to_prev") & merged["fixed"]]
        assert len(prev) and not prev["ring"].any()


def test_the_table_of_every_head_is_one_switch_away_and_moves_no_chart():
    """A cold link draws no table (the grid's tooltips and the sentences hold the numbers);
    the switch, kept in the link, shows the shipped summary's row of every head for the
    chosen statistic, and the grid and the map stay where they were."""
    at = open_page(PAGE, timeout=300, cp_folder="shipped:en", cp_stat="to_prev")
    assert not at.exception and not at.dataframe
    before = chart_places(at)
    assert len(before) == 2                                   # the head grid and the map
    at.toggle(key="view_cp_table").set_value(True).run()
    assert not at.exception and at.query_params["cp_table"] in ("True", ["True"])
    assert chart_places(at) == before
    table = at.dataframe[-1].value
    summary = pd.read_parquet(SHIPPED / "en" / "view" / "summary.parquet")
    assert len(table) == len(summary) == 72
    merged = table.iloc[:, :6].set_axis(["layer", "head", "texts", "mean", "lo", "hi"], axis=1) \
        .merge(summary, on=["layer", "head"], suffixes=("", "_want"))
    assert (merged["texts"] == merged["texts_want"]).all()
    for column in ("mean", "lo", "hi"):
        assert (merged[column] == merged[f"to_prev_{column}"]).all()
    again = open_page(PAGE, timeout=300, cp_folder="shipped:en", cp_table="True")
    assert not again.exception and len(again.dataframe) == 1    # the link reopens it


@pytest.mark.slow
def test_a_run_says_its_time_and_the_page_names_no_folder(monkeypatch):
    estimate.RATES.clear()
    at = open_page(PAGE, timeout=300, cp_table="True")     # the table's cells are read too
    at.text_area(key="corpus_page_texts").input("\n".join(TEXTS))
    at.button(key="corpus_page_go").click().run()
    assert not at.exception and not at.error
    captions = [c.value for c in at.caption]
    guess, took = at.session_state[estimate.LAST_KEY][("corpus", "session run")]
    assert guess > 0 and took > 0                     # estimated before, measured after
    assert translate("en", "estimate.after", time=estimate.duration(took),
                     estimate=estimate.duration(guess)) in captions
    assert estimate.RATES.rate(("corpus", config.BUNDLED)) > 0       # kept for the next run
    assert any(translate("en", "corpus.corpus_session") in c for c in captions)
    _no_path(at)


@pytest.mark.slow
def test_pages_that_compute_name_no_folder(tiny, monkeypatch):
    """The importance page computing a corpus on a model folder, and the sharper page
    training a seed that did not ship: no path of the server's disk on screen."""
    from attention.importance import store
    from attention.ui.views import importance as view

    monkeypatch.setattr(store, "N_BOOT", 50)
    monkeypatch.setattr(store, "ORDERS", 2)
    monkeypatch.setenv(config.ENV_LOCAL, "1")
    monkeypatch.setattr(view, "model_source", lambda spec: str(tiny["bert_base"]))
    spec = AttentionSpec(tokens=("x",), source="pretrained", text="the cat sat on the mat")
    at = open_page("pages/5_Does_the_model_use_it.py", spec, timeout=600, imp_corpus="sidebar")
    assert not at.exception and not at.error
    _no_path(at)
    from attention.experiment import training as experiment

    for name, value in (("SHARPEN_STEPS", 40), ("SCALING_STEPS", 30), ("EVAL_SIZE", 2048)):
        monkeypatch.setattr(experiment, name, value)
    at = open_page("pages/4_Is_sharper_better.py", timeout=600, sh_seed="7")
    assert not at.exception and not at.error
    _no_path(at)
