"""Does the model use what it attends to? Attention set against importance on a loaded model.

    token_importance(model, texts) -> DataFrame   # one row per (text, token)
    head_importance(model, texts)  -> DataFrame   # one row per (layer, head)
    pruning_curve(model, order, texts) -> DataFrame
    temperature_sweep(model, texts) -> DataFrame
    layer_agreement(tokens) -> DataFrame          # Spearman per layer, the page's table

The output of a model ("the output" below) is a scalar or a vector chosen by its head:
    - sentence model (head "none"): the sentence embedding e = run.embedding (mean of the last
      hidden states, L2-normalised). A change is 1 - cos(e, e'). For gradients the cosine
      with itself is useless (its gradient at the input is 0: e stays a unit vector), so the
      scalar is ||mean of the last hidden states||, the length e is normalised from;
    - causal LM: the mean next-token NLL of the text (token t predicted from tokens < t);
    - masked LM: the mean NLL of every token read at its own position with nothing masked
      (one forward; a pseudo-likelihood would take n). A change is the difference of losses.

Token columns (l = layer index; the readout query is [CLS] / the first token for encoders,
the last token for causal models, the token the model's output is read from):
    occlusion         output change when the piece is removed from the ids (all n removals in
                      one batched forward). Sentence model: 1 - cos(e, e without it); LMs: the
                      mean loss of the *other* tokens without it minus with it (same targets)
    gradient          |grad . x_j| for x_j the piece's input (word) embedding
    attention_<l>     raw attention of layer l, mean over heads, from the readout query
    attention_mean_<l> the same averaged over every query (the column mean of the weights)
    rollout_<l>       rollout's row of the readout query after layer l (attention.measures.rollout)
    flow_<l>          attention flow of the readout query after layer l (flow.py); NaN when
                      the text has more than flow.MAX_PIECES pieces
    norm_<l>          Kobayashi's ||alpha_qj f(x_j)|| from the readout query, mean over heads
    rollout, flow     the last layer's rollout_<l>, flow_<l>

Head importance (Michel et al. 2019): each head's output slice at the output projection is
multiplied by a gate xi_h (forward pre-hooks). ablation = the output change with xi_h = 0
(all heads of a text in a few batched forwards, one batch element per head); gradient =
mean over texts of |d output / d xi_h| at xi = 1 (one backward per text for every head).
"""
from __future__ import annotations

import inspect
import math
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from attention.measures import flow as flowlib
from attention import models as M
from attention.models.capture import forward as model_forward
from attention.models.interventions import plans
from attention.models.registered import FORWARD, Forward
from attention import config
from attention.errors import UserError
from attention.measures.heads import head_stats
from attention.measures.rank import spearman
from attention.measures.rollout import rollout

BATCH_TOKENS = config.IMPORTANCE_BATCH_TOKENS
MAX_PIECES = config.IMPORTANCE_MAX_PIECES
MAX_TOTAL_PIECES = config.IMPORTANCE_MAX_TOTAL_PIECES
TAUS = tuple(float(2.0 ** e) for e in np.linspace(-2, 2, 7))   # 0.25 ... 4
PAIRS_FILE = config.DATA / "sentence_pairs.tsv"
SCORES = ("attention", "attention_mean", "rollout", "flow", "norm")
TARGETS = ("occlusion", "gradient")


# ---------------------------------------------------------------------------- batched forward


def readout(model: M.LoadedModel, n: int) -> int:
    """The query the output is read from: the last token of a causal model, else the first."""
    return n - 1 if model.is_causal else 0


@lru_cache(maxsize=8)
def _projections(model: M.LoadedModel) -> tuple:
    """Per layer the output projection module (its weight is model.w_o[l]), found by
    storage; a model without one cannot be gated."""
    by_ptr = {m.weight.data_ptr(): m for m in model.model.modules()
              if isinstance(getattr(m, "weight", None), torch.Tensor)}
    found = tuple(by_ptr.get(w.data_ptr()) if w is not None else None for w in model.w_o)
    if any(m is None for m in found):
        raise ValueError(f"{model.name}: no output projection found for every layer")
    return found


