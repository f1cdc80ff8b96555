"""Every page with a causal LM (AppTest): a tiny LLaMA with grouped k/v (4 query heads, 2 k/v
heads) built offline, named in the sidebar as a folder, and a tiny GGUF file standing in for
the bundled SmolLM2 (converted as a shared server converts it). Each page's numbers are checked against eager
transformers on the same checkpoint (its output_attentions; the module's own `scaling` set to
1 for the unscaled panels; a head zeroed by a hook on the output projection), independent of
attention.models: Model heads (grid, picked head scaled and unscaled), Heatmap and Score
analysis on a real layer, "Does the model use it?" with the causal-LM target (log p of the
top next piece) and the Corpus page's own run."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attention import config, models
from attention.i18n import translate
from attention.measures.heads import head_table
from attention.models.runs import special_names
from attention.spec import AttentionSpec
from tests.apptest import TIP, comparison_cells, grid_cells, open_page
from tests.tiny_models import local_models, tiny  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow,   # pages on a tiny model: left out of make test-fast
              pytest.mark.usefixtures("local_models")]

TEXT = "the cat sat on the mat"
LINES = "the cat sat on the mat\na dog barked at the old house"


@pytest.fixture(scope="module", params=["folder", "gguf"])
def llama(request, tiny, tmp_path_factory):
    """The model the sidebar names: the tiny LLaMA's folder, or the bundled causal LM's name
    with a tiny GGUF (tests/tiny_gguf.py) standing in for SmolLM2's file, converted into a
    cache of this module's own as a shared server does it."""
    if request.param == "folder":
        yield str(tiny["llama"])
        return
    from attention.models import convert, loading
    from tests import tiny_gguf

    gguf = tiny_gguf.write(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(config.ENV_CACHE, str(tmp_path_factory.mktemp("gguf_cache")))
        patch.delenv(config.ENV_PREBUILT, raising=False)
        patch.setattr(convert, "packaged_gguf", lambda: gguf)
        loading.clear_kept()
        models.load_model(config.BUNDLED_LM)                 # converted once, before the pages
        yield config.BUNDLED_LM
    loading.clear_kept()


@pytest.fixture(scope="module")
def eager(llama):
    """(the same checkpoint read by transformers with eager attention, the loaded model for
    its tokenizer): from the folder, or from the GGUF file itself (not the conversion)."""
    from transformers import AutoModelForCausalLM

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(config.ENV_LOCAL, "1")
        loaded = models.load_model(llama)
    if llama == config.BUNDLED_LM:
        from attention.models import convert

        gguf = convert.packaged_gguf()
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                     dtype=torch.float32,
                                                     attn_implementation="eager").eval()
    else:
        model = AutoModelForCausalLM.from_pretrained(llama, attn_implementation="eager").eval()
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    return model, loaded


def attentions(eager, text: str, unscaled_layer: int | None = None) -> torch.Tensor:
    """Eager (layers, heads, n, n); with `unscaled_layer`, that layer's scaling set to 1."""
    model, loaded = eager
    attn = model.model.layers[unscaled_layer].self_attn if unscaled_layer is not None else None
    old = attn.scaling if attn is not None else None
    try:
        if attn is not None:
            attn.scaling = 1.0
        with torch.no_grad():
            out = model(**loaded.encode(text), output_attentions=True)
    finally:
        if attn is not None:
            attn.scaling = old
    return torch.stack(out.attentions)[:, 0]


def matrix(frame, column: str, n: int) -> torch.Tensor:
    out = torch.zeros(n, n, dtype=torch.float64)
    out[frame["query_pos"].to_numpy(copy=True), frame["key_pos"].to_numpy(copy=True)] = \
        torch.tensor(frame[column].to_numpy(copy=True), dtype=torch.float64)
    return out


def spec_for(llama, text=TEXT, **kw) -> AttentionSpec:
    return AttentionSpec(tokens=tuple(text.split()), text=text, source="pretrained",
                         model=str(llama), **kw)


def named(source: str) -> str:
    return Path(source).name


