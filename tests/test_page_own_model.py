"""Your own model through the pages (AppTest): a tiny GPT-2 / BERT folder typed in the sidebar;
Heatmap, Score analysis and Model heads render, the numbers shown are the model's own weights
(eager transformers' output_attentions, independent of the core), the interventions' before
and after numbers equal an eager model with a hook, and model + interventions round-trip
through the link."""
from __future__ import annotations

import inspect

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import config
from attention import models

from attention.measures import heads as headstats

from attention.models import outcomes
from attention.spec import AttentionSpec
from tests.apptest import TIP, captions, comparison_cells, grid_cells, headings, open_page, open_part
from tests.tiny_models import build

pytestmark = pytest.mark.slow     # pages on tiny models of four architectures: left out of make test-fast

TEXT = "the cat sat on the mat"
MODEL_PAGE, HEATMAP, SCORES = "pages/3_Model_heads.py", "pages/1_Heatmap.py", "pages/2_Score_analysis.py"


@pytest.fixture(autouse=True)
def _folders_on(monkeypatch):
    """A person's own machine: model folders load (a shared server refuses them, test_policy)."""
    monkeypatch.setenv(config.ENV_LOCAL, "1")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build(tmp_path_factory.mktemp("own_models"), ["gpt2", "bert", "bert_base"])


def spec_for(folder, **kw) -> AttentionSpec:
    return AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained", model=str(folder), **kw)


def eager(folder):
    """The checkpoint loaded the ordinary way (eager attention), and its tokenised TEXT."""
    loaded = models.load_model(str(folder))
    model = type(loaded.model).from_pretrained(folder, attn_implementation="eager").eval()
    return model, loaded


def eager_out(model, loaded, text=TEXT, hook=None):
    """Eager forward; `hook` = (module, head, d_head) zeroes that head's slice of the module's
    input (the output projection), an ablation independent of models.py."""
    enc = loaded.encode(text)
    if "token_type_ids" not in inspect.signature(model.forward).parameters:
        enc.pop("token_type_ids", None)
    handle = None
    if hook is not None:
        module, head, d = hook

        def zero(_module, args):
            x = args[0].clone()
            x[..., head * d:(head + 1) * d] = 0.0
            return (x, *args[1:])

        handle = module.register_forward_pre_hook(zero)
    try:
        with torch.no_grad():
            return model(**enc, output_attentions=True, output_hidden_states=True)
    finally:
        if handle is not None:
            handle.remove()


def matrix(frame, column: str, n: int) -> torch.Tensor:
    """(n, n) float64 from a cell frame (query_pos, key_pos); cells not drawn (masked) are 0."""
    out = torch.zeros(n, n, dtype=torch.float64)
    out[frame["query_pos"].to_numpy(copy=True), frame["key_pos"].to_numpy(copy=True)] = torch.tensor(
        frame[column].to_numpy(copy=True), dtype=torch.float64)
    return out


def by_label(at: AppTest) -> dict[str, float]:
    return {m.label: float(m.value) for m in at.metric}


