"""The bundled MiniLM through the one model path (attention.models.runs): its heads, computed by
core.attention inside its forward, agree with transformers' own eager attention."""
from __future__ import annotations

import math
from functools import lru_cache

import pytest
import torch
import torch.nn.functional as F

from attention import config
from attention import pretrained as P
from attention.core import attention
from attention.models import loading, runs
from attention.models.loading import bundled_path, load_model

BUNDLED = config.BUNDLED
from attention.errors import UserError

pytestmark = pytest.mark.slow     # MiniLM against eager transformers, long texts: left out of make test-fast

SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "the cat sat on the mat and the cat sat on the mat again",
    'Wait... what?! (Yes, really: "no"; maybe -- ok.) #1, $2 & 50%!',
]


@pytest.fixture(scope="module")
def model():
    """The model, loaded once for the whole module (and the process)."""
    return load_model(BUNDLED)


@lru_cache(maxsize=1)
def eager():
    """The same checkpoint loaded the ordinary way, with transformers' own eager attention
    (load_model's model runs core.attention inside, so its output_attentions are ours)."""
    from transformers import AutoModel

    return AutoModel.from_pretrained(bundled_path(), attn_implementation="eager").eval()


def own_forward(model, text):
    """The eager model's attention weights and, via forward hooks, its q/k/v projections."""
    captured = {}
    hooks = []
    for layer, block in enumerate(eager().encoder.layer):
        for name in ("query", "key", "value"):
            module = getattr(block.attention.self, name)
            hooks.append(module.register_forward_hook(
                lambda mod, args, out, key=(layer, name): captured.__setitem__(key, out[0])))
    try:
        enc = model.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            out = eager()(**enc, output_attentions=True)
    finally:
        for h in hooks:
            h.remove()
    weights = torch.stack(out.attentions)[:, 0]                          # (layers, heads, n, n)
    return enc, weights, captured


@pytest.mark.parametrize("text", SENTENCES)
def test_all_72_heads_match_output_attentions(model, text):
    tokens, weights = P.attention_weights(text)
    enc, own, _ = own_forward(model, text)
    assert weights.shape == own.shape == (6, 12, len(tokens), len(tokens))
    assert tokens == tuple(model.tokenizer.convert_ids_to_tokens(enc["input_ids"][0]))
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert (weights - own).abs().max().item() < 1e-5


@pytest.mark.parametrize("text", SENTENCES)
def test_unscaled_is_scale_one_on_the_models_own_projections(model, text):
    tokens, unscaled = P.attention_weights(text, scaled=False)
    _, scaled = P.attention_weights(text, scaled=True)
    _, _, captured = own_forward(model, text)
    n = len(tokens)
    eye = torch.eye(n)                                                   # v = I: output = weights
    for layer in range(6):
        q = captured[(layer, "query")].view(n, 12, 32).transpose(0, 1)   # (heads, n, d_head)
        k = captured[(layer, "key")].view(n, 12, 32).transpose(0, 1)
        ref = F.scaled_dot_product_attention(q, k, eye.expand(12, n, n), scale=1.0)
        assert (unscaled[layer] - ref).abs().max().item() < 1e-5
        ref_scaled = F.scaled_dot_product_attention(q, k, eye.expand(12, n, n))
        assert (scaled[layer] - ref_scaled).abs().max().item() < 1e-5
    # The counterfactual is sharper: d_head = 32, so logits are sqrt(32) times larger.
    ent = lambda w: -torch.special.xlogy(w, w).sum(-1).mean().item()  # noqa: E731
    assert ent(unscaled) < ent(scaled)


def test_layer_qkv_shapes_and_values(model):
    text = SENTENCES[1]
    _, _, captured = own_forward(model, text)
    for layer in (0, 5):
        tokens, q, k, v = runs.layer_inputs(BUNDLED, text, layer)
        n = len(tokens)
        assert q.shape == k.shape == v.shape == (12, n, 32)
        assert tokens.count("cat") == 2 and tokens.count("the") == 4
        for name, got in (("query", q), ("key", k), ("value", v)):
            ref = captured[(layer, name)].view(n, 12, 32).transpose(0, 1)
            assert torch.allclose(got, ref, atol=1e-6)
    with pytest.raises(UserError) as err:
        runs.layer_inputs(BUNDLED, text, 6)
    assert err.value.key == "model.bad_layer"


