"""graphflat's layers against PyG's own: the same weights on the same graph give the same
outputs, to 1e-5. ``GCNConv`` gets this project's normalization as edge weights (with the
self-loops as edges); ``RGCNConv`` runs on one node type with several relations; ``GINEConv``
without edge features gets zero edge features (its message is then ``ReLU(x_u)``, as ours)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.nn import GATConv, GCNConv, GINEConv, RGCNConv, SAGEConv

from graphflat.pyg.layers import Edges, GATLayer, GCNLayer, GINELayer, RGCNLayer, SAGELayer

TOLERANCE = 1e-5
NODES, EDGES, IN, OUT, EDGE_DIM = 40, 160, 6, 5, 3


@pytest.fixture
def graph():
    """A random graph with parallel edges, self-edges and nodes without in-edges."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(NODES, IN, generator=g)
    edge_index = torch.randint(0, NODES - 5, (2, EDGES), generator=g)  # the last 5 get none
    attr = torch.randn(EDGES, EDGE_DIM, generator=g)
    edge_type = torch.randint(0, 3, (EDGES,), generator=g)
    return x, edge_index, attr, edge_type


def randomized(module: torch.nn.Module) -> torch.nn.Module:
    """The module with every parameter random (biases too, so that they are compared), small
    enough that outputs stay near 1 and 1e-5 is float32 rounding, not a loose bound."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(0.3 * torch.randn_like(p))
    return module


def close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    torch.testing.assert_close(ours, theirs, atol=TOLERANCE, rtol=0)


def test_gcn_equals_gcnconv_given_our_normalization(graph) -> None:
    x, edge_index, _, _ = graph
    degree = torch.randint(0, 30, (NODES,)).clamp(max=10)  # whole-graph in-degrees, capped
    norm = degree.float() + 1
    ours = randomized(GCNLayer(IN, OUT))
    src, dst = edge_index
    loops = torch.arange(NODES)
    weights = torch.cat([(norm[src] * norm[dst]).rsqrt(), 1 / norm])
    theirs = GCNConv(IN, OUT, add_self_loops=False, normalize=False)
    with torch.no_grad():
        theirs.lin.weight.copy_(ours.weight.T)
        theirs.bias.copy_(ours.bias)
    expected = theirs(x, torch.stack([torch.cat([src, loops]), torch.cat([dst, loops])]), weights)
    close(ours(x, Edges(src, dst, NODES, norm=norm)), expected)


def test_sage_equals_sageconv(graph) -> None:
    x, edge_index, _, _ = graph
    ours = randomized(SAGELayer(IN, OUT))
    theirs = SAGEConv(IN, OUT, aggr="mean")
    with torch.no_grad():
        theirs.lin_l.weight.copy_(ours.neighbor_weight.T)
        theirs.lin_l.bias.copy_(ours.bias)
        theirs.lin_r.weight.copy_(ours.self_weight.T)
    close(ours(x, Edges(edge_index[0], edge_index[1], NODES)), theirs(x, edge_index))


@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("edge_dim", [0, EDGE_DIM])
def test_gat_equals_gatconv(graph, concat: bool, edge_dim: int) -> None:
    x, edge_index, attr, _ = graph
    # GATConv drops a graph's own self-edges before it adds a self-loop per node; graphflat's GAT
    # keeps them as in-edges (the records hold them), so the graph here has none.
    kept = edge_index[0] != edge_index[1]
    edge_index, attr = edge_index[:, kept], attr[kept]
    heads = 3
    ours = randomized(GATLayer(IN, OUT, heads, concat, edge_dim))
    theirs = GATConv(IN, OUT, heads=heads, concat=concat, edge_dim=edge_dim or None, fill_value="mean")
    with torch.no_grad():
        theirs.lin.weight.copy_(ours.weight.T)
        theirs.att_src.copy_(ours.att_src[None])
        theirs.att_dst.copy_(ours.att_dst[None])
        theirs.bias.copy_(ours.bias)
        if edge_dim:
            theirs.lin_edge.weight.copy_(ours.edge_weight.T)
            theirs.att_edge.copy_(ours.att_edge[None])
    edges = Edges(edge_index[0], edge_index[1], NODES, attr if edge_dim else None)
    expected = theirs(x, edge_index, attr if edge_dim else None)
    close(ours.eval()(x, edges), expected)


@pytest.mark.parametrize("edge_dim", [0, EDGE_DIM])
def test_gine_equals_gineconv(graph, edge_dim: int) -> None:
    x, edge_index, attr, _ = graph
    width = 7  # the MLP's hidden width, max(hidden, out) in a model
    ours = randomized(GINELayer(IN, width, OUT, edge_dim))
    mlp = torch.nn.Sequential(torch.nn.Linear(IN, width), torch.nn.ReLU(), torch.nn.Linear(width, OUT))
    theirs = GINEConv(mlp, edge_dim=edge_dim or None)
    with torch.no_grad():
        mlp[0].weight.copy_(ours.weight.T)
        mlp[0].bias.copy_(ours.bias)
        mlp[2].weight.copy_(ours.weight2.T)
        mlp[2].bias.copy_(ours.bias2)
        if edge_dim:
            theirs.lin.weight.copy_(ours.edge_weight.T)
            theirs.lin.bias.copy_(ours.edge_bias)
    # Without edge features PyG's GINEConv needs edge_attr as wide as x: zeros give ReLU(x_u).
    given = attr if edge_dim else torch.zeros(EDGES, IN)
    edges = Edges(edge_index[0], edge_index[1], NODES, attr if edge_dim else None)
    close(ours(x, edges), theirs(x, edge_index, given))


@pytest.mark.parametrize("bases", [0, 2])
def test_rgcn_equals_rgcnconv(graph, bases: int) -> None:
    x, edge_index, _, edge_type = graph
    relations = 3
    ours = randomized(RGCNLayer(IN, OUT, [0] * relations, bases))
    theirs = RGCNConv(IN, OUT, relations, num_bases=bases or None, aggr="mean")
    with torch.no_grad():
        if bases:
            theirs.weight.copy_(ours.bases.bases.view(bases, IN, OUT))
            theirs.comp.copy_(ours.bases.coefficients)
        else:
            theirs.weight.copy_(torch.stack(list(ours.relation_weights)))
        theirs.root.copy_(ours.self_weight)
        theirs.bias.copy_(ours.bias)
    per_relation = [Edges(*edge_index[:, edge_type == r], NODES) for r in range(relations)]
    (out,) = ours([x], per_relation, [(0, 0)] * relations)
    close(out, theirs(x, edge_index, edge_type))
