"""What an intervention changes at a model's output, as small tables: pure torch and pandas.

    top_k(logits, k)                   the k most likely tokens and their probabilities
    kl_divergence(before, after)       KL(P_before || P_after) of two logit rows, in nats
    token_losses(logits, ids)          the causal LM loss of each next token, in nats
    compare_top(before, after, ...)    top-k before and after side by side
    cosine_table(embeddings)           pairwise cosine similarities of sentence embeddings

The model runs (before: no intervention; after: with it) come from `models.LoadedModel.run`;
nothing here runs a model.
"""
from __future__ import annotations

from typing import Callable, Sequence

import pandas as pd
import torch

TOP_K = 5


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """log softmax over the last dimension (vocabulary), in float64 for stable differences."""
    return torch.log_softmax(logits.to(torch.float64), dim=-1)


def top_k(logits: torch.Tensor, k: int = TOP_K) -> list[tuple[int, float]]:
    """(token id, probability) of the k largest probabilities of one logit row (vocab,)."""
    probs = log_probs(logits).exp()                                      # (vocab,)
    values, ids = probs.topk(min(k, probs.shape[-1]))
    return [(int(i), float(p)) for i, p in zip(ids, values)]


def kl_divergence(before: torch.Tensor, after: torch.Tensor) -> float:
    """KL(P || Q) = sum_v P(v) (ln P(v) - ln Q(v)) for P = softmax(before), Q = softmax(after),
    two logit rows (vocab,). 0 when the intervention changed nothing."""
    p, q = log_probs(before), log_probs(after)
    return float((p.exp() * (p - q)).sum().clamp_min(0.0))


LOSS_ROWS = 32      # rows of logits per float64 log-softmax (32 x 49,152 x 8 bytes: 12.6 MB)


def token_losses(logits: torch.Tensor, ids: Sequence[int]) -> torch.Tensor:
    """-ln P(token i+1 | tokens <= i) for i = 0..n-2: logits (n, vocab), ids (n,) -> (n-1,).
    LOSS_ROWS rows at a time: the whole (n-1, vocab) in float64 is 99 MB for SmolLM2 at 252
    pieces, made twice per outcome."""
    targets = torch.as_tensor(list(ids)[1:], dtype=torch.long)          # (n-1,)
    parts = []
    for start in range(0, len(targets), LOSS_ROWS):
        lp = log_probs(logits[start:min(start + LOSS_ROWS, len(targets))])  # (rows, vocab)
        parts.append(-lp.gather(1, targets[start:start + LOSS_ROWS].unsqueeze(1)).squeeze(1))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def compare_top(before: torch.Tensor, after: torch.Tensor, decode: Callable[[int], str],
                k: int = TOP_K) -> pd.DataFrame:
    """One row per rank: the token and probability before and after, and each before-token's
    probability after (where its mass went)."""
    p_after = log_probs(after).exp()                                     # (vocab,)
    rows = []
    for rank, ((b_id, b_p), (a_id, a_p)) in enumerate(zip(top_k(before, k), top_k(after, k)), 1):
        rows.append({"rank": rank, "before": decode(b_id), "p_before": b_p,
                     "p_before_after": float(p_after[b_id]),
                     "after": decode(a_id), "p_after": a_p})
    return pd.DataFrame(rows)


def loss_table(before: torch.Tensor, after: torch.Tensor, ids: Sequence[int],
               tokens: Sequence[str]) -> pd.DataFrame:
    """Per next token of the text: its position, text, loss before and after (nats)."""
    return losses_frame(token_losses(before, ids), token_losses(after, ids), tokens)


def losses_frame(lb: torch.Tensor, la: torch.Tensor, tokens: Sequence[str]) -> pd.DataFrame:
    """loss_table from the losses (n-1,) before and after (token_losses)."""
    return pd.DataFrame({"position": range(1, len(tokens)), "token": list(tokens[1:]),
                         "loss_before": lb.numpy(), "loss_after": la.numpy(),
                         "change": (la - lb).numpy()})


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """cos(a, b) of two vectors (hidden,); 0 when either is zero."""
    a, b = a.to(torch.float64), b.to(torch.float64)
    denom = a.norm() * b.norm()
    return float(a @ b / denom) if float(denom) > 0 else 0.0


def cosine_table(embeddings: torch.Tensor) -> torch.Tensor:
    """(s, hidden) -> (s, s) float64 pairwise cosines."""
    e = embeddings.to(torch.float64)
    e = e / e.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    return e @ e.T


def similarity_frame(before: torch.Tensor, after: torch.Tensor,
                     labels: Sequence[str]) -> pd.DataFrame:
    """Every pair i < j of sentences: labels, cosine before, after and the change.
    before, after: (s, hidden) embeddings of the same sentences."""
    cb, ca = cosine_table(before), cosine_table(after)                  # (s, s)
    rows = [{"a": labels[i], "b": labels[j], "cos_before": float(cb[i, j]),
             "cos_after": float(ca[i, j]), "change": float(ca[i, j] - cb[i, j])}
            for i in range(len(labels)) for j in range(i + 1, len(labels))]
    return pd.DataFrame(rows, columns=["a", "b", "cos_before", "cos_after", "change"])


def sentences(text: str, limit: int) -> list[str]:
    """The non-empty lines of `text` (stripped), at most `limit`."""
    return [line.strip() for line in text.splitlines() if line.strip()][:limit]