def test_model_typed_in_the_sidebar_shows_its_own_weights(tiny):
    folder = tiny["gpt2"]
    at = open_page(MODEL_PAGE, AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained"))
    at.sidebar.selectbox(key="in_model_pick").set_value("own").run()
    at.sidebar.text_input(key="in_model").input(str(folder)).run()
    at.selectbox(key="view_mh_layer").set_value(1).run()
    at.selectbox(key="view_mh_head").set_value(2).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.query_params["model"] == str(folder)
    model, loaded = eager(folder)
    own = torch.stack(eager_out(model, loaded).attentions)[:, 0]       # (2, 4, n, n)
    n = own.shape[-1]
    assert at.text[0].value == " ".join(loaded.run(TEXT).tokens)
    assert "All 8 heads" in headings(at)
    assert any("causal" in c for c in captions(at))
    grid = grid_cells(at)[0]
    assert len(grid) == 2 * 4 * n * n
    cell = grid.set_index(["layer", "head", "qb", "kb"])["weight"]
    for key in [(1, 2, 3, 1), (0, 0, 0, 0), (1, 3, 5, 6)]:
        assert cell[key] == pytest.approx(own[key].item(), abs=5e-4 + 1e-9)   # 3 decimals
    # the comparison: the chosen head, a lower triangle, unscaled as recomputed with scale 1
    comp = comparison_cells(at)[0]
    assert len(comp) == n * (n + 1) // 2 and (comp["key_pos"] <= comp["query_pos"]).all()
    torch.testing.assert_close(matrix(comp, "weight", n), own[1, 2].double(), atol=TIP, rtol=0)
    unscaled = loaded.run(TEXT).recompute(scaled=False).weights[1, 2]
    torch.testing.assert_close(matrix(comp, "unscaled_weight", n), unscaled.double(),
                               atol=TIP, rtol=0)
    # Clark's table and the sinks table on the same weights, on their own tab
    table = open_part(at, "table").dataframe[0].value
    assert len(table) == 8
    row = table[(table["Layer"] == 1) & (table["Head"] == 2)].iloc[0]
    assert row["Mean max weight"] == pytest.approx(own[1, 2].max(-1).values.mean().item(), abs=1e-5)
    assert row["To the first token"] == pytest.approx(own[1, 2, :, 0].mean().item(), abs=1e-5)


@pytest.mark.parametrize("page", [HEATMAP, SCORES])
def test_heatmap_and_scores_show_the_chosen_layer(tiny, page):
    folder = tiny["bert"]
    at = open_page(page, spec_for(folder, layer=1), hm_head="3", head="3")
    assert not at.exception and not at.error, [e.value for e in at.error]
    model, loaded = eager(folder)
    own = torch.stack(eager_out(model, loaded).attentions)[:, 0]         # (layers, heads, n, n)
    if page == SCORES:                # head 3 of layer 1, from transformers' eager attention
        p = own[1, 3].double()                                           # (n, n)
        entropy = -(p * p.clamp_min(1e-300).log()).sum(-1)               # (n,) nats
        shown = [m.value for m in at.metric]     # 3 score stds, then (scaled, unscaled) pairs
        assert float(shown[3]) == pytest.approx(entropy.mean().item(), abs=5.01e-4)
        assert float(shown[5]) == pytest.approx(entropy.exp().mean().item(), abs=5.01e-3)
        assert float(shown[7]) == pytest.approx(p.max(-1).values.mean().item(), abs=5.01e-4)
        return
    frame = comparison_cells(at)[0]                          # head 3's (hm_head=3)
    torch.testing.assert_close(matrix(frame, "weight", own.shape[-1]), own[1, 3].double(),
                               atol=TIP, rtol=0)


def test_hide_sinks_renormalises_the_heatmap(tiny):
    folder = tiny["bert"]
    at = open_page(HEATMAP, spec_for(folder, layer=1, hide_sinks=True), hm_head="0")
    assert not at.exception and not at.error
    assert at.query_params["hide_sinks"] == "1"
    run = models.load_model(str(folder)).run(TEXT)
    kept = run.weights[1, 0] * ~run.sinks                               # (n, n) renormalised
    expected = kept / kept.sum(-1, keepdim=True)                         # by hand
    got = matrix(comparison_cells(at)[0], "weight", run.n)  # head 0's
    torch.testing.assert_close(got, expected.double(), atol=TIP, rtol=0)
    assert float(got[:, run.sinks].abs().max()) == 0.0


def test_causal_lm_intervention_equals_an_eager_model_with_a_hook(tiny):
    folder = tiny["gpt2"]
    at = open_page(MODEL_PAGE, spec_for(folder), mh_iv="ablate:1:2")
    assert not at.exception and not at.error
    model, loaded = eager(folder)
    before = eager_out(model, loaded).logits[0]
    after = eager_out(model, loaded, hook=(model.transformer.h[1].attn.c_proj, 2,
                                           loaded.d_head)).logits[0]
    top = at.dataframe[0].value
    p_b = torch.softmax(before[-1].double(), -1)
    p_a = torch.softmax(after[-1].double(), -1)
    assert top["P before"].tolist() == pytest.approx(p_b.topk(5).values.tolist(), abs=1e-6)
    assert top["P after"].tolist() == pytest.approx(p_a.topk(5).values.tolist(), abs=1e-6)
    kl = float((p_b * (p_b.log() - p_a.log())).sum())
    metrics = by_label(at)
    assert metrics["KL, before ‖ after (nats)"] == pytest.approx(kl, abs=1e-4)
    assert kl > 1e-6                                      # the ablation reached the output
    ids = torch.tensor(loaded.run(TEXT).ids)
    loss = torch.nn.functional.cross_entropy(after[:-1].double(), ids[1:])
    assert metrics["Mean loss, after (nats)"] == pytest.approx(loss.item(), abs=1e-4)


def test_masked_lm_prediction_at_the_chosen_piece(tiny):
    folder = tiny["bert"]
    at = open_page(MODEL_PAGE, spec_for(folder), mh_iv="ablate:0:1", mh_ivpos="3")
    assert not at.exception and not at.error
    model, loaded = eager(folder)
    enc = loaded.encode(TEXT)
    enc["input_ids"][0, 3] = loaded.tokenizer.mask_token_id
    hook = (model.bert.encoder.layer[0].attention.output.dense, 1, loaded.d_head)
    outs = []
    for h in (None, hook):
        handle = None
        if h is not None:
            def zero(_m, args, h=h):
                x = args[0].clone()
                x[..., h[1] * h[2]:(h[1] + 1) * h[2]] = 0.0
                return (x, *args[1:])
            handle = h[0].register_forward_pre_hook(zero)
        with torch.no_grad():
            outs.append(model(**enc).logits[0, 3])
        if handle:
            handle.remove()
    top = at.dataframe[0].value
    p_b, p_a = (torch.softmax(o.double(), -1) for o in outs)
    assert top["P before"].tolist() == pytest.approx(p_b.topk(5).values.tolist(), abs=1e-6)
    assert top["P after"].tolist() == pytest.approx(p_a.topk(5).values.tolist(), abs=1e-6)
    assert at.query_params["mh_ivpos"] == "3"


def test_embedding_model_cosines_before_and_after(tiny):
    folder = tiny["bert_base"]
    text = "the cat sat\na dog barked\nthe mat"
    spec = AttentionSpec(tokens=tuple(text.split()), text=text, source="pretrained",
                         model=str(folder))
    at = open_page(MODEL_PAGE, spec, mh_iv="ablate:1:*")
    assert not at.exception and not at.error
    model, loaded = eager(folder)

    def embedding(line, ablate):
        hooks = [(model.encoder.layer[1].attention.output.dense, h, loaded.d_head)
                 for h in range(loaded.heads)] if ablate else []
        handles = []
        for module, head, d in hooks:
            def zero(_m, args, head=head, d=d):
                x = args[0].clone()
                x[..., head * d:(head + 1) * d] = 0.0
                return (x, *args[1:])
            handles.append(module.register_forward_pre_hook(zero))
        try:
            out = eager_out(model, loaded, line)
        finally:
            for handle in handles:
                handle.remove()
        return torch.nn.functional.normalize(out.last_hidden_state[0].mean(0), dim=0)

    cos = outcomes.cosine(embedding(text, False), embedding(text, True))
    assert by_label(at)["Cosine between the text's embeddings before and after"] == \
        pytest.approx(cos, abs=1e-4)
    pairs = at.dataframe[0].value
    lines = text.splitlines()
    assert len(pairs) == 3
    before = torch.nn.functional.cosine_similarity(embedding(lines[0], False),
                                                   embedding(lines[1], False), dim=0)
    after = torch.nn.functional.cosine_similarity(embedding(lines[0], True),
                                                  embedding(lines[1], True), dim=0)
    assert pairs["Cosine before"].iloc[0] == pytest.approx(before.item(), abs=1e-5)
    assert pairs["Cosine after"].iloc[0] == pytest.approx(after.item(), abs=1e-5)


def test_model_and_interventions_round_trip_through_the_link(tiny):
    folder = tiny["gpt2"]
    at = open_part(open_page(MODEL_PAGE, spec_for(folder, layer=1)), "iv")
    at.selectbox(key="iv_kind").set_value("temperature").run()
    at.multiselect(key="iv_layers").select("*").run()
    at.multiselect(key="iv_heads").select(1).select(3).run()
    at.number_input(key="iv_tau").set_value(0.5).run()
    assert not at.exception and not at.error
    link = dict(at.query_params)
    assert link["mh_iv"] == "temperature:*:1:0.5;temperature:*:3:0.5" and link["mh_tab"] == "iv"
    assert link["model"] == str(folder) and link["layer"] == "1"
    shown = by_label(at)
    again = open_page(MODEL_PAGE, **link)
    assert not again.exception and not again.error
    assert dict(again.query_params)["mh_iv"] == link["mh_iv"]
    assert again.selectbox(key="iv_kind").value == "temperature"
    assert sorted(again.multiselect(key="iv_heads").value) == [1, 3]
    assert by_label(again) == shown
    spec, problems = AttentionSpec.parse_query(link)
    assert not problems and spec.model == str(folder) and spec.layer == 1


def test_a_hand_written_link_is_applied_as_written(tiny):
    folder = tiny["gpt2"]
    iv = "ablate:1:2;temperature:*:*:0.5"
    at = open_page(MODEL_PAGE, spec_for(folder), mh_iv=iv)
    assert not at.exception and not at.error
    assert at.query_params["mh_iv"] == iv
    assert any(iv in c.value for c in at.caption)