def test_model_heads_grid_and_the_picked_head_scaled_and_unscaled(llama, eager):
    at = open_page("pages/3_Model_heads.py", spec_for(llama), mh_layer="1", mh_head="3")
    assert not at.exception and not at.error, [e.value for e in at.error]
    # no piece is the unknown token (a byte-level vocabulary spells every word): no note
    note = translate("en", "model.unknown_pieces", count="#c", n="#n", unk="#u")
    middle = note.split("#n")[1].split("#u")[0]          # " pieces are the ... unknown token "
    assert middle.strip() and not any(middle in c.value for c in at.caption)
    own = attentions(eager, TEXT)                                       # (2, 4, n, n)
    n = own.shape[-1]
    grid = grid_cells(at)[0].set_index(["layer", "head", "qb", "kb"])["weight"]
    assert len(grid) == 2 * 4 * n * n
    for key in [(1, 3, n - 1, 0), (0, 1, 2, 2), (1, 0, n - 1, n - 1)]:
        assert grid[key] == pytest.approx(own[key].item(), abs=5e-4 + 1e-9)
    comp = comparison_cells(at)[0]
    assert len(comp) == n * (n + 1) // 2                                 # causal: a triangle
    torch.testing.assert_close(matrix(comp, "weight", n), own[1, 3].double(), atol=TIP, rtol=0)
    unscaled = attentions(eager, TEXT, unscaled_layer=1)[1, 3]          # the module's scale off
    torch.testing.assert_close(matrix(comp, "unscaled_weight", n), unscaled.double(),
                               atol=TIP, rtol=0)


def test_heatmap_on_a_real_layer(llama, eager):
    at = open_page("pages/1_Heatmap.py", spec_for(llama, layer=1), hm_head="2")
    assert not at.exception and not at.error, [e.value for e in at.error]
    n = attentions(eager, TEXT).shape[-1]
    comp = comparison_cells(at)[0]
    torch.testing.assert_close(matrix(comp, "weight", n), attentions(eager, TEXT)[1, 2].double(),
                               atol=TIP, rtol=0)
    torch.testing.assert_close(matrix(comp, "unscaled_weight", n),
                               attentions(eager, TEXT, unscaled_layer=1)[1, 2].double(),
                               atol=TIP, rtol=0)