@lru_cache(maxsize=8)
def attention_modules(model: M.LoadedModel) -> tuple:
    """The attention modules in layer order (as the core sees them: a probe forward)."""
    state = Forward()
    model_forward(model.model, model.tokenizer("a b", return_tensors="pt"), state)
    return tuple(state.modules)


@contextmanager
def gated(model: M.LoadedModel, gate: torch.Tensor | None):
    """Inside, head h of layer l of batch element b has its output multiplied by
    gate[b, l, h] (gate (b, layers, heads), or (layers, heads) for every element)."""
    if gate is None:
        yield
        return
    hooks = []

    def hook_for(layer):
        def pre(_module, args):
            x = args[0]                                                # (b, n, heads * d_head)
            g = gate[..., layer, :]                                    # (b, heads) or (heads,)
            g = g.reshape(-1, 1, model.heads, 1) if g.ndim == 2 else g.view(1, 1, -1, 1)
            shaped = x.view(*x.shape[:-1], model.heads, model.d_head) * g.to(x.dtype)
            return (shaped.view_as(x), *args[1:])
        return pre

    try:
        for layer, module in enumerate(_projections(model)):
            hooks.append(module.register_forward_pre_hook(hook_for(layer)))
        yield
    finally:
        for h in hooks:
            h.remove()


@contextmanager
def expanded(model: M.LoadedModel, expand):
    """See `forward`'s expand: later layers broadcast the batch-1 mask and positions."""
    if expand is None:
        yield
        return
    layer, rows = expand

    def pre(_module, args):
        x = args[0]                                                    # (1, n, heads * d_head)
        copies = x.expand(rows.shape[0], *x.shape[1:])                 # (c, n, heads * d_head)
        shaped = copies.reshape(*copies.shape[:-1], model.heads, model.d_head)
        shaped = shaped * rows.to(x.dtype).view(-1, 1, model.heads, 1)
        return (shaped.reshape(copies.shape), *args[1:])

    hook = _projections(model)[layer].register_forward_pre_hook(pre)
    try:
        yield
    finally:
        hook.remove()


@lru_cache(maxsize=8)
def takes_token_types(model: M.LoadedModel) -> bool:
    """True when the tokenizer makes token_type_ids and the forward takes them (run() passes
    them: GPT-2 read with a BERT tokenizer adds the embedding of type 0)."""
    names = getattr(model.tokenizer, "model_input_names", ())
    return "token_type_ids" in names and \
        "token_type_ids" in inspect.signature(model.model.forward).parameters


@dataclass(frozen=True)
class Batch:
    ids: torch.Tensor        # (b, n) right-padded with 0
    real: torch.Tensor       # (b, n) bool


def batch_of(rows: list[list[int]]) -> Batch:
    n = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.long)
    real = torch.zeros(len(rows), n, dtype=torch.bool)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = torch.tensor(r, dtype=torch.long)
        real[b, :len(r)] = True
    return Batch(ids, real)


