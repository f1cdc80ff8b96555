"""Does the model use what it attends to? Attention set against what the model outputs.

    token_importance(model, texts, *, occlusion="remove", target=None, mask_at=None)
                                   -> DataFrame, one row per (text, piece)     (tokens.py)
    head_importance(model, texts)  -> DataFrame, one row per (layer, head)     (heads.py)
    pruning_curve, temperature_sweep, Metric (paraphrase retrieval or loss)    (heads.py)
    layer_agreement(tokens)        -> Spearman per layer, score and method     (tokens.py)
    agreement(table), faithfulness(model, texts)   intervals, null bands, ERASER
                                                   (concordance.py, erasure.py)

The target is what the model outputs (targets.py; docs/science.md "Targets and readouts"):

    model kind        target                       read from      occlusion of j
    sentence model    e, unit mean-pooled embedding mean of rows   1 - cos(e(text), e(text - j))
    causal LM         log p(t | text), t top next   the last row   drop in log p(t)
    masked LM         log p(piece at m | m masked)  row m          drop in that log p

gradient x input: ||J_j x_j|| (sentence model), d log p / dx_j . x_j (LMs); integrated
gradients: Captum's LayerIntegratedGradients on the word embeddings, on
s(x) = cos(e(x), e(text)) or the log p. Modules: batch (batched forwards, gates, chunks),
targets, tokens, heads, concordance (agreement), erasure (faithfulness), curves; the page's
results: product (the corpus job's per-text rows, `--what importance`), record (the page's
record assembled from them), live (a visitor's corpus computed while they wait), store
(keyed, shipped, read without torch; `python -m attention.corpus ship --importance`).

The face names the API a caller needs; the plumbing (batched forwards, single methods,
targets, the store) is imported from its module (`from attention.importance import batch`).
It imports no torch: the page's stored results (store.py) are read on a cold link without
it, and each function below imports its module when first called.
"""
from __future__ import annotations

__all__ = ["token_importance", "head_importance", "agreement", "faithfulness",
           "layer_agreement", "pruning_curve", "temperature_sweep"]


def token_importance(model, texts, *args, **options):
    """tokens.token_importance: one row per piece of every text."""
    from attention.importance import tokens

    return tokens.token_importance(model, texts, *args, **options)


def head_importance(model, texts, *args, **options):
    """heads.head_importance: one row per (layer, head)."""
    from attention.importance import heads

    return heads.head_importance(model, texts, *args, **options)


def agreement(table, *args, **options):
    """concordance.agreement: one row per method and layer, with intervals and null bands."""
    from attention.importance import concordance

    return concordance.agreement(table, *args, **options)


def faithfulness(model, texts, *args, **options):
    """erasure.faithfulness: ERASER comprehensiveness per fraction, with AOPC."""
    from attention.importance import erasure

    return erasure.faithfulness(model, texts, *args, **options)


def layer_agreement(tokens_table, *args, **options):
    """tokens.layer_agreement: Spearman per layer, score and method."""
    from attention.importance import tokens

    return tokens.layer_agreement(tokens_table, *args, **options)


def pruning_curve(model, heads_table, texts, *args, **options):
    """heads.pruning_curve: heads removed from least to most important, the metric."""
    from attention.importance import heads

    return heads.pruning_curve(model, heads_table, texts, *args, **options)


def temperature_sweep(model, texts, *args, **options):
    """heads.temperature_sweep: every head of a layer at temperature tau."""
    from attention.importance import heads

    return heads.temperature_sweep(model, texts, *args, **options)
