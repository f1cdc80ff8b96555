"""Is a higher attention score better? Small training experiments that answer: no.

Task, "noisy evidence aggregation" (docs/science.md): each sample has 16 tokens of 10 features;
4 tokens are relevant. Feature 0 is a relevance cue r = 1[relevant] + 0.3 eps, feature 1 is
evidence e = 1[relevant] * 0.5 * y + eps for the label y = +-1, the other 8 are noise.
Averaging the evidence of the 4 relevant tokens is the best any model can do:
accuracy Phi(1) = 0.841; one relevant token (or uniform attention) gives Phi(0.5) = 0.691.

Model: one learned query q (d_k), keys x W_k, values x W_v, a linear readout of the
attended value, BCE loss, Adam lr 1e-2, fresh data each step. Every attention step goes
through `core.attention`; sharpening at test time multiplies the logits by m through the
core's `scale` argument, and "argmax" is a hard one-hot built from the core's scores.

1. sharpening_sweep: train one head, then sharpen it at test time (m = 0 ... 8, argmax).
2. scaling_sweep: train with and without 1/sqrt(d_k) for growing d_k.
3. leave_one_out_frame: each token's weight beside its leave-one-out effect on the output.

Speed: the heads of one sweep are trained side by side, as one stack of independent models
(a leading "model" dim on every parameter, the summed loss, one Adam over all): each head's
gradient is that of its own loss and Adam is elementwise, so this is the same as training
them one by one, with a fraction of the Python overhead.

Deterministic for a seed (explicit generators, no global RNG). The caller chooses the
number of torch threads; nothing here changes it.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attention.measures.rank import spearman
from attention import core

from attention.measures import rows as metrics
from attention.diskcache import Progress
from attention.experiment.task import ARGMAX, MULTIPLIERS, SharpeningStudy, multiplier_label

N_TOKENS, N_FEATURES, N_RELEVANT = 16, 10, 4
CUE_NOISE, SIGNAL = 0.3, 0.5
CUE, EVIDENCE = 0, 1                      # feature columns of the relevance cue and the evidence
D_V = 16                                  # value size (the readout's input)
LR = 1e-2
EVAL_SIZE, EVAL_SEED = 8192, 20_250_101   # held-out set: the same for every model and seed
EVAL_CHUNK = 1024                         # eval samples per forward pass (bounds memory at d_k 256)

SHARPEN_DK, SHARPEN_STEPS, SHARPEN_BATCH = 16, 300, 256
SCALING_DKS, SCALING_STEPS, SCALING_BATCH = (16, 64, 256), 250, 128
LEAVE_ONE_OUT_SAMPLES = 64                # eval samples in the weight-vs-leave-one-out view


@dataclass(frozen=True, eq=False)
class Examples:
    """Samples of the toy task (a training step's or the held-out set): not a glossary batch
    (texts padded for one forward pass, attention.importance.batch.Batch)."""
    x: torch.Tensor          # (..., b, n, features)
    y: torch.Tensor          # (..., b) in {0., 1.}; the label +-1 is 2y - 1
    relevant: torch.Tensor   # (..., b, n) bool, exactly N_RELEVANT True per sample


def make_batch(size: int, gen: torch.Generator) -> Examples:
    """Fresh samples of the task, drawn from `gen` only."""
    sign = torch.randint(0, 2, (size,), generator=gen).float() * 2 - 1          # (b,) +-1
    order = torch.rand(size, N_TOKENS, generator=gen).argsort(dim=-1)           # (b, n)
    relevant = order < N_RELEVANT                                               # (b, n) 4 True
    x = torch.randn(size, N_TOKENS, N_FEATURES, generator=gen)                  # (b, n, f)
    rel = relevant.float()                                                      # (b, n)
    x[..., CUE] = rel + CUE_NOISE * x[..., CUE]
    x[..., EVIDENCE] = rel * SIGNAL * sign[:, None] + x[..., EVIDENCE]
    return Examples(x=x, y=(sign > 0).float(), relevant=relevant)


def eval_batch() -> Examples:
    """The held-out evaluation set: fixed seed, never used for training."""
    return make_batch(EVAL_SIZE, torch.Generator().manual_seed(EVAL_SEED))


def generators(seed: int) -> tuple[torch.Generator, torch.Generator]:
    """Independent (initialisation, data) streams for a seed."""
    init_seed, data_seed = np.random.SeedSequence(seed).generate_state(2)
    return (torch.Generator().manual_seed(int(init_seed)),
            torch.Generator().manual_seed(int(data_seed)))


class Heads(torch.nn.Module):
    """A stack of independent one-query attention heads with a linear readout, one per seed.

    Model i sees the data of seeds[i]. q and k have unit variance per component at
    initialisation, so q.k has variance d_k: the situation 1/sqrt(d_k) is for. Heads of the
    same seed and d_k start from the same weights whether scaled or not."""

    def __init__(self, d_k: int, scaled: bool, seeds: Sequence[int]) -> None:
        super().__init__()
        self.d_k, self.scaled, self.seeds = d_k, scaled, tuple(seeds)
        parts = [self._init(d_k, generators(seed)[0]) for seed in self.seeds]
        for name in ("query", "w_k", "w_v", "readout", "bias"):
            setattr(self, name, torch.nn.Parameter(torch.stack([p[name] for p in parts])))
        # query (m, d_k), w_k (m, f, d_k), w_v (m, f, d_v), readout (m, d_v), bias (m,)

    @staticmethod
    def _init(d_k: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
        return {
            "query": torch.randn(d_k, generator=gen),                                    # (d_k,)
            "w_k": torch.randn(N_FEATURES, d_k, generator=gen) / math.sqrt(N_FEATURES),  # (f, d_k)
            "w_v": torch.randn(N_FEATURES, D_V, generator=gen) / math.sqrt(N_FEATURES),  # (f, d_v)
            "readout": torch.randn(D_V, generator=gen) / math.sqrt(D_V),                 # (d_v,)
            "bias": torch.zeros(()),
        }

    @property
    def scale(self) -> float:
        """The factor the heads train with: 1/sqrt(d_k), or 1 when unscaled."""
        return 1.0 / math.sqrt(self.d_k) if self.scaled else 1.0

    def attend(self, x: torch.Tensor, multiplier: float = 1.0,
               mask: torch.Tensor | None = None) -> tuple[core.AttentionResult, torch.Tensor]:
        """x: (m, b, n, f) -> the core's result (one query per sample, logits times the
        multiplier) and the values (m, b, n, d_v)."""
        models, b = x.shape[:2]
        # contiguous: a stride-0 q makes the backward q^T @ grad a slow batched GEMM
        q = self.query[:, None, None, :].expand(models, b, 1, self.d_k).contiguous()  # (m, b, 1, d_k)
        flat = x.reshape(models, -1, N_FEATURES)                            # (m, b*n, f)
        k = torch.bmm(flat, self.w_k).view(models, b, -1, self.d_k)        # (m, b, n, d_k)
        v = torch.bmm(flat, self.w_v).view(models, b, -1, D_V)             # (m, b, n, d_v)
        return core.attention(q, k, v, scale=self.scale * multiplier, mask=mask), v

    def predict(self, x: torch.Tensor, multiplier: float | str = 1.0,
              mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Output logits (m, b) and attention weights (m, b, n); multiplier may be ARGMAX."""
        result, v = self.attend(x, 1.0 if multiplier == ARGMAX else float(multiplier), mask)
        if multiplier == ARGMAX:
            pick = result.scores[..., 0, :].argmax(dim=-1)                  # (m, b)
            weights = torch.nn.functional.one_hot(pick, x.shape[-2]).to(x.dtype)  # (m, b, n)
            attended = (weights[..., None, :] @ v)[..., 0, :]               # (m, b, d_v)
        else:
            weights = result.weights[..., 0, :]                             # (m, b, n)
            attended = result.output[..., 0, :]                             # (m, b, d_v)
        logit = (attended * self.readout[:, None]).sum(-1) + self.bias[:, None]  # (m, b)
        return logit, weights


