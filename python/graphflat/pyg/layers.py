"""The message-passing layers of graphflat's models in PyTorch, computing what the Rust layers
(``gnn/src/layers.rs``, ``gnn/src/hetero/``) compute, parameter for parameter.

Weights are stored as the Rust layers store them, ``[in, out]`` (rows multiply inputs): a
layer's ``state_dict`` is its burnpack tensors under the same names. A layer maps the ``[N, in]``
rows of every node of a batch to ``[N, out]``, aggregating along the edges it is given
(:class:`Edges`: the edges this layer uses, see :mod:`graphflat.pyg.models`); a node without
edges in the layer keeps its own terms. ``x_u`` is a source's row, ``e_uw`` an edge's
features, ``N(w)`` the in-edges of ``w`` in the layer:

- GCN: ``h'_w = sum_u x_u W / sqrt((d_u + 1)(d_w + 1)) + x_w W / (d_w + 1) + b``, ``d`` each
  node's in-degree in the whole graph capped by the layer's fanout;
- SAGE: ``h'_w = x_w W_self + mean_u x_u W_neigh + mean_u e_uw W_e + b``;
- GAT: per head, ``alpha_uw = softmax_u(LeakyReLU_0.2(a_src . z_u + a_dst . z_w + a_e . e_uw W_e))``
  over ``N(w)`` and a self-loop (whose features are the mean of ``w``'s in-edges' features),
  ``z = x W``; heads concatenated (hidden layers) or averaged (the last), then ``+ b``. A
  graph's own self-edges stay in-edges beside the added self-loop (PyG's ``GATConv`` drops
  them before adding its loops);
- GINE: ``h'_w = MLP(x_w + sum_u ReLU(x_u + e_uw W_e + b_e))``, ``MLP = Linear(in, m), ReLU,
  Linear(m, out)`` with ``m = max(hidden, out)`` (a model written before issue 51: ``m = out``);
- R-GCN (typed): ``h'_w = h_w W_0 + b + sum_r (mean_r h_u W_r + mean_r e_uw W_e,r)``, ``W_r``
  a relation's weight or ``sum_b a_rb V_b`` with bases;
- heterogeneous SAGE (typed): ``h'_w = h_w S_t + b_t + sum_r (mean_r h_u N_r + mean_r e_uw W_e,r)``
  for ``w`` of type ``t``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F


@dataclass
class Edges:
    """The edges one layer uses: ``src``, ``dst`` ``[E]`` (rows of the layer's input and output
    nodes), ``attr`` ``[E, F]`` (``None`` when the layer reads no edge features), ``n`` the
    destination nodes, and for GCN ``norm`` ``[n]``: each node's capped in-degree plus one."""

    src: Tensor
    dst: Tensor
    n: int
    attr: Tensor | None = None
    norm: Tensor | None = None
    #: The input row of each node, when the input holds each distinct node once (``None``: row
    #: ``i`` is node ``i``). A layer whose first step is linear applies it to the distinct rows.
    rows: Tensor | None = None

    def nodes(self, h: Tensor) -> Tensor:
        """Rows ``h`` of the input's rows, one per node."""
        return h if self.rows is None else h[self.rows]

    def sum(self, values: Tensor) -> Tensor:
        """``out[w] = sum over edges u -> w of values[edge]``, ``[n, width]``."""
        out = values.new_zeros((self.n, *values.shape[1:]))
        return out.index_add_(0, self.dst, values)

    def mean(self, values: Tensor) -> Tensor:
        """The mean of ``values[edge]`` over each node's edges (0 without any), ``[n, width]``."""
        count = torch.bincount(self.dst, minlength=self.n).clamp_(min=1).to(values.dtype)
        return self.sum(values) / count.view(-1, *([1] * (values.dim() - 1)))


def glorot(rows: int, cols: int) -> nn.Parameter:
    """A ``[rows, cols]`` Glorot-uniform weight (bound ``sqrt(6 / (rows + cols))``)."""
    bound = math.sqrt(6.0 / (rows + cols))
    return nn.Parameter(torch.empty(rows, cols).uniform_(-bound, bound))


def zeros(n: int) -> nn.Parameter:
    return nn.Parameter(torch.zeros(n))