def forward(model: M.LoadedModel, batch: Batch, *, gate=None, interventions=(),
            grad: bool = False, embed_hook=None, expand=None):
    """One batched forward with the core inside: (logits (b, n, vocab) | None,
    last hidden states (b, n, hidden)). `interventions` apply to every element;
    `embed_hook(output)` may replace the input embeddings (e.g. with a leaf for gradients);
    expand = (layer, rows (c, heads)) turns a batch of 1 into c copies at that layer's
    output projection, copy i with its heads multiplied by rows[i] (results (c, n, ...))."""
    captured = {}

    def grab(_module, _args, output):
        captured["last"] = output[0] if isinstance(output, tuple) else output.last_hidden_state

    state = Forward(plans=plans(model.check(interventions), model.layers, model.heads),
                       record=False)
    hooks = [model.model.base_model.register_forward_hook(grab)]
    if embed_hook is not None:
        def on_ids(_module, args, out):      # not GPT-2's second call, on token types
            return embed_hook(out) if torch.equal(args[0], batch.ids) else None
        hooks.append(model.model.get_input_embeddings().register_forward_hook(on_ids))
    inputs = {"input_ids": batch.ids, "attention_mask": batch.real.long()}
    if takes_token_types(model):                # as LoadedModel.run passes the tokenizer's
        inputs["token_type_ids"] = torch.zeros_like(batch.ids)
    token = FORWARD.set(state)
    try:
        with torch.set_grad_enabled(grad), gated(model, gate), expanded(model, expand):
            out = model.model(**inputs)
    finally:
        FORWARD.reset(token)
        for h in hooks:
            h.remove()
    logits = out.logits if model.head != "none" else None
    return logits, captured["last"]