def train(stacks: Sequence[Heads], steps: int, batch: int,
          progress: Progress | None = None) -> None:
    """Train every stack in place on fresh batches; all stacks share the seeds' data streams."""
    seeds = stacks[0].seeds
    assert all(s.seeds == seeds for s in stacks), "stacks trained together share their seeds"
    data_gens = [generators(seed)[1] for seed in seeds]
    opt = torch.optim.Adam([p for s in stacks for p in s.parameters()], lr=LR, foreach=True)
    every = max(1, steps // 25)
    for step in range(steps):
        parts = [make_batch(batch, gen) for gen in data_gens]
        x = torch.stack([p.x for p in parts])                               # (m, b, n, f)
        y = torch.stack([p.y for p in parts])                               # (m, b)
        # Mean over each model's batch, summed over models: each model gets its own gradient.
        loss = sum(torch.nn.functional.binary_cross_entropy_with_logits(
            s.predict(x)[0], y, reduction="none").mean(-1).sum() for s in stacks)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if progress is not None and ((step + 1) % every == 0 or step + 1 == steps):
            progress((step + 1) / steps, "train")
    for s in stacks:
        s.eval()


@torch.no_grad()
def evaluate(heads: Heads, data: Examples, multiplier: float | str = 1.0) -> list[dict[str, float]]:
    """Per model: accuracy on `data` and how sharp its attention is (means over samples)."""
    sums = torch.zeros(4, len(heads.seeds), dtype=torch.float64)           # (stats, m)
    for start in range(0, data.x.shape[0], EVAL_CHUNK):
        chunk = slice(start, start + EVAL_CHUNK)
        x = data.x[chunk].expand(len(heads.seeds), -1, -1, -1)              # (m, c, n, f)
        logit, weights = heads.predict(x, multiplier)                       # (m, c), (m, c, n)
        sums += torch.stack([
            ((logit > 0).float() == data.y[chunk]).float().sum(-1),
            metrics.max_weight(weights).sum(-1),
            metrics.effective_tokens(weights).sum(-1),
            (weights * data.relevant[chunk]).sum(-1).sum(-1),
        ]).double()
    means = (sums / data.x.shape[0]).tolist()
    names = ("accuracy", "max_weight", "effective_tokens", "relevant_mass")
    return [dict(zip(names, column)) for column in zip(*means)]


SWEEP_COLUMNS = ["multiplier", "accuracy", "max_weight", "effective_tokens", "relevant_mass"]
SCALING_COLUMNS = ["d_k", "scaled", "seed", "accuracy", "max_weight", "effective_tokens"]


def trained_head(seed: int = 0, progress: Progress | None = None) -> Heads:
    """The sharpening experiment's head: d_k 16, scaled, 300 steps of 256."""
    head = Heads(SHARPEN_DK, True, (seed,))
    train([head], SHARPEN_STEPS, SHARPEN_BATCH, progress)
    return head


def sharpening_study(seed: int = 0, progress: Progress | None = None) -> SharpeningStudy:
    """Train one head, then sharpen it at test time; also its sample and leave-one-out views."""
    head = trained_head(seed, _part(progress, 0.0, 0.9))
    data = eval_batch()
    sweep = pd.DataFrame([{"multiplier": multiplier_label(m), **evaluate(head, data, m)[0]}
                          for m in (*MULTIPLIERS, ARGMAX)], columns=SWEEP_COLUMNS)
    leave_one_out = leave_one_out_frame(head, data, LEAVE_ONE_OUT_SAMPLES)
    within = [spearman(g["weight"], g["effect"]) for _, g in leave_one_out.groupby("sample")]
    if progress is not None:
        progress(1.0, "")
    return SharpeningStudy(
        seed=seed, sweep=sweep, sample=sample_frame(head, data, 0), leave_one_out=leave_one_out,
        spearman_pooled=spearman(leave_one_out["weight"], leave_one_out["effect"]),
        spearman_within=float(np.nanmean(within)) if not np.isnan(within).all() else math.nan,
    )


def sharpening_sweep(seed: int = 0, progress: Progress | None = None) -> pd.DataFrame:
    """One row per m in {0, 0.5, 1, 2, 4, 8, argmax}: multiplier, accuracy, max_weight,
    effective_tokens, relevant_mass (means over the held-out set)."""
    return sharpening_study(seed, progress).sweep


def scaling_sweep(seeds: tuple[int, ...] = (0, 1, 2),
                  progress: Progress | None = None) -> pd.DataFrame:
    """Train with and without 1/sqrt(d_k) for each d_k and seed (250 steps of 128).

    One row per (d_k, scaled, seed): accuracy, max_weight, effective_tokens."""
    seeds = tuple(int(s) for s in seeds)
    stacks = [Heads(d_k, scaled, seeds) for d_k in SCALING_DKS for scaled in (True, False)]
    train(stacks, SCALING_STEPS, SCALING_BATCH, _part(progress, 0.0, 0.95))
    data = eval_batch()
    rows = [{"d_k": s.d_k, "scaled": s.scaled, "seed": seed, **scores}
            for s in stacks for seed, scores in zip(s.seeds, evaluate(s, data))]
    if progress is not None:
        progress(1.0, "")
    return pd.DataFrame(rows)[SCALING_COLUMNS]


@torch.no_grad()
def sample_frame(head: Heads, data: Examples, index: int) -> pd.DataFrame:
    """One eval sample's attention over its tokens at m = 1 and at argmax (tidy rows)."""
    x = data.x[None, index:index + 1]                                   # (1, 1, n, f)
    parts = []
    for m in (1.0, ARGMAX):
        _, weights = head.predict(x, m)                                 # (1, 1, n)
        parts.append(pd.DataFrame({
            "multiplier": multiplier_label(m),
            "position": np.arange(N_TOKENS),
            "relevant": data.relevant[index].numpy(),
            "weight": weights[0, 0].numpy().astype(float),
        }))
    return pd.concat(parts, ignore_index=True)


@torch.no_grad()
def leave_one_out_frame(head: Heads, data: Examples, samples: int) -> pd.DataFrame:
    """Per (sample, token): its attention weight at m = 1 and its leave-one-out effect,
    |output logit - output logit with that token masked out| (the rest re-normalised)."""
    x = data.x[None, :samples]                                          # (1, s, n, f)
    full, weights = head.predict(x)                                     # (1, s), (1, s, n)
    effect = torch.empty(samples, N_TOKENS)                             # (s, n)
    for j in range(N_TOKENS):
        keep = torch.ones(N_TOKENS, dtype=torch.bool)                   # (n,) broadcast to rows
        keep[j] = False
        without, _ = head.predict(x, 1.0, keep)                         # (1, s)
        effect[:, j] = (full - without)[0].abs()
    ss, pp = np.meshgrid(np.arange(samples), np.arange(N_TOKENS), indexing="ij")
    return pd.DataFrame({
        "sample": ss.ravel(),
        "position": pp.ravel(),
        "relevant": data.relevant[:samples].numpy().ravel(),
        "weight": weights[0].numpy().astype(float).ravel(),
        "effect": effect.numpy().astype(float).ravel(),
    })


def _part(progress: Progress | None, start: float, end: float) -> Progress | None:
    """A callback for a sub-task that reports into [start, end] of the whole."""
    if progress is None:
        return None
    return lambda frac, stage: progress(start + (end - start) * frac, stage)
