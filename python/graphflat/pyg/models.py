"""graphflat's models as torch modules: ``GCN``, ``SAGE``, ``GAT``, ``GINE`` and ``RGCN``, each
computing on a batch of records (``RecordsBatch.to_pyg()``) what GraphTrainer's model of the
same kind computes, and what GraphInfer computes for the same nodes over the whole graph.

A model of ``k`` layers runs on records of ``k`` hops. Layer ``l`` (1 nearest the input) uses
the edges whose ``edge_layers`` has bit ``l - 1`` set: the in-edges the records sampled for that
layer (its fanout, ``fanouts[k - l]``). Records over ``[precompute]``'s ``Â X``
(``meta.precomputed``) take a GCN of ``k + 1`` layers whose first reads no edge (``x W + b``,
its self-loop weighing 1); records over GraphSAGE's ``[X | mean X]`` likewise a SAGE, whose
first layer's mean over no edge is zero (``x W_self + b``). The records' layer ``l`` is then
the model's ``l + 1``. Every node
of the batch is computed at every layer;
those the layer does not reach (hop above ``k - l``) get values no root reads, so the roots'
outputs are exactly the Rust layers'. Between layers: the activation (``relu`` or ``elu``) and,
in training, dropout on each layer's input; the last layer has no activation. Inputs are read as
the model was trained: feature rows divided by their sum clamped at 1 with
``normalize_features``, edge features standardized with the records' statistics with
``normalize_edge_features``.

``model(batch)`` returns one row per record: for node records the root's output ``[B, C]``
(logits: softmax classes, or one sigmoid per target with multi-hot labels); for link records
the embeddings of its endpoints ``[B, 2 + K, D]`` (source, destination, each negative), which
:meth:`GraphModel.decode` scores in pairs and :meth:`GraphModel.pair_scores` scores in the
order of ``batch.edge_label``.

Initial weights are Glorot-uniform from torch's generator (``torch.manual_seed``), not the
Rust trainer's stream: a model built here and one built by GraphTrainer with the same seed
start from different weights, and compute the same function of the same weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from graphflat.meta import RecordsMeta
from graphflat.pyg.layers import (
    Edges,
    GATLayer,
    GCNLayer,
    GINELayer,
    HeteroSAGELayer,
    MLPDecoder,
    Projection,
    RGCNLayer,
    SAGELayer,
)
from graphflat.pyg.learned import LearnedRows

#: The Rust model's layer variant of each kind, as burnpack names it (``layers.<i>.<Variant>.``).
VARIANTS = {"gcn": "Gcn", "sage": "Sage", "gat": "Gat", "gine": "Gine", "rgcn": "Rgcn"}


class GraphModel(nn.Module):
    """A k-layer GNN over records, described by ``spec`` (the Rust ``ModelSpec`` as JSON: what
    ``model-<run>.json`` holds under ``spec``) and the records' ``meta``.

    Build one with :class:`GCN`, :class:`SAGE`, :class:`GAT`, :class:`GINE` or :class:`RGCN`
    (from the records' settings), or :func:`graphflat.pyg.load_model` (from a trained model).
    """

    def __init__(
        self,
        spec: dict[str, Any],
        meta: RecordsMeta,
        dropout: float = 0.5,
        attention_dropout: float = 0.0,
        learned: LearnedRows | None = None,
    ):
        super().__init__()
        self.spec, self.meta, self.dropout = spec, meta, dropout
        # A model with learned rows (``spec["learned_embedding_dim"]``) reads each node's after
        # its features: layer 1's input (a typed model's projections') is ``[x | row]``.
        self.learned = learned
        kind, k = spec["kind"], spec["layers"]
        # A dense first layer over precomputed features (Â X): no edge, no degree.
        self.dense = int(spec.get("precomputed", 0))
        if k != meta.hops + self.dense:
            raise ValueError(
                f"a {k}-layer model ({self.dense} dense) runs on records of {k - self.dense} hops; "
                f"these have {meta.hops}"
            )
        made_for = meta.precomputed_for or "gcn"
        if self.dense != int(meta.precomputed) or (self.dense and kind != made_for):
            raise ValueError(
                "records over [precompute]'s output take the model it was computed for (Â X a GCN, [X | mean X] "
                "a SAGE) with a dense first layer (spec precomputed = 1), and only they do; this "
                f"{kind} has precomputed = {self.dense} and the records' features are "
                f"{made_for + ' inputs' if meta.precomputed else 'plain'}"
            )
        types = spec.get("types")
        if types is None and kind == "rgcn":
            raise ValueError("RGCN runs on typed records only (a node type and relations per record)")
        if types is not None and kind not in ("rgcn", "sage"):
            raise ValueError(f"{kind.upper()} runs on homogeneous records; typed records take RGCN or SAGE")
        edge_dims = [r["edge_dim"] for r in types["relations"]] if types else []
        self.projections = nn.ModuleList(
            Projection(t["width"] + t.get("learned", 0), spec["hidden"]) for t in (types or {}).get("node_types", [])
        )
        layers = []
        for i in range(k):
            last = i + 1 == k
            input, out = _layer_input(spec, i), spec["classes"] if last else spec["hidden"]
            if kind == "gcn":
                layers.append(GCNLayer(input, out))
            elif kind == "sage" and types:
                layers.append(HeteroSAGELayer(input, out, len(types["node_types"]), edge_dims))
            elif kind == "sage":
                layers.append(SAGELayer(input, out, spec["edge_dim"]))
            elif kind == "gat":
                heads = spec["output_heads"] if last else spec["heads"]
                layers.append(GATLayer(input, out, heads, not last, spec["edge_dim"]))
                layers[-1].attention_dropout = attention_dropout
            elif kind == "gine":
                width = max(out, spec["hidden"]) if spec.get("wide_mlp") else out
                layers.append(GINELayer(input, width, out, spec["edge_dim"]))
            elif kind == "rgcn":
                layers.append(RGCNLayer(input, out, edge_dims, spec.get("bases", 0)))
            else:
                raise ValueError(f"unknown model kind {kind!r}")
        self.layers = nn.ModuleList(layers)
        self.decoder = MLPDecoder(spec["classes"]) if spec.get("decoder") == "mlp" else None

    @property
    def typed(self) -> bool:
        return self.spec.get("types") is not None

    def forward(self, batch) -> Tensor:
        """One row per record of ``batch`` (see the module doc)."""
        link = self.spec.get("task", "node") == "link"
        if not self.typed:
            h = self._plain(batch)
            return self._endpoints(batch, h, h) if link else h[batch.root_index]
        rows = self._typed(batch)
        types = self.spec["types"]
        if link:
            relation = types["relations"][self._link_relation()]
            return self._endpoints(batch, rows[relation["src"]], rows[relation["dst"]])
        target = types["target"]
        return rows[target][batch[types["node_types"][target]["name"]].root_index]

    def decode(self, src: Tensor, dst: Tensor) -> Tensor:
        """The scores of pairs of embeddings ``[..., D]`` -> ``[...]``: ``dot`` or ``mlp``."""
        if self.decoder is not None:
            return self.decoder(src, dst)
        return (src * dst).sum(-1)

    def pair_scores(self, batch, out: Tensor | None = None) -> Tensor:
        """A link batch's scores ``[B + B*K]`` in the order of ``batch.edge_label``: each
        record's positive pair, then each record's negatives. ``out`` is ``self(batch)`` when
        computed already."""
        out = self(batch) if out is None else out
        b, k = out.shape[0], out.shape[1] - 2
        positive = self.decode(out[:, 0], out[:, 1])
        negative = self.decode(out[:, :1].expand(b, k, -1), out[:, 2:])
        return torch.cat([positive, negative.reshape(-1)])

    # Homogeneous records.

    def _plain(self, batch) -> Tensor:
        # The input once per distinct node (records of a batch share nodes): normalized and
        # dropped out once, and projected once by a layer whose first step is linear.
        distinct, rows = torch.unique(batch.node_id, return_inverse=True)
        first = torch.empty_like(distinct).scatter_(0, rows, torch.arange(len(rows), device=rows.device))
        h = _features(batch.x[first], self.spec["normalize_features"])
        learned = self.spec.get("learned_embedding_dim", 0) > 0
        if learned:
            # The features dropped out, the rows not (they are parameters, as an Embedding's).
            keys = [batch.node_key[i] for i in first.tolist()] if hasattr(batch, "node_key") else distinct
            h = torch.cat([F.dropout(h, self.dropout, self.training), self._rows(keys, None)], 1)
        attr = self._edge_attr(getattr(batch, "edge_attr", None), self.spec.get("edge_stats"), self.spec["edge_dim"])
        for l, layer in enumerate(self.layers, start=1):
            e = _layer_edges(batch.edge_index, batch.edge_layers, l - self.dense, len(rows), attr)
            e.rows = rows if l == 1 else None
            if self.spec["kind"] == "gcn":
                e.norm = self._norm(batch.in_degree, l)
            h = layer(h if l == 1 and learned else F.dropout(h, self.dropout, self.training), e)
            h = self._activate(h, l)
        return h

    def _rows(self, keys, node_type: str | None) -> Tensor:
        """The learned rows of the nodes ``keys`` (ids, or their strings) of ``node_type``."""
        if self.learned is None:
            raise ValueError(
                "the model reads a learned row per node and holds none: load it with graphflat.pyg.load_model, "
                "or build it with learned=LearnedRows(...)"
            )
        return self.learned.rows(keys, node_type)

    def _norm(self, in_degree: Tensor, l: int) -> Tensor:
        """Each node's in-degree as layer ``l`` counts it (capped by its fanout; 0 at a dense
        first layer), plus one."""
        if l <= self.dense:
            return torch.ones_like(in_degree, dtype=torch.float32)
        degree = in_degree.clamp(min=0)
        fanouts = self.meta.fanouts
        if fanouts:
            degree = degree.clamp(max=fanouts[len(self.layers) - l])
        return degree.to(torch.float32) + 1.0

    def _edge_attr(self, attr: Tensor | None, stats: dict | None, width: int) -> Tensor | None:
        """Edge features ``[E, width]`` as the model reads them (standardized with the records'
        statistics, ``(v - mean) / std``, a constant column only centered), or ``None``."""
        if not width:
            return None
        if attr is None:
            raise ValueError("the model reads edge features; the batch has none (records without edge features?)")
        if not self.spec.get("normalize_edge_features"):
            return attr
        mean = torch.tensor(stats["mean"], dtype=attr.dtype, device=attr.device)
        std = torch.tensor(stats["std"], dtype=attr.dtype, device=attr.device)
        return (attr - mean) / torch.where(std > 0, std, torch.ones_like(std))

    def _activate(self, h, l: int):
        if l == len(self.layers):
            return h
        act = F.relu if self.spec["activation"] == "relu" else F.elu
        return [act(x) for x in h] if isinstance(h, list) else act(h)

    # Typed records (HeteroData): rows per node type, in the model's type order.

    def _typed(self, data) -> list[Tensor]:
        types = self.spec["types"]
        names = [t["name"] for t in types["node_types"]]
        normalize = self.spec["normalize_features"]
        x = [F.dropout(_features(data[n].x, normalize), self.dropout, self.training) for n in names]
        for t, node_type in enumerate(types["node_types"]):
            if node_type.get("learned", 0):
                store = data[names[t]]
                keys = store.node_key if hasattr(store, "node_key") else store.node_id
                x[t] = torch.cat([x[t], self._rows(keys, names[t])], 1)
        h = [p(v) for p, v in zip(self.projections, x)]
        relations = types["relations"]
        ends = [(r["src"], r["dst"]) for r in relations]
        stats = self.spec.get("relation_edge_stats") or [None] * len(relations)
        stores = [data[names[r["src"]], r["name"], names[r["dst"]]] for r in relations]
        attrs = [
            self._edge_attr(getattr(store, "edge_attr", None), s, r["edge_dim"])
            for store, s, r in zip(stores, stats, relations)
        ]
        for l, layer in enumerate(self.layers, start=1):
            edges = [
                _layer_edges(store.edge_index, store.edge_layers, l, h[r["dst"]].shape[0], attr)
                for store, r, attr in zip(stores, relations, attrs)
            ]
            if l > 1:
                h = [F.dropout(v, self.dropout, self.training) for v in h]
            h = self._activate(layer(h, edges, ends), l)
        return h

    # Link records.

    def _endpoints(self, batch, src: Tensor, dst: Tensor) -> Tensor:
        """``[B, 2 + K, D]``: each record's source, destination and negatives' embeddings, from
        the rows of the source's and the destination's nodes."""
        first = src[batch.src_index][:, None]
        others = dst[torch.cat([batch.dst_index[:, None], batch.neg_index], 1)]
        return torch.cat([first, others], 1)

    def _link_relation(self) -> int:
        names = [r["name"] for r in self.spec["types"]["relations"]]
        return names.index(self.meta.link_relation)


def _features(x: Tensor, normalize: bool) -> Tensor:
    """Input rows, divided by their sum clamped at 1 when the model normalizes them."""
    return x / x.sum(1, keepdim=True).clamp(min=1.0) if normalize else x


def _layer_edges(edge_index: Tensor, edge_layers: Tensor, l: int, n: int, attr: Tensor | None) -> Edges:
    """The edges the records' layer ``l`` holds (bit ``l - 1`` of ``edge_layers``; none for
    ``l = 0``, a dense first layer), into ``n`` nodes."""
    used = ((edge_layers >> (l - 1)) & 1).bool() if l > 0 else torch.zeros_like(edge_layers, dtype=torch.bool)
    return Edges(edge_index[0, used], edge_index[1, used], n, attr[used] if attr is not None else None)


def _layer_input(spec: dict[str, Any], i: int) -> int:
    """Layer ``i``'s (0-based) input width."""
    if i == 0:
        return spec["hidden"] if spec.get("types") else spec["input_dim"]
    return spec["hidden"] * spec["heads"] if spec["kind"] == "gat" else spec["hidden"]