def pooled(last: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean of the last hidden states over real tokens: (b, hidden) from (b, n, hidden)."""
    w = real.to(last.dtype).unsqueeze(-1)                              # (b, n, 1)
    return (last * w).sum(dim=1) / w.sum(dim=1)


def token_nll(model: M.LoadedModel, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """(b, n) NLL of each token (causal: from the tokens before it; masked: at its own
    position); NaN where a token is not predicted (a causal model's first, padding)."""
    ids, real = batch.ids, batch.real
    nll = torch.full(ids.shape, float("nan"), dtype=logits.dtype)
    if model.is_causal:
        ce = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
        nll[:, 1:] = torch.where(real[:, 1:], ce, torch.nan)
    else:
        ce = F.cross_entropy(logits.transpose(1, 2), ids, reduction="none")
        nll = torch.where(real, ce, torch.nan)
    return nll


def output_of(model: M.LoadedModel, batch: Batch, **kwargs) -> torch.Tensor:
    """Per batch element: the unit sentence embedding (b, hidden) of a sentence model, the
    mean loss (b,) of an LM."""
    logits, last = forward(model, batch, **kwargs)
    return output_from(model, logits, last, batch)


def output_from(model: M.LoadedModel, logits, last, batch: Batch) -> torch.Tensor:
    if logits is None:
        return F.normalize(pooled(last, batch.real), dim=-1)
    return token_nll(model, logits, batch).nanmean(dim=1)


def change(model: M.LoadedModel, base: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """1 - cos for embeddings (rows unit length), other - base for losses."""
    if model.head == "none":
        return 1.0 - (other * base).sum(dim=-1)
    return other - base


def _chunks(count: int, length: int):
    size = max(1, BATCH_TOKENS // max(length, 1))
    for start in range(0, count, size):
        yield slice(start, min(count, start + size))


# ---------------------------------------------------------------------------- tokens


def ids_of(model: M.LoadedModel, text: str) -> list[int]:
    return model.encode(text)["input_ids"][0].tolist()


def check_texts(model: M.LoadedModel, texts) -> None:
    """UserError when a text (or all of them) has more pieces than this page measures
    (MAX_PIECES, MAX_TOTAL_PIECES), or when the model cannot read it (LoadedModel.encode)."""
    total = 0
    for index, text in enumerate(texts):
        n = len(ids_of(model, text))
        if n > MAX_PIECES:
            raise UserError("importance.too_long", text=index + 1, pieces=n, limit=MAX_PIECES)
        total += n
    if total > MAX_TOTAL_PIECES:
        raise UserError("importance.too_many_pieces", pieces=total, limit=MAX_TOTAL_PIECES)


def occlusion(model: M.LoadedModel, ids: list[int],
              run: M.ModelRun | None = None) -> torch.Tensor:
    """(n,) output change when each piece is removed; the n variants in batched forwards.
    run: the text's own `model.run` when the caller has it (its embedding or logits are the
    base, one forward fewer); None runs the base here."""
    n = len(ids)
    if n < 2:
        return torch.full((n,), float("nan"))
    variants = [ids[:j] + ids[j + 1:] for j in range(n)]              # n x (n - 1)
    full = batch_of([ids])
    if run is not None and tuple(ids) != run.ids:
        raise ValueError("occlusion: run is of other ids")
    if model.head == "none":
        base = output_of(model, full) if run is None else run.embedding[None]  # (1, hidden)
        outs = torch.cat([output_of(model, batch_of(variants[s]))
                          for s in _chunks(n, n - 1)])                 # (n, hidden)
        return change(model, base, outs).float()
    logits = forward(model, full)[0] if run is None else run.logits[None]   # (1, n, vocab)
    base = token_nll(model, logits, full)[0]                           # (n,)
    out = torch.empty(n)
    for s in _chunks(n, n - 1):
        part = batch_of(variants[s])
        logits, _ = forward(model, part)
        nll = token_nll(model, logits, part)                           # (k, n - 1)
        for row, j in enumerate(range(s.start, s.stop)):
            keep = [i for i in range(n) if i != j]                     # original positions
            mine = torch.full((n,), float("nan"))
            mine[keep] = nll[row]
            both = ~torch.isnan(mine) & ~torch.isnan(base)
            out[j] = (mine[both].mean() - base[both].mean()) if both.any() else float("nan")
    return out


def scalar_output(model: M.LoadedModel, logits, last, batch: Batch) -> torch.Tensor:
    """The differentiable scalar of one text: ||mean last hidden|| for a sentence model,
    the mean loss for an LM (see the module docstring)."""
    if logits is None:
        return pooled(last, batch.real)[0].norm()
    return token_nll(model, logits, batch)[0].nanmean()


def gradients(model: M.LoadedModel, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward and backward of a text: gradient x input (n,) = |grad . x_j| on the input
    embeddings, and |d output / d xi| (layers, heads) for the head gates at 1."""
    batch = batch_of([ids])
    gate = torch.ones(model.layers, model.heads, requires_grad=True)
    leaf = {}

    def as_leaf(out):
        leaf["x"] = out.detach().requires_grad_(True)                  # (1, n, hidden)
        return leaf["x"]

    logits, last = forward(model, batch, gate=gate, grad=True, embed_hook=as_leaf)
    y = scalar_output(model, logits, last, batch)
    gx, gg = torch.autograd.grad(y, (leaf["x"], gate))
    return (gx[0] * leaf["x"][0]).sum(dim=-1).abs().detach(), gg.abs().detach()


def attention_scores(model: M.LoadedModel, run: M.ModelRun) -> dict[str, torch.Tensor]:
    """name -> (layers, n): the attention-based scores of every token (module docstring)."""
    q = readout(model, run.n)
    w = run.weights                                                    # (layers, heads, n, n)
    scores = {
        "attention": w[:, :, q].mean(dim=1),
        "attention_mean": w.mean(dim=(1, 2)),
        "rollout": rollout(w)[:, q],
        "flow": flowlib.attention_flow(w, q),
    }
    norms = []
    for layer in range(model.layers):
        f = model.value_vectors(run, layer)                            # (heads, n, hidden)
        norms.append(torch.full((run.n,), float("nan")) if f is None
                     else (w[layer, :, q] * f.norm(dim=-1)).mean(dim=0))
    scores["norm"] = torch.stack(norms)
    return scores


def token_importance(model: M.LoadedModel, texts) -> pd.DataFrame:
    """One row per piece of every text (special pieces included): text (index), position,
    token, special (a tokenizer special piece), occlusion, gradient and the attention-based
    columns of the module docstring."""
    frames = []
    for index, text in enumerate(texts):
        run = model.run(text)
        ids = list(run.ids)
        grad, _ = gradients(model, ids)
        frame = pd.DataFrame({"text": index, "position": range(run.n), "token": run.tokens,
                              "special": [i in model.special_ids for i in ids],
                              "occlusion": occlusion(model, ids, run).numpy(),
                              "gradient": grad.numpy()})
        for name, values in attention_scores(model, run).items():
            for layer in range(model.layers):
                frame[f"{name}_{layer}"] = values[layer].numpy()
        last = model.layers - 1
        frame["rollout"] = frame[f"rollout_{last}"]
        frame["flow"] = frame[f"flow_{last}"]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def layer_agreement(tokens: pd.DataFrame, *, words_only: bool = False) -> pd.DataFrame:
    """Per layer, score and target: Spearman of the attention-based score with occlusion and
    with gradient x input, computed per text and averaged over the texts where it is defined
    (as Abnar and Zuidema average over examples). Columns layer, score, target, spearman,
    texts (how many texts the mean is over). words_only: leave out special pieces ([CLS],
    [SEP], ...), where rollout piles up weight that occlusion does not reward."""
    if words_only:
        tokens = tokens[~tokens["special"]]
    layers = sorted(int(c.rsplit("_", 1)[1]) for c in tokens if c.startswith("rollout_"))
    rows = []
    for layer in layers:
        for score in SCORES:
            for target in TARGETS:
                per_text = [spearman(g[f"{score}_{layer}"], g[target])
                            for _, g in tokens.groupby("text")]
                got = [r for r in per_text if not math.isnan(r)]
                rows.append({"layer": layer, "score": score, "target": target,
                             "spearman": float(np.mean(got)) if got else float("nan"),
                             "texts": len(got)})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- heads


def head_ablation(model: M.LoadedModel, ids: list[int]) -> torch.Tensor:
    """(layers, heads) output change of one text with each head zeroed. Per layer one
    forward: batch 1 up to that layer's output projection, where the input is copied once
    per head with that head zeroed (layers below are computed once, not per head)."""
    full = batch_of([ids])
    base = output_of(model, full)
    copies = Batch(full.ids.expand(model.heads, -1), full.real.expand(model.heads, -1))
    rows = 1.0 - torch.eye(model.heads)                                # (heads, heads)
    out = []
    for layer in range(model.layers):
        logits, last = forward(model, full, expand=(layer, rows))
        out.append(change(model, base, output_from(model, logits, last, copies)))
    return torch.stack(out).float()                                    # (layers, heads)


def head_importance(model: M.LoadedModel, texts) -> pd.DataFrame:
    """One row per (layer, head): ablation and gradient (module docstring), entropy and
    max_weight (mean over rows, then over texts), each a mean over the texts."""
    ablation, grad, entropy, sharp = [], [], [], []
    for text in texts:
        run = model.run(text)
        ids = list(run.ids)
        ablation.append(head_ablation(model, ids))
        grad.append(gradients(model, ids)[1])
        stats = head_stats(run.weights, run.tokens)
        entropy.append(stats["entropy"])
        sharp.append(stats["max_weight"])
    ll, hh = torch.meshgrid(torch.arange(model.layers), torch.arange(model.heads), indexing="ij")
    mean = lambda xs: torch.stack(xs).mean(dim=0).flatten().numpy()  # noqa: E731
    return pd.DataFrame({"layer": ll.flatten().numpy(), "head": hh.flatten().numpy(),
                         "ablation": mean(ablation), "gradient": mean(grad),
                         "entropy": mean(entropy), "max_weight": mean(sharp)})


# ---------------------------------------------------------------------------- output metric


@dataclass(frozen=True)
class Pairs:
    first: tuple[str, ...]
    second: tuple[str, ...]
    label: tuple[int, ...]       # 1 = paraphrase, 0 = not


@lru_cache(maxsize=1)
def sentence_pairs(path: str = str(PAIRS_FILE)) -> Pairs:
    """The project's sentence pairs (attention/data/sentence_pairs.tsv, see its README)."""
    first, second, label = [], [], []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        a, b, y = line.split("\t")
        if y == "label":
            continue
        first.append(a)
        second.append(b)
        label.append(int(y))
    return Pairs(tuple(first), tuple(second), tuple(label))


def ranking_accuracy(similarity, label) -> float:
    """Share of (paraphrase, non-paraphrase) pairs of pairs in which the paraphrase pair has
    the higher similarity (ties count half): the ROC AUC of the similarities."""
    s, y = np.asarray(similarity, dtype=float), np.asarray(label)
    pos, neg = s[y == 1], s[y == 0]
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


class Metric:
    """The output metric of the pruning curve and the temperature sweep, higher = better:
    a sentence model's ranking accuracy on the sentence pairs; an LM's negative mean loss
    over the texts. `__call__(gate, interventions)` also returns the mean max weight per
    layer (over heads and real query rows)."""

    def __init__(self, model: M.LoadedModel, texts) -> None:
        self.model = model
        if model.head == "none":
            pairs = sentence_pairs()
            self.name = "ranking_accuracy"
            sentences = sorted({*pairs.first, *pairs.second})      # each once
            where = {text: i for i, text in enumerate(sentences)}
            self.left = torch.tensor([where[text] for text in pairs.first])
            self.right = torch.tensor([where[text] for text in pairs.second])
            self.label = pairs.label
        else:
            self.name = "negative_loss"
            sentences = list(texts)
        self.batch = batch_of([ids_of(model, s) for s in sentences])

    def __call__(self, gate=None, interventions=()) -> tuple[float, np.ndarray]:
        model, batch = self.model, self.batch
        sharp = []

        def grab(_module, _args, out):
            w = out[1]                                                 # (b, heads, n, n)
            rows = w.amax(dim=-1).mean(dim=1)                          # (b, n)
            sharp.append(float(rows[batch.real].mean()))

        hooks = [m.register_forward_hook(grab) for m in attention_modules(model)]
        try:
            out = output_of(model, batch, gate=gate, interventions=interventions)
        finally:
            for h in hooks:
                h.remove()
        if model.head == "none":
            sims = (out[self.left] * out[self.right]).sum(dim=-1).numpy()
            value = ranking_accuracy(sims, self.label)
        else:
            value = -float(out.mean())
        return value, np.asarray(sharp)


def pruning_curve(model: M.LoadedModel, heads: pd.DataFrame, texts, *,
                  by: str = "ablation", steps: int = 12) -> pd.DataFrame:
    """Remove heads from least to most important (`heads[by]` ascending) and measure the
    metric: columns removed, metric, metric_name; about `steps` points from 0 to all."""
    metric = Metric(model, texts)
    order = heads.sort_values(by, kind="stable")[["layer", "head"]].to_numpy()
    count = len(order)
    points = sorted({*range(0, count + 1, max(1, count // steps)), count})
    rows = []
    for k in points:
        gate = torch.ones(model.layers, model.heads)
        for layer, head in order[:k]:
            gate[layer, head] = 0.0
        value, _ = metric(gate=gate)
        rows.append({"removed": k, "metric": value, "metric_name": metric.name})
    return pd.DataFrame(rows)


def temperature_sweep(model: M.LoadedModel, texts, layers=None, taus=TAUS) -> pd.DataFrame:
    """Every head of one layer at temperature tau (the "temperature" intervention), for each
    of `layers` (None = all) and tau: columns layer, tau, metric, max_weight (that layer's
    mean max weight), metric_name. One batched forward of the metric's sentences per point."""
    metric = Metric(model, texts)
    rows = []
    for layer in range(model.layers) if layers is None else layers:
        for tau in taus:
            value, sharp = metric(interventions=(M.Intervention("temperature", layer=layer,
                                                                value=float(tau)),))
            rows.append({"layer": layer, "tau": float(tau), "metric": value,
                         "max_weight": float(sharp[layer]), "metric_name": metric.name})
    return pd.DataFrame(rows)