class GCNLayer(nn.Module):
    def __init__(self, input: int, output: int) -> None:
        super().__init__()
        self.weight, self.bias = glorot(input, output), zeros(output)

    def forward(self, x: Tensor, e: Edges) -> Tensor:
        h = e.nodes(x @ self.weight)
        norm = e.norm
        coef = (norm[e.src] * norm[e.dst]).rsqrt()
        return e.sum(h[e.src] * coef[:, None]) + h[: e.n] / norm[: e.n, None] + self.bias


class SAGELayer(nn.Module):
    def __init__(self, input: int, output: int, edge_dim: int = 0) -> None:
        super().__init__()
        self.self_weight, self.neighbor_weight = glorot(input, output), glorot(input, output)
        self.bias = zeros(output)
        self.edge_weight = glorot(edge_dim, output) if edge_dim else None

    def forward(self, x: Tensor, e: Edges) -> Tensor:
        # mean(x_u) W = mean(x_u W): the projection runs once per input row.
        neighbors = e.nodes(x @ self.neighbor_weight)
        out = e.nodes(x @ self.self_weight)[: e.n] + e.mean(neighbors[e.src]) + self.bias
        if self.edge_weight is not None:
            out = out + e.mean(e.attr) @ self.edge_weight
        return out


class GATLayer(nn.Module):
    def __init__(self, input: int, output: int, heads: int, concat: bool, edge_dim: int = 0) -> None:
        super().__init__()
        self.heads, self.out, self.concat = heads, output, concat
        self.weight = glorot(input, heads * output)
        self.att_src, self.att_dst = glorot(heads, output), glorot(heads, output)
        self.bias = zeros(heads * output if concat else output)
        self.edge_weight = glorot(edge_dim, heads * output) if edge_dim else None
        self.att_edge = glorot(heads, output) if edge_dim else None
        #: Attention dropout, set by the model.
        self.attention_dropout = 0.0

    def forward(self, x: Tensor, e: Edges) -> Tensor:
        heads, out, n = self.heads, self.out, e.n
        z = e.nodes(x @ self.weight).view(-1, heads, out)
        score_src, score_dst = (z * self.att_src).sum(-1), (z[:n] * self.att_dst).sum(-1)
        loops = torch.arange(n, device=x.device)
        src, dst = torch.cat([e.src, loops]), torch.cat([e.dst, loops])
        logits = score_src[src] + score_dst[dst]
        if self.edge_weight is not None:
            # A self-loop's features: the mean of the node's in-edges' (PyG's fill_value="mean").
            attr = torch.cat([e.attr, e.mean(e.attr)])
            logits = logits + ((attr @ self.edge_weight).view(-1, heads, out) * self.att_edge).sum(-1)
        scores = F.leaky_relu(logits, 0.2)
        # Softmax over each node's in-edges, shifted by its largest score.
        top = scores.new_full((n, heads), -torch.inf).scatter_reduce(
            0, dst[:, None].expand(-1, heads), scores, "amax", include_self=True
        )
        weights = (scores - top[dst].detach()).exp()
        total = weights.new_zeros((n, heads)).index_add_(0, dst, weights)
        alpha = F.dropout(weights / total[dst], self.attention_dropout, self.training)
        summed = weights.new_zeros((n, heads, out)).index_add_(0, dst, z[src] * alpha[..., None])
        combined = summed.reshape(n, heads * out) if self.concat else summed.mean(1)
        return combined + self.bias


class GINELayer(nn.Module):
    def __init__(self, input: int, width: int, output: int, edge_dim: int = 0) -> None:
        super().__init__()
        self.weight, self.bias = glorot(input, width), zeros(width)
        self.weight2, self.bias2 = glorot(width, output), zeros(output)
        self.edge_weight = glorot(edge_dim, input) if edge_dim else None
        self.edge_bias = zeros(input) if edge_dim else None

    def forward(self, x: Tensor, e: Edges) -> Tensor:
        x = e.nodes(x)
        message = x[e.src]
        if self.edge_weight is not None:
            message = message + e.attr @ self.edge_weight + self.edge_bias
        h = x[: e.n] + e.sum(F.relu(message))
        return F.relu(h @ self.weight + self.bias) @ self.weight2 + self.bias2


