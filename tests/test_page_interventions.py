"""What an intervention shows on the Model heads page (AppTest, tiny models built offline): the
changed heads' attention before | after | difference, each piece's loss (a causal LM) or each
sentence's cosine (an embedding model), and the named heads' sharpness beside the output, all
against eager transformers with the change made by hand (the module's scaling set to 1, a
head's slice of the output projection's input zeroed), independent of attention.models."""
from __future__ import annotations

import re

import pytest
import torch

from attention import models
from attention.spec import AttentionSpec
from tests.apptest import TIP, chart_frames, chart_places, figure_cells, figures, open_page
from tests.tiny_models import local_models, tiny  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow,   # pages on tiny models: left out of make test-fast
              pytest.mark.usefixtures("local_models")]

MODEL_PAGE = "pages/3_Model_heads.py"
TEXT = "the cat sat on the mat"


def eager(folder):
    loaded = models.load_model(str(folder))
    model = type(loaded.model).from_pretrained(folder, attn_implementation="eager").eval()
    return model, loaded


def before_after_figure(at):
    """The intervention's before | after | difference figure, as cells."""
    [figure] = [f for f in figures(at) if f["kind"] == "cells" and
                [p["title"] for p in f["panels"]][:2] == ["Before", "After"]]
    return figure, figure_cells(figure)


def as_matrix(cells, column: str, n: int) -> torch.Tensor:
    out = torch.zeros(n, n, dtype=torch.float64)
    out[cells["query_pos"].to_numpy(copy=True), cells["key_pos"].to_numpy(copy=True)] = \
        torch.tensor(cells[column].to_numpy(copy=True), dtype=torch.float64)
    return out