def test_score_analysis_on_a_real_layer(llama, eager):
    at = open_page("pages/2_Score_analysis.py", spec_for(llama, layer=1), sc_head="2")
    assert not at.exception and not at.error, [e.value for e in at.error]
    p = attentions(eager, TEXT)[1, 2].double()                          # (n, n)
    entropy = -(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(-1)
    shown = [m.value for m in at.metric]      # 3 score stds, then (scaled, unscaled) pairs
    assert float(shown[3]) == pytest.approx(entropy.mean().item(), abs=5.01e-4)
    assert float(shown[7]) == pytest.approx(p.max(-1).values.mean().item(), abs=5.01e-4)


def test_importance_with_the_causal_target_ablation_of_each_head(llama, eager):
    """"Does the model use it?" on the sidebar's two lines: a head's ablation is the mean over
    the texts of the drop in log p of the top next piece with the head's output zeroed."""
    at = open_page("pages/5_Does_the_model_use_it.py", spec_for(llama, LINES),
                   imp_corpus="sidebar", timeout=300)
    assert not at.exception and not at.error, [e.value for e in at.error]
    model, loaded = eager
    d = loaded.d_head
    from tests.apptest import chart_frames

    [heads] = [f for f in chart_frames(at) if {"layer", "head", "ablation"} <= set(f)]
    heads = heads.set_index(["layer", "head"])["ablation"]

    def log_p_top(text, layer=None, head=None):
        handle = None
        if layer is not None:
            def zero(_module, args):
                x = args[0].clone()
                x[..., head * d:(head + 1) * d] = 0.0
                return (x, *args[1:])
            handle = model.model.layers[layer].self_attn.o_proj.register_forward_pre_hook(zero)
        try:
            with torch.no_grad():
                return torch.log_softmax(model(**loaded.encode(text)).logits[0, -1].double(), -1)
        finally:
            if handle is not None:
                handle.remove()

    texts = LINES.splitlines()
    for layer, head in [(0, 1), (1, 3)]:
        drops = []
        for text in texts:
            plain = log_p_top(text)
            top = int(plain.argmax())
            drops.append(float(plain[top] - log_p_top(text, layer, head)[top]))
        assert heads[(layer, head)] == pytest.approx(np.mean(drops), abs=1e-4)


CORPUS = ["the cat sat on the mat .", "a dog ran past the old house", "she said that it was late"]


def test_corpus_page_runs_the_sidebars_causal_lm(llama, eager):
    """The Corpus page's own run uses the sidebar's model: its head table (of the mean max
    weight) is the mean over the texts of Clark et al.'s column on eager attention."""
    at = open_page("pages/6_Corpus.py", spec_for(llama), timeout=300, cp_stat="max_weight",
                   cp_table="True")
    assert not at.exception
    assert any(e.label.endswith(f"on {named(llama)}") for e in at.main.expander)
    at.text_area(key="corpus_page_texts").input("\n".join(CORPUS))
    at.button(key="corpus_page_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = at.dataframe[-1].value
    layer, head, texts, mean, low, high = (table.iloc[:, i].to_numpy() for i in range(6))
    assert (texts == len(CORPUS)).all() and len(table) == 8
    _, loaded = eager
    per_text = np.stack([
        head_table(attentions(eager, text), tuple(loaded.tokenizer.convert_ids_to_tokens(
            loaded.encode(text)["input_ids"][0].tolist())), *special_names(loaded))["max_weight"]
        .to_numpy()
        for text in CORPUS])                                             # (texts, 8)
    want = per_text.mean(axis=0)
    half = 1.959964 * per_text.std(axis=0, ddof=1) / math.sqrt(len(CORPUS))
    order = layer * 4 + head
    np.testing.assert_allclose(mean, want[order], atol=1e-5)
    np.testing.assert_allclose(low, (want - half)[order], atol=1e-5)
    assert any(named(llama) in c.value for c in at.main.caption)        # the run's model named


def test_a_30_layer_9_head_model_keeps_its_grid_in_bounds(tmp_path):
    """SmolLM2's shape (30 layers x 9 heads, 3 k/v heads): the grid of 270 heads fits its box
    (blocks of at least GRID_MIN_PX, at most GRID_HEIGHT tall: the pickers stay near), every
    head in it is the eager model's, and the pickers reach the last layer and head."""
    from transformers import LlamaConfig

    from attention.charts.canvas import GRID_HEIGHT, GRID_MIN_PX
    from tests.tiny_models import TINY, save
    from tests.apptest import figures

    folder = save(LlamaConfig(**{**TINY, "num_hidden_layers": 30, "num_attention_heads": 9,
                                 "hidden_size": 72}, num_key_value_heads=3,
                              architectures=["LlamaForCausalLM"]), tmp_path / "llama30")
    text = "The capital of France is"                                   # 7 pieces
    at = open_page("pages/3_Model_heads.py", spec_for(folder, text), mh_layer="29", mh_head="8")
    assert not at.exception and not at.error, [e.value for e in at.error]
    [grid] = [f for f in figures(at) if f["kind"] == "grid"]
    assert (grid["layers"], grid["heads"], grid["blocks"]) == (30, 9, 7)
    assert grid["px"] >= GRID_MIN_PX and 30 * (7 + 1) * grid["px"] <= GRID_HEIGHT
    assert grid["current"] == [29, 8]
    own = attentions((type(models.load_model(str(folder)).model).from_pretrained(
        folder, attn_implementation="eager").eval(), models.load_model(str(folder))), text)
    cells = grid_cells(at)[0].set_index(["layer", "head", "qb", "kb"])["weight"]
    assert len(cells) == 30 * 9 * 7 * 7
    for key in [(29, 8, 6, 0), (0, 0, 3, 1), (15, 4, 6, 6)]:
        assert cells[key] == pytest.approx(own[key].item(), abs=5e-4 + 1e-9)
    assert len(at.selectbox(key="view_mh_layer").options) == 30
    assert len(at.selectbox(key="view_mh_head").options) == 9
    comp = comparison_cells(at)[0]
    torch.testing.assert_close(matrix(comp, "weight", 7), own[29, 8].double(), atol=TIP, rtol=0)