class Projection(nn.Module):
    """A node type's input projection ``x P + c`` to the model's hidden width."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.weight, self.bias = glorot(width, hidden), zeros(hidden)

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.weight + self.bias


class Bases(nn.Module):
    """R-GCN's basis decomposition: ``bases`` ``[B, in * out]``, ``coefficients`` ``[R, B]``."""

    def __init__(self, input: int, output: int, relations: int, count: int) -> None:
        super().__init__()
        bound = math.sqrt(6.0 / (input + output))
        self.bases = nn.Parameter(torch.empty(count, input * output).uniform_(-bound, bound))
        self.coefficients = glorot(relations, count)


#: Typed layers read per node type ``h[t]`` ``[N_t, in]`` and per relation its ``Edges``
#: (``src`` into the source type's rows, ``dst`` into the destination type's).
TypedRows = list[Tensor]


class _Typed(nn.Module):
    """What R-GCN and heterogeneous SAGE share: per relation a neighbor weight and, where the
    layer reads the relation's edge features, an edge weight ``edge_weights[str(r)]``."""

    def _init_edges(self, output: int, edge_dims: list[int]) -> None:
        self.edge_weights = nn.ParameterDict({str(r): glorot(d, output) for r, d in enumerate(edge_dims) if d})

    def _neighbors(self, h: TypedRows, edges: list[Edges], ends: list[tuple[int, int]], weights) -> TypedRows:
        out = [None] * len(h)
        for r, (e, (s, d)) in enumerate(zip(edges, ends)):
            if e.src.numel() == 0:
                continue
            term = e.mean(h[s][e.src]) @ weights[r]
            if str(r) in self.edge_weights:
                term = term + e.mean(e.attr) @ self.edge_weights[str(r)]
            out[d] = term if out[d] is None else out[d] + term
        return out


class RGCNLayer(_Typed):
    def __init__(self, input: int, output: int, edge_dims: list[int], bases: int = 0) -> None:
        super().__init__()
        self.input, self.output = input, output
        self.self_weight, self.bias = glorot(input, output), zeros(output)
        if bases:
            self.relation_weights = nn.ParameterList()
            self.bases = Bases(input, output, len(edge_dims), bases)
        else:
            self.relation_weights = nn.ParameterList([glorot(input, output) for _ in edge_dims])
            self.bases = None
        self._init_edges(output, edge_dims)

    def weights(self) -> list[Tensor]:
        """Every relation's ``[in, out]`` weight."""
        if self.bases is None:
            return list(self.relation_weights)
        all = self.bases.coefficients @ self.bases.bases
        return [w.view(self.input, self.output) for w in all]

    def forward(self, h: TypedRows, edges: list[Edges], ends: list[tuple[int, int]]) -> TypedRows:
        neighbors = self._neighbors(h, edges, ends, self.weights())
        own = [x @ self.self_weight + self.bias for x in h]
        return [o if m is None else o + m for o, m in zip(own, neighbors)]


class HeteroSAGELayer(_Typed):
    def __init__(self, input: int, output: int, types: int, edge_dims: list[int]) -> None:
        super().__init__()
        self.self_weights = nn.ParameterList([glorot(input, output) for _ in range(types)])
        self.biases = nn.ParameterList([zeros(output) for _ in range(types)])
        self.neighbor_weights = nn.ParameterList([glorot(input, output) for _ in edge_dims])
        self._init_edges(output, edge_dims)

    def forward(self, h: TypedRows, edges: list[Edges], ends: list[tuple[int, int]]) -> TypedRows:
        neighbors = self._neighbors(h, edges, ends, list(self.neighbor_weights))
        own = [x @ w + b for x, w, b in zip(h, self.self_weights, self.biases)]
        return [o if m is None else o + m for o, m in zip(own, neighbors)]


class MLPDecoder(nn.Module):
    """A link model's ``mlp`` decoder: ``w2 . relu((h_s * h_d) w1 + b1) + b2``; ``w1`` is
    ``W1^T`` (``[d, d]``), ``w2`` ``[d, 1]``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.w1, self.b1 = glorot(dim, dim), zeros(dim)
        self.w2, self.b2 = glorot(dim, 1), zeros(1)

    def forward(self, src: Tensor, dst: Tensor) -> Tensor:
        return (F.relu((src * dst) @ self.w1 + self.b1) @ self.w2 + self.b2).squeeze(-1)
