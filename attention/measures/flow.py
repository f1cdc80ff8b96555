"""Attention flow (Abnar and Zuidema 2020): how much of a query's attention can reach each
input token through the layers, as a maximum flow.

The graph has one node per (level, position), level 0 the input tokens and level l + 1 the
output of layer l. Node (l + 1, i) has an edge to (l, j) with capacity A_l[i, j], where
A_l = rownorm(0.5 * mean_heads(W_l) + 0.5 * I) is the same matrix attention rollout multiplies
(attention.measures.rollout). The flow of token j for a query i after layer l is the maximum flow
from (l + 1, i) to (0, j); as in the authors' code, the n values of a query are then
normalised to sum to 1. After one layer the flow equals rollout's row (a single edge).

Max-flow is scipy's (`scipy.sparse.csgraph.maximum_flow`, Dinic) on integer capacities:
each capacity is rounded to a multiple of 1 / SCALE (2**24), so a flow value is off by at
most (edges in its minimum cut) / (2 * SCALE), below 1.2e-4 at 64 pieces and typically
about 1e-7. It costs one max-flow per (layer, input token), so `flow` is computed only up to
MAX_PIECES pieces (NaN beyond: see `attention_flow`).
"""
from __future__ import annotations

import numpy as np
import torch

from attention.config import FLOW_MAX_PIECES
from attention.measures.rollout import residual_attention

SCALE = 2 ** 24          # capacities in units of 1 / SCALE (int32: at most 2**31 - 1)
MAX_PIECES = FLOW_MAX_PIECES


def flow_capacities(weights: torch.Tensor) -> np.ndarray:
    """A_l = rownorm(0.5 * mean_heads(W_l) + 0.5 * I), float64 (layers, n, n), from weights
    (layers, heads, n, n): the matrices of rollout."""
    return residual_attention(weights.double()).numpy()               # (layers, n, n)


def _graph(capacities: np.ndarray) -> csr_matrix:
    """The layered graph as an int32 CSR matrix over (layers + 1) * n nodes, node
    level * n + position; edges from level l + 1 down to level l."""
    layers, n, _ = capacities.shape
    rows, cols, caps = [], [], []
    for layer in range(layers):
        ints = np.rint(capacities[layer] * SCALE).astype(np.int64)     # (n, n)
        i, j = np.nonzero(ints)
        rows.append((layer + 1) * n + i)
        cols.append(layer * n + j)
        caps.append(ints[i, j])
    size = (layers + 1) * n
    from scipy.sparse import csr_matrix   # lazily: docs/architecture.md, "Imports"
    return csr_matrix((np.concatenate(caps).astype(np.int32),
                       (np.concatenate(rows), np.concatenate(cols))), shape=(size, size))


def max_flow_value(graph: csr_matrix, source: int, sink: int) -> float:
    """The maximum flow from node `source` to node `sink`, in capacity units (1 = 1.0)."""
    from scipy.sparse.csgraph import maximum_flow   # lazily: docs/architecture.md, "Imports"
    return maximum_flow(graph, source, sink).flow_value / SCALE


def attention_flow(weights: torch.Tensor, query: int) -> torch.Tensor:
    """Flow from `query` to every input token after each layer: (layers, n) float32, each
    row summing to 1. weights: (layers, heads, n, n), rows over keys. NaN everywhere when
    n > MAX_PIECES."""
    layers, _, n, _ = weights.shape
    if n > MAX_PIECES:
        return torch.full((layers, n), float("nan"))
    graph = _graph(flow_capacities(weights))
    out = np.zeros((layers, n))
    for layer in range(layers):
        source = (layer + 1) * n + query
        for j in range(n):
            out[layer, j] = max_flow_value(graph, source, j)
    total = out.sum(axis=1, keepdims=True)                             # (layers, 1)
    return torch.from_numpy(out / np.where(total > 0, total, 1.0)).float()