def spec_for(
    kind: str,
    meta: RecordsMeta,
    *,
    hidden: int,
    classes: int,
    heads: int = 8,
    output_heads: int = 1,
    activation: str = "relu",
    normalize_features: bool = False,
    edge_features: bool = True,
    normalize_edge_features: bool = False,
    decoder: str = "dot",
    bases: int = 0,
    learned_embedding_dim: int = 0,
    learned_embedding_types: Sequence[str] = (),
) -> dict[str, Any]:
    """The ``ModelSpec`` of a ``kind`` model of records ``meta`` (what GraphTrainer writes);
    with ``learned_embedding_dim``, each node (of ``learned_embedding_types`` in a typed model,
    every type when empty) reads a learned row of that width after its features."""
    link = meta.task == "link"
    reads = edge_features and kind != "gcn"
    spec: dict[str, Any] = {
        "kind": kind,
        "input_dim": 0 if meta.typed else meta.feature_dim + learned_embedding_dim,
        "learned_embedding_dim": learned_embedding_dim,
        "hidden": hidden,
        "classes": classes,
        "layers": meta.hops + int(meta.precomputed),
        "heads": heads if kind == "gat" else 1,
        "output_heads": output_heads if kind == "gat" else 1,
        "activation": activation,
        "normalize_features": normalize_features,
        "multi_label": meta.label == "targets",
        "edge_dim": meta.edge_feature_dim if reads and not meta.typed else 0,
        "normalize_edge_features": False,
        "edge_stats": None,
        "task": meta.task,
        "decoder": decoder if link else None,
        "types": None,
        "bases": bases,
        "wide_mlp": True,
        "seed": 0,
    }
    if meta.precomputed:
        # Records over precomputed features: the first layer is dense (see the module doc).
        spec["precomputed"] = 1
    if meta.typed:
        names = [n for n, _ in meta.node_types]
        spec["types"] = {
            "node_types": [
                {"name": n, "width": w, "learned": learned_embedding_dim if _reads(n, learned_embedding_types) else 0}
                for n, w in meta.node_types
            ],
            "relations": [
                {
                    "name": r.name,
                    "src": names.index(r.src),
                    "dst": names.index(r.dst),
                    "edge_dim": r.edge_feature_dim if reads else 0,
                }
                for r in meta.relations
            ],
            "target": names.index(meta.target_type),
        }
    stats = _edge_stats(meta)
    if normalize_edge_features and reads and stats is not None:
        spec["normalize_edge_features"] = True
        if meta.typed:
            spec["relation_edge_stats"] = stats
        else:
            spec["edge_stats"] = stats[0]
    elif normalize_edge_features and reads and (meta.typed or meta.edge_feature_dim):
        raise ValueError("normalize_edge_features: the records carry no edge feature statistics")
    return spec


