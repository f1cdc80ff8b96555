"""attention.measures.flow: max-flow through the layer graph equals networkx's max-flow on the same
graph (hand-made and random), its first layer equals rollout's row, and rollout itself is
still R_l = A_l R_(l-1)."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from attention.measures import flow
from attention.measures.rollout import rollout


def reference_flow(weights: torch.Tensor, query: int) -> np.ndarray:
    """networkx max-flow, float capacities, graph built here from the definition."""
    layers, _, n, _ = weights.shape
    w = weights.double().mean(dim=1).numpy()                          # (layers, n, n)
    g = nx.DiGraph()
    for layer in range(layers):
        a = 0.5 * w[layer] + 0.5 * np.eye(n)
        a = a / a.sum(axis=1, keepdims=True)
        for i in range(n):
            for j in range(n):
                g.add_edge((layer + 1, i), (layer, j), capacity=float(a[i, j]))
    out = np.zeros((layers, n))
    for layer in range(layers):
        for j in range(n):
            out[layer, j] = nx.maximum_flow_value(g, (layer + 1, query), (0, j))
    return out


def test_hand_made_two_layer_graph():
    # 3 tokens, 1 head: layer 0 sends everything from token 2 to token 0, layer 1 is flat
    w0 = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    w1 = torch.full((3, 3), 1 / 3)
    weights = torch.stack([w0, w1]).unsqueeze(1)                       # (2, 1, 3, 3)
    ref = reference_flow(weights, query=2)
    # by hand: A_0 = rownorm(0.5 W + 0.5 I) = [[1,0,0],[.25,.75,0],[.5,0,.5]];
    # A_1 = [[2/3,1/6,1/6],[1/6,2/3,1/6],[1/6,1/6,2/3]]. Flow 2 -> token 1 after two layers:
    # only through node (1,1), whose edge to (0,1) carries .75, fed by 1/6 from (2,2).
    assert ref[1, 1] == pytest.approx(1 / 6)
    # to token 0: 1/6 via (1,0), min(1/6, .25) via (1,1), min(2/3, .5) via (1,2) = 5/6
    assert ref[1, 0] == pytest.approx(5 / 6)
    got = flow.attention_flow(weights, query=2)
    expected = ref / ref.sum(axis=1, keepdims=True)
    assert np.allclose(got.numpy(), expected, atol=1e-6)
    graph = flow._graph(flow.flow_capacities(weights))
    assert flow.max_flow_value(graph, 2 * 3 + 2, 1) == pytest.approx(1 / 6, abs=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_equal_networkx(seed):
    gen = torch.Generator().manual_seed(seed)
    layers, heads, n = 1 + seed % 3, 2, 3 + seed
    weights = torch.softmax(3 * torch.randn(layers, heads, n, n, generator=gen), dim=-1)
    query = seed % n
    ref = reference_flow(weights, query)
    got = flow.attention_flow(weights, query).double().numpy()
    assert np.allclose(got, ref / ref.sum(axis=1, keepdims=True), atol=1e-5)


def test_first_layer_is_rollouts_row_and_long_texts_are_nan(monkeypatch):
    weights = torch.softmax(torch.randn(3, 2, 5, 5, generator=torch.Generator().manual_seed(1)),
                            dim=-1)
    got = flow.attention_flow(weights, query=0)
    assert torch.allclose(got[0], rollout(weights)[0, 0], atol=1e-6)
    assert torch.allclose(got.sum(dim=1), torch.ones(3), atol=1e-6)
    monkeypatch.setattr(flow, "MAX_PIECES", 4)
    assert torch.isnan(flow.attention_flow(weights, query=0)).all()


def test_rollout_unchanged():
    weights = torch.softmax(torch.randn(3, 4, 6, 6, generator=torch.Generator().manual_seed(2)),
                            dim=-1)
    r = torch.eye(6)
    for layer in range(3):
        a = 0.5 * weights[layer].mean(dim=0) + 0.5 * torch.eye(6)
        r = (a / a.sum(dim=1, keepdim=True)) @ r
        assert torch.allclose(rollout(weights)[layer], r, atol=1e-6)
