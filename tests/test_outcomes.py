"""attention.models.outcomes against hand computations, the interventions' link form (round trip and
malformed items), and the sink helpers against the model's own hide_sinks intervention."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention.measures import heads as headstats
from attention.measures.sinks import hide_sinks

from attention.models import links as ivlink

from attention.models import outcomes


def test_top_k_and_kl_by_hand():
    # probabilities 1/6, 2/6, 3/6 (logits are their logs) against 1/3 each
    before = torch.log(torch.tensor([1.0, 2.0, 3.0]))
    after = torch.zeros(3)
    top = outcomes.top_k(before, 2)
    assert [i for i, _ in top] == [2, 1]
    assert [p for _, p in top] == pytest.approx([0.5, 1 / 3])
    hand = sum(p * math.log(p / (1 / 3)) for p in (1 / 6, 2 / 6, 3 / 6))
    assert outcomes.kl_divergence(before, after) == pytest.approx(hand, abs=1e-7)
    assert outcomes.kl_divergence(before, before + 7.0) == pytest.approx(0.0, abs=1e-7)


def test_token_losses_and_loss_table_by_hand():
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25],    # predicts token 1 with 0.25
                                     [0.1, 0.1, 0.8],      # predicts token 2 with 0.8
                                     [1.0, 1.0, 1.0]]))
    ids = [0, 1, 2]
    losses = outcomes.token_losses(logits, ids)
    assert losses.tolist() == pytest.approx([-math.log(0.25), -math.log(0.8)])
    table = outcomes.loss_table(logits, torch.zeros(3, 3), ids, ["a", "b", "c"])
    assert table["token"].tolist() == ["b", "c"]
    assert table["loss_after"].tolist() == pytest.approx([math.log(3)] * 2)
    assert table["change"].tolist() == pytest.approx([math.log(3) + math.log(0.25),
                                                      math.log(3) + math.log(0.8)])


def test_compare_top_tracks_where_the_mass_went():
    before = torch.log(torch.tensor([0.7, 0.2, 0.1]))
    after = torch.log(torch.tensor([0.1, 0.2, 0.7]))
    frame = outcomes.compare_top(before, after, lambda i: "abc"[i], k=2)
    assert frame["before"].tolist() == ["a", "b"] and frame["after"].tolist() == ["c", "b"]
    assert frame["p_before_after"].tolist() == pytest.approx([0.1, 0.2])


def test_cosines_by_hand():
    e = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    table = outcomes.cosine_table(e)
    r = 1 / math.sqrt(2)
    torch.testing.assert_close(table, torch.tensor([[1, r, 0], [r, 1, r], [0, r, 1]],
                                                   dtype=torch.float64))
    frame = outcomes.similarity_frame(e, e[[0, 2, 1]], ["x", "y", "z"])
    assert list(zip(frame["a"], frame["b"])) == [("x", "y"), ("x", "z"), ("y", "z")]
    assert frame["cos_after"].tolist() == pytest.approx([0.0, r, r])
    assert outcomes.cosine(torch.zeros(2), torch.ones(2)) == 0.0
    assert outcomes.sentences(" a \n\n b\nc ", 2) == ["a", "b"]


# ---- the link form -------------------------------------------------------------------------

items = st.tuples(st.sampled_from(ivlink.KINDS), st.none() | st.integers(0, 99),
                  st.none() | st.integers(0, 99)).map(
    lambda t: (*t, 0.5 if t[0] == "temperature" else None))


@settings(max_examples=100, deadline=None)
@given(st.lists(items, max_size=8, unique=True), st.floats(0.01, 100))
def test_link_form_round_trips(parsed, tau):
    parsed = [(k, l, h, tau if k == "temperature" else v) for k, l, h, v in parsed]
    parsed = list(dict.fromkeys(parsed))

    class Iv:
        def __init__(self, kind, layer, head, value):
            self.kind, self.layer, self.head, self.value = kind, layer, head, value

    raw = ivlink.to_param([Iv(*p) for p in parsed])
    back, problems = ivlink.from_param(raw)
    assert not problems and list(back) == parsed


def test_link_form_by_example_and_malformed_items():
    back, problems = ivlink.from_param("ablate:2:5;temperature:*:*:0.5")
    assert back == (("ablate", 2, 5, None), ("temperature", None, None, 0.5)) and not problems
    bad = ["bogus:1:1", "ablate:x:1", "ablate:1", "temperature:*:*", "temperature:*:*:-1",
           "temperature:*:*:nan", "ablate:1:1:3", "ablate:-1:0", "uniform:99999:0"]
    back, problems = ivlink.from_param(";".join(["ablate:0:0", *bad]))
    assert back == (("ablate", 0, 0, None),)
    assert [p.key for p in problems] == ["errors.iv_item"] * len(bad)
    assert ivlink.from_param("x" * 5000)[1][0].key == "errors.iv_long"
    many = ";".join(f"ablate:0:{h}" for h in range(100))
    back, problems = ivlink.from_param(many)
    assert len(back) == ivlink.MAX_ITEMS and problems[0].key == "errors.iv_many"


# ---- sinks ---------------------------------------------------------------------------------

def test_sink_table_and_hidden_sinks_by_hand():
    w = torch.tensor([[[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]]])  # (1, 1, 3, 3)
    special = torch.tensor([True, False, True])
    table = headstats.sink_table(w, special)
    assert table["to_first"].iloc[0] == pytest.approx((1 + 0.5 + 0.2) / 3)
    assert table["to_special"].iloc[0] == pytest.approx((1 + 0.5 + 0.7) / 3)
    causal = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    hidden = hide_sinks(causal, special, (3, 3))
    # rows keep their non-sink keys; the first row, left with none, keeps what it had
    assert hidden.tolist() == [[True, False, False], [False, True, False], [False, True, False]]
    logits = torch.tensor([[0.3, -1.0, 2.0]] * 3)                       # any logits
    kept = torch.softmax(logits.masked_fill(~hidden, -torch.inf), -1)
    full = torch.softmax(logits.masked_fill(~causal, -torch.inf), -1)
    renormalised = full * hidden / (full * hidden).sum(-1, keepdim=True)  # the same, after
    torch.testing.assert_close(kept, renormalised)


def test_the_heads_reports_hidden_sinks_equal_the_models_hide_sinks_intervention():
    """Layer 0 sees the same input with and without the intervention, so the report's weights
    without sinks (recomputed from the captured q, k with the sink mask) must equal what the
    forward computed with the sinks masked out."""
    from attention import models
    from attention.models import runs

    m = models.load_model(models.BUNDLED)
    text = "the cat sat on the mat ."
    shown = runs.heads_report(models.BUNDLED, text, hide_sinks=True).shown
    hidden = m.run(text, (models.Intervention("hide_sinks", layer=0),))
    torch.testing.assert_close(shown[0], hidden.weights[0], atol=1e-6, rtol=0)