def _reads(node_type: str, types: Sequence[str]) -> bool:
    """Whether ``node_type``'s nodes read learned rows: named in ``types``, or ``types`` empty."""
    return not types or node_type in types


def _edge_stats(meta: RecordsMeta) -> list[dict | None] | None:
    """The records' edge feature statistics: one entry, or one per relation (``None`` for a
    relation without features); ``None`` when the records carry none."""
    mean, std = meta.raw.get("graphflat.edge_feature_mean"), meta.raw.get("graphflat.edge_feature_std")
    if mean is None or std is None:
        return None

    def one(m: str, s: str) -> dict | None:
        if not m:
            return None
        return {"mean": [float(v) for v in m.split(",")], "std": [float(v) for v in s.split(",")]}

    return [one(m, s) for m, s in zip(mean.split(";"), std.split(";"))]


def _kind(kind: str):
    def build(
        meta: RecordsMeta,
        hidden: int,
        classes: int,
        *,
        dropout: float = 0.5,
        attention_dropout: float = 0.0,
        learned: LearnedRows | None = None,
        **options,
    ) -> GraphModel:
        if learned is not None:
            options["learned_embedding_dim"] = learned.dim
            options["learned_embedding_types"] = [t for t in learned.ids if t is not None]
        spec = spec_for(kind, meta, hidden=hidden, classes=classes, **options)
        return GraphModel(spec, meta, dropout, attention_dropout, learned)

    build.__name__ = build.__qualname__ = kind.upper()
    build.__doc__ = f"""A {kind.upper()} model of records ``meta`` (``open_records(path).meta``).

    ``hidden``: the hidden layers' width; ``classes``: the last layer's (the classes or
    targets of a node model, the embedding width of a link model). Options as ``[train]``'s
    keys: ``heads``, ``output_heads`` (GAT), ``activation`` (``"relu"`` or ``"elu"``),
    ``normalize_features``, ``edge_features`` (read the records' edge features, default
    true), ``normalize_edge_features``, ``decoder`` (``"dot"`` or ``"mlp"``, link records),
    ``bases`` (R-GCN), ``dropout`` and ``attention_dropout`` (training only); ``learned``
    (:class:`~graphflat.pyg.learned.LearnedRows`, for example ``LearnedRows.of_records``): a
    learned row per node, read after its features, trained with the model.
    """
    return build


GCN = _kind("gcn")
SAGE = _kind("sage")
GAT = _kind("gat")
GINE = _kind("gine")
RGCN = _kind("rgcn")
