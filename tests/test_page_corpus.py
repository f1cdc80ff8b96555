"""The Corpus page's own small run (AppTest, bundled MiniLM): texts pasted into the page go
through the corpus job, and the head table the page then shows is the model's, computed here
text by text with LoadedModel.run and Clark et al.'s head table."""
from __future__ import annotations

import math

import numpy as np
import pytest

from attention import config
from attention.measures.heads import head_table
from attention.models import load_model
from attention.models.runs import special_names
from tests.apptest import open_page

pytestmark = pytest.mark.slow     # a corpus run in AppTest: left out of make test-fast

PAGE = "pages/6_Corpus.py"
TEXTS = ["the cat sat on the mat .", "a dog ran past the old house while it rained",
         "she said that it was late", "every student who came read his book", "birds sing"]


def test_a_pasted_corpus_runs_on_the_page_and_its_table_is_the_models():
    at = open_page(PAGE, timeout=300, cp_table="True")
    assert not at.exception
    at.text_area(key="corpus_page_texts").input("\n".join(TEXTS))
    at.button(key="corpus_page_go").click().run()
    assert not at.exception, at.exception
    assert at.query_params["cp_folder"] in ("session", ["session"])
    table = at.dataframe[-1].value                       # the page's stat: to_sep by default
    layer, head, texts, mean, low, high = (table.iloc[:, i].to_numpy() for i in range(6))
    assert (texts == len(TEXTS)).all() and len(table) == 72
    model = load_model(config.BUNDLED)
    per_text = np.stack([                                # (texts, 72): each text alone
        head_table(r.weights, r.tokens, *special_names(model))["to_sep"].to_numpy()
        for r in (model.run(t) for t in TEXTS)])
    want = per_text.mean(axis=0)
    half = 1.959964 * per_text.std(axis=0, ddof=1) / math.sqrt(len(TEXTS))
    order = layer * 12 + head
    np.testing.assert_allclose(mean, want[order], atol=1e-5)
    np.testing.assert_allclose(low, (want - half)[order], atol=1e-5)
    np.testing.assert_allclose(high, (want + half)[order], atol=1e-5)
    # a second session, even with the same link, does not see this one's run: it opens the
    # shipped results instead
    other = open_page(PAGE, timeout=300, cp_folder="session", cp_table="True")
    assert not other.exception
    shown = other.dataframe[-1].value.iloc[:, 2].to_numpy()
    assert (shown != len(TEXTS)).all() and (shown >= 100).all()