def test_value_vectors_match_the_attention_output_dense(model):
    """sum_j alpha_ij f(x_j) summed over heads is the layer's attention output before b_O."""
    text = SENTENCES[0]
    r = runs.run(BUNDLED, text)
    layer = 2
    block = model.model.encoder.layer[layer]
    res = attention(r.q[layer], r.k[layer], r.v[layer])               # (heads, n, d_head)
    n = r.n
    context = res.output.transpose(0, 1).reshape(n, 12 * 32)            # (n, hidden)
    with torch.no_grad():
        ref = block.attention.output.dense(context) - block.attention.output.dense.bias
    f = model.value_vectors(r, layer)                                       # (heads, n, hidden)
    mine = (res.weights @ f).sum(0)                                     # (n, hidden)
    assert torch.allclose(mine, ref, atol=1e-4)
    alpha, norms, f_norm = runs.value_weighted(BUNDLED, text, layer, 3)
    assert torch.allclose(alpha, res.weights[3])
    i, j = 1, 4
    assert math.isclose(f_norm[j].item(), f[3, j].norm().item(), rel_tol=1e-6)
    assert math.isclose(norms[i, j].item(), (alpha[i, j] * f[3, j]).norm().item(), rel_tol=1e-5)


def test_too_long_text_is_a_user_error(model):
    with pytest.raises(UserError) as err:
        runs.run(BUNDLED, "word " * 600)
    assert err.value.key == "model.too_long"
    assert err.value.values == {"pieces": 602, "limit": 512, "name": BUNDLED}
    assert "602" in str(err.value) and "512" in str(err.value)


def test_model_loaded_once(model):
    P.attention_weights(SENTENCES[0])
    runs.layer_inputs(BUNDLED, SENTENCES[2], 1)
    assert load_model(BUNDLED) is model
    assert loading._bundled.cache_info().misses == 1


def test_transformers_is_not_imported_by_the_app_or_the_bundled_model():
    """App start, the pages' modules and a run of the bundled model (attention.models.bert) never
    import transformers: only a model of the user's own does."""
    import subprocess
    import sys

    from tests.apptest import ROOT

    code = ("import sys\n"
            "import attention.analysis, attention.pretrained, attention.measures.heads, attention.files.upload\n"
            "import attention.ui.layout, attention.ui.cache, attention.ui.model\n"
            "import attention.ui.views.model, attention.ui.views.upload\n"
            "import attention.charts.model\n"
            "assert 'transformers' not in sys.modules, 'transformers imported at start'\n"
            "from attention.models import runs\n"
            "runs.layer_inputs('all-MiniLM-L6-v2', 'a b', 0)\n"
            "assert 'transformers' not in sys.modules, 'transformers imported by MiniLM'\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def test_kept_runs_are_bounded_by_bytes_not_by_count(model):
    """Eight long texts' runs were kept by count (0.4 GB of a server's peak); now the bytes
    of the kept runs stay within RUN_BYTES, the latest run stays, and a repeat is a hit."""
    from attention.bounded import nbytes

    runs.RUNS.clear()
    words = "the cat sat on a mat".split()
    texts = [" ".join(words[(i + s) % 6] for i in range(340)) for s in range(6)]   # 342 pieces
    kept = [runs.run(BUNDLED, t) for t in texts]
    one = nbytes(kept[0])
    assert one > 30 * 2**20                           # ~6 x 12 x 342^2 weights + q, k, v
    assert runs.RUNS.total <= config.RUN_BYTES < len(texts) * one
    assert runs.run(BUNDLED, texts[-1]) is kept[-1]   # kept: the same object again
    assert runs.run(BUNDLED, texts[0]) is not kept[0]  # the oldest was dropped, run again
    torch.testing.assert_close(runs.run(BUNDLED, texts[0]).weights, kept[0].weights)
