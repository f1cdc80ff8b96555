"""attention.models.bert (the bundled model without transformers) against transformers' own BertModel
with eager attention on the same checkpoints: the bundled MiniLM and a tiny random BERT."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache

import pytest
import torch

from attention import config
from attention.models import loading, registered
from attention.models import bert
from attention import models as M
from tests.tiny_models import tiny  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow     # MiniLM against transformers' BERT: left out of make test-fast

TEXTS = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Wait... what?! (Yes, really: \"no\"; maybe -- ok.) #1, $2 & 50%!",
    "Café naïve RÉSUMÉ façade",
    "注意力机制是什么 你好，世界！",
    "emoji 🙂👍🏽 and <b>html</b> <script>alert(1)</script>",
    "  tabs\tand\nnew lines  ",
    "unbelievably antidisestablishmentarianism " * 3,
    "a",
    "[MASK] is a [SEP] token",
]


@lru_cache(maxsize=4)
def eager(folder: str):
    from transformers import AutoModel

    return AutoModel.from_pretrained(folder, attn_implementation="eager").eval()


@lru_cache(maxsize=1)
def auto_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(M.bundled_path())


def padded_batch(tokenizer, texts):
    """(b, n) ids right-padded with [PAD], with token types and the attention mask."""
    rows = [tokenizer(t, return_tensors="pt") for t in texts]
    n = max(r["input_ids"].shape[1] for r in rows)
    out = {k: torch.zeros(len(rows), n, dtype=torch.long) for k in rows[0]}
    for b, r in enumerate(rows):
        for k, v in r.items():
            out[k][b, :v.shape[1]] = v[0]
    return out


def ours_and_theirs(folder, batch):
    """Ours and transformers' outputs; ours with the weights of batch element 0 that the
    core recorded, (layers, heads, n, n)."""
    model = bert.load_bert(folder)
    state = registered.Forward()
    token = registered.FORWARD.set(state)
    try:
        with torch.no_grad():
            mine = model(**batch)
    finally:
        registered.FORWARD.reset(token)
    with torch.no_grad():
        ref = eager(str(folder))(**batch, output_attentions=True)
    return mine, torch.stack(state.weights), ref


@pytest.mark.parametrize("which", ["bundled", "tiny"])
def test_hidden_states_and_attention_equal_transformers_eager(which, tiny):  # noqa: F811
    folder = M.bundled_path() if which == "bundled" else tiny["bert_base"]
    texts = ["a", *TEXTS[:2], TEXTS[3]]                    # element 0 is the padded one
    batch = padded_batch(bert.Tokenizer(M.bundled_path()), texts)
    real = batch["attention_mask"].bool()                  # (b, n)
    assert not real[0].all()
    mine, weights, ref = ours_and_theirs(folder, batch)
    # padded positions' states are unspecified; every real one must agree
    torch.testing.assert_close(mine.last_hidden_state[real], ref.last_hidden_state[real],
                               atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(mine.pooler_output, ref.pooler_output, atol=2e-5, rtol=1e-4)
    keep = real[0]
    theirs = torch.stack(ref.attentions)[:, 0]             # (layers, heads, n, n)
    assert weights.shape == theirs.shape
    torch.testing.assert_close(weights[..., keep, :][..., keep],
                               theirs[..., keep, :][..., keep], atol=1e-5, rtol=1e-4)
    assert float(weights[..., ~keep].abs().max()) == 0.0   # no weight on [PAD]


def test_parameters_are_transformers_bertmodel_s_one_for_one():
    mine = dict(bert.load_bert(M.bundled_path()).named_parameters())
    theirs = dict(eager(M.bundled_path()).named_parameters())
    assert mine.keys() == theirs.keys()
    for name, p in mine.items():
        assert torch.equal(p, theirs[name]), name


def test_gradients_through_the_input_embeddings_equal_transformers():
    """Importance reads gradients by hooking get_input_embeddings(): the same hook on both."""
    batch = padded_batch(bert.Tokenizer(M.bundled_path()), TEXTS[:1])

    def grad_of(model):
        leaf = {}

        def hook(_module, _args, out):
            leaf["x"] = out.detach().requires_grad_(True)
            return leaf["x"]

        handle = model.get_input_embeddings().register_forward_hook(hook)
        try:
            model(**batch).last_hidden_state[0, 0].sum().backward()
        finally:
            handle.remove()
        return leaf["x"].grad

    torch.testing.assert_close(grad_of(bert.load_bert(M.bundled_path())),
                               grad_of(eager(M.bundled_path())), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("text", TEXTS)
def test_tokenizer_equals_autotokenizer(text):
    mine, theirs = bert.Tokenizer(M.bundled_path()), auto_tokenizer()
    a = mine(text, return_tensors="pt", truncation=False, verbose=False)
    b = theirs(text, return_tensors="pt", truncation=False, verbose=False)
    assert a.keys() == set(b.keys())
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ids = a["input_ids"][0].tolist()
    assert mine(text) == dict(theirs(text))                  # lists without return_tensors
    assert mine.convert_ids_to_tokens(ids) == theirs.convert_ids_to_tokens(ids)
    pieces = theirs.convert_ids_to_tokens(ids) + ["not-a-piece-at-all"]
    assert mine.convert_tokens_to_ids(pieces) == theirs.convert_tokens_to_ids(pieces)


def test_tokenizer_special_tokens_and_size_equal_autotokenizer():
    mine, theirs = bert.Tokenizer(M.bundled_path()), auto_tokenizer()
    assert len(mine) == len(theirs)
    assert set(mine.all_special_ids) == set(theirs.all_special_ids)
    assert set(mine.all_special_tokens) == set(theirs.all_special_tokens)
    for role in ("unk", "sep", "pad", "cls", "mask"):
        assert getattr(mine, f"{role}_token") == getattr(theirs, f"{role}_token")
        assert getattr(mine, f"{role}_token_id") == getattr(theirs, f"{role}_token_id")
    assert mine.model_max_length == theirs.model_max_length
    long = "word " * 700                    # past 128 (the file's padding) and 512
    assert len(mine(long)["input_ids"]) == len(theirs(long)["input_ids"]) == 700 + 2


def test_the_bundled_loaded_model_matches_one_loaded_through_transformers():
    """models.load_model(BUNDLED) runs on attention.models.bert; the same folder through the
    transformers loader is the reference for everything the pages read of a run."""
    ours = M.load_model(M.BUNDLED)
    ref = loading._load("folder", M.bundled_path(), M.bundled_path(), config.policy())
    assert type(ours.model) is bert.BertModel and type(ref.model) is not bert.BertModel
    for field in ("layers", "heads", "kv_heads", "d_head", "hidden", "is_causal", "max_tokens",
                  "params", "special_ids", "architecture", "head"):
        assert getattr(ours, field) == getattr(ref, field), field
    for a, b in zip(ours.w_o, ref.w_o, strict=True):
        assert torch.equal(a, b)
    iv = (M.Intervention("ablate", 1, 3), M.Intervention("temperature", 2, None, 0.5))
    for text in TEXTS[:3]:
        for interventions in ((), iv):
            a, b = ours.run(text, interventions), ref.run(text, interventions)
            assert a.tokens == b.tokens
            torch.testing.assert_close(a.weights, b.weights, atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(a.embedding, b.embedding, atol=1e-5, rtol=1e-4)
            assert torch.equal(a.mask, b.mask) and torch.equal(a.sinks, b.sinks)


def test_loading_the_bundled_model_imports_neither_transformers_nor_dynamo():
    script = ("import json, sys\n"
              "from attention import models\n"
              "m = models.load_model(models.BUNDLED)\n"
              "m.run('the cat sat')\n"
              "print(json.dumps([n in sys.modules for n in "
              "('transformers', 'torch._dynamo', 'scipy.optimize')]))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": root})
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, False, False]


def test_a_config_this_encoder_does_not_implement_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert",
                                                      "hidden_act": "relu"}))
    with pytest.raises(ValueError, match="not a plain BERT"):
        bert.BertConfig.from_json(tmp_path / "config.json")


def test_attention_modules_return_output_and_weights_like_transformers():
    """Forward hooks on the module the core sees read (output, weights) on both models."""
    enc = bert.Tokenizer(M.bundled_path())("the cat sat", return_tensors="pt")
    seen = {}

    def run(model, key):
        module = model.encoder.layer[2].attention.self
        hook = module.register_forward_hook(lambda _m, _a, out: seen.__setitem__(key, out))
        try:
            with torch.no_grad():
                model(**enc)
        finally:
            hook.remove()

    run(bert.load_bert(M.bundled_path()), "ours")
    run(eager(M.bundled_path()), "theirs")
    for a, b in zip(seen["ours"], seen["theirs"], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