def sharpness(p: torch.Tensor) -> tuple[float, float]:
    """Mean max weight and mean entropy (nats) over heads and rows of p (heads, n, n), by hand."""
    p = p.double()
    h = -(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(-1)
    return p.max(-1).values.mean().item(), h.mean().item()


def test_causal_lm_unscaled_layer_shows_attention_losses_and_sharpness(tiny):
    """Tiny LLaMA with grouped k/v, layer 1 unscaled: eager with layer 1's scaling set to 1 is
    the reference for the after panel, each piece's loss and the sharpness."""
    folder = tiny["llama"]
    spec = AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained", model=str(folder))
    at = open_page(MODEL_PAGE, spec, mh_iv="unscaled:1:*", mh_tab="iv", mh_ivhead="1.2")
    assert not at.exception and not at.error, [e.value for e in at.error]
    model, loaded = eager(folder)
    enc = loaded.encode(TEXT)
    with torch.no_grad():
        plain = model(**enc, output_attentions=True)
        model.model.layers[1].self_attn.scaling = 1.0
        unscaled = model(**enc, output_attentions=True)
    n = enc["input_ids"].shape[1]
    b, a = plain.attentions[1][0], unscaled.attentions[1][0]             # (heads, n, n)
    assert (a - b).abs().max() > 1e-3                                   # it changed something
    figure, cells = before_after_figure(at)
    assert len(cells) == n * (n + 1) // 2                               # causal: lower triangle
    torch.testing.assert_close(as_matrix(cells, "weight", n), b[2].double(), atol=TIP, rtol=0)
    torch.testing.assert_close(as_matrix(cells, "unscaled_weight", n), a[2].double(),
                               atol=TIP, rtol=0)
    torch.testing.assert_close(as_matrix(cells, "difference", n), (a[2] - b[2]).double(),
                               atol=2 * TIP, rtol=0)
    assert figure["panels"][0]["legend"] is None                         # one scale for both
    # the named heads' sharpness (all 4 heads of layer 1) beside the output's loss
    metrics = {m.label: m for m in at.metric}
    mw_b, h_b = sharpness(b)
    mw_a, h_a = sharpness(a)
    assert float(metrics["Mean max weight"].value) == pytest.approx(mw_a, abs=1e-4)
    assert float(metrics["Mean max weight"].delta) == pytest.approx(mw_a - mw_b, abs=1e-4)
    assert float(metrics["Mean entropy (nats)"].value) == pytest.approx(h_a, abs=1e-4)
    assert float(metrics["Mean entropy (nats)"].delta) == pytest.approx(h_a - h_b, abs=1e-4)
    ids = enc["input_ids"][0]
    loss_b = torch.nn.functional.cross_entropy(plain.logits[0, :-1].double(), ids[1:],
                                               reduction="none")
    loss_a = torch.nn.functional.cross_entropy(unscaled.logits[0, :-1].double(), ids[1:],
                                               reduction="none")
    assert float(metrics["Mean loss, after (nats)"].value) == pytest.approx(
        loss_a.mean().item(), abs=1e-4)
    # each piece's loss, before and after, in the chart's data
    [losses] = [f for f in chart_frames(at) if {"when", "loss"} <= set(f)]
    for when, expected in (("Before", loss_b), ("After", loss_a)):
        rows = losses[losses["when"] == when].sort_values("position")
        assert rows["position"].tolist() == list(range(1, n))
        assert rows["loss"].tolist() == pytest.approx(expected.tolist(), abs=1e-5)
    assert at.query_params["mh_ivhead"] == "1.2"


def test_embedding_model_ablation_shows_downstream_heads_and_each_sentence(tiny):
    """Tiny BERT (embeddings), head 1 of layer 0 ablated: its own weights stay (the page says
    so), layer 1's heads change and are offered; each line's cosine before against after."""
    folder = tiny["bert_base"]
    text = "the cat sat\na dog barked\nthe mat"
    spec = AttentionSpec(tokens=tuple(text.split()), text=text, source="pretrained",
                         model=str(folder))
    at = open_page(MODEL_PAGE, spec, mh_iv="ablate:0:1", mh_tab="iv")
    assert not at.exception and not at.error, [e.value for e in at.error]
    model, loaded = eager(folder)
    d = loaded.d_head
    dense = model.encoder.layer[0].attention.output.dense

    def zero(_module, args):
        x = args[0].clone()
        x[..., 1 * d:2 * d] = 0.0
        return (x, *args[1:])

    def run(line, ablate):
        handle = dense.register_forward_pre_hook(zero) if ablate else None
        try:
            with torch.no_grad():
                return model(**loaded.encode(line), output_attentions=True)
        finally:
            if handle is not None:
                handle.remove()

    picker = at.selectbox(key="view_mh_ivhead")
    assert picker.options[0] == "Layer 0, head 1 (named by the intervention)"
    assert all("changed downstream" in o and o.startswith("Layer 1") for o in picker.options[1:])
    assert len(picker.options) == 4                     # and the 3 heads that moved most
    assert any("did not change" in c.value for c in at.caption)
    _, cells = before_after_figure(at)
    assert cells["difference"].abs().max() == 0.0
    # a downstream head: after = eager with the hook
    head = int(re.match(r"Layer 1, head (\d+) ", picker.options[1]).group(1))
    at.selectbox(key="view_mh_ivhead").set_value(f"1.{head}").run()
    assert not at.exception
    _, cells = before_after_figure(at)
    plain, ablated = run(text, False), run(text, True)
    n = plain.attentions[1].shape[-1]
    torch.testing.assert_close(as_matrix(cells, "weight", n),
                               plain.attentions[1][0, head].double(), atol=TIP, rtol=0)
    torch.testing.assert_close(as_matrix(cells, "unscaled_weight", n),
                               ablated.attentions[1][0, head].double(), atol=TIP, rtol=0)
    # each sentence's cosine, its embedding before against after
    [sentences] = [f for f in chart_frames(at) if {"sentence", "cosine"} <= set(f)]
    for line, shown in zip(text.splitlines(), sentences["cosine"]):
        e = [torch.nn.functional.normalize(run(line, ab).last_hidden_state[0].mean(0), dim=0)
             for ab in (False, True)]
        assert shown == pytest.approx(float(e[0].double() @ e[1].double()), abs=1e-5)


def test_picking_a_downstream_head_moves_no_figure(tiny):
    """A named head's "did not change" note sits in a place there either way (ui.chart.place):
    picking a head downstream, without the note, leaves every figure in its place."""
    folder = tiny["bert_base"]
    text = "the cat sat\na dog barked\nthe mat"
    spec = AttentionSpec(tokens=tuple(text.split()), text=text, source="pretrained",
                         model=str(folder))
    at = open_page(MODEL_PAGE, spec, mh_iv="ablate:0:1", mh_tab="iv")
    places = chart_places(at)
    picker = at.selectbox(key="view_mh_ivhead")
    same = "This head's own weights did not change"
    assert any(same in c.value for c in at.caption) and len(places) >= 2
    head = int(re.match(r"Layer 1, head (\d+) ", picker.options[1]).group(1))
    picker.set_value(f"1.{head}").run()
    assert not at.exception
    assert not any(same in c.value for c in at.caption)
    assert chart_places(at) == places


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_empty_pickers_speak_the_pages_language(tiny, lang):
    """Nothing picked yet: the layer and head lists' placeholders are the page's language
    (Streamlit's own is English "Choose options" in every language), and the page says to
    pick some."""
    from attention.i18n import translate

    spec = AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained",
                         model=str(tiny["llama"]))
    at = open_page(MODEL_PAGE, spec, mh_tab="iv", lang=lang)
    assert not at.exception and not at.error, [e.value for e in at.error]
    boxes = {m.label: m for m in at.multiselect}
    for label, placeholder in (("model.iv_layers", "model.iv_pick_layers"),
                               ("model.iv_heads", "model.iv_pick_heads")):
        box = boxes[translate(lang, label)]
        assert box.value == [] and box.proto.placeholder == translate(lang, placeholder)
        assert box.proto.placeholder != "Choose options"
    assert translate(lang, "model.iv_none") in [i.value for i in at.info]
