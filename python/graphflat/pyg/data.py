"""A batch of records as PyTorch Geometric data: ``torch_geometric.data.Batch`` for homogeneous
records, ``HeteroData`` for typed ones, with no copy per node or edge beyond numpy's.

Homogeneous records (``B`` records, ``N`` nodes, ``E`` edges) give a ``Batch`` with ``x``
``[N, D]``, ``edge_index`` ``[2, E]``, ``edge_weight`` ``[E]``, ``edge_attr`` ``[E, F]`` (with
edge features), ``edge_layers`` ``[E]`` (bit ``l-1``: layer ``l`` uses the edge), ``node_id``,
``hop`` and ``in_degree`` ``[N]``, ``batch`` ``[N]`` and ``ptr`` ``[B+1]``; node records add
``y`` (``[B]`` classes, -1 unlabeled; or ``[B, C]`` targets), ``root_id`` and ``root_index``
``[B]`` (a model's output for record ``i`` is its output at node ``root_index[i]``); link
records add ``src_index``, ``dst_index`` ``[B]``, ``neg_index`` ``[B, K]``,
``edge_label_index`` ``[2, B + B*K]`` and ``edge_label``, with ``link_src``, ``link_dst`` and
``negatives`` (ids). Records of a graph keyed by strings add ``node_key``: a list of ``N``
original strings. Typed records give ``HeteroData``: per node type ``x``, ``node_id``,
``hop``, ``in_degree``, ``batch`` and ``root_index`` (the roots of that type) and in a graph
keyed by strings ``node_key`` (a list of the type's nodes' strings), per relation
``(src, name, dst)`` ``edge_index`` (into its types' nodes), ``edge_weight``, ``edge_layers``
and ``edge_attr``; the record-level arrays (``y``, ``root_id``; a link's ``src_index`` into
its source type's nodes, ``dst_index`` and ``neg_index`` into its destination type's) at the
top level.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Batch, HeteroData

from graphflat.collate import by_type, local_index
from graphflat.meta import RecordsMeta

#: Record-level arrays: one row per record (or per pair), not per node or edge.
_RECORD_KEYS = (
    "y",
    "root_id",
    "root_index",
    "link_src",
    "link_dst",
    "negatives",
    "src_index",
    "dst_index",
    "neg_index",
    "edge_label_index",
    "edge_label",
)


def to_pyg(arrays: dict[str, np.ndarray], meta: RecordsMeta):
    """The collated arrays of a batch (``graphflat.collate.collate``) as PyG data."""
    if meta.typed:
        return _hetero(arrays, meta)
    # Strings stay a Python list: a tensor holds numbers only.
    tensors = {key: value.tolist() if value.dtype == object else _tensor(value) for key, value in arrays.items()}
    batch = Batch(**tensors)
    batch._num_graphs = len(arrays["ptr"]) - 1
    return batch


def _hetero(arrays: dict[str, np.ndarray], meta: RecordsMeta) -> HeteroData:
    data = HeteroData()
    for key, part in by_type(arrays, meta).items():
        kind, name = key.split(":", 1)
        if kind == "type":
            store = data[name]
        else:
            relation = next(r for r in meta.relations if r.name == name)
            store = data[relation.src, relation.name, relation.dst]
        for field, value in part.items():
            # Strings stay a Python list: a tensor holds numbers only.
            store[field] = value.tolist() if value.dtype == object else _tensor(value)
    local = local_index(arrays["node_type"])
    for key in _RECORD_KEYS:
        if key not in arrays:
            continue
        value = arrays[key]
        if key in ("src_index", "dst_index", "neg_index", "edge_label_index"):
            value = local[value]
        elif key == "root_index":
            continue  # per type, above
        data[key] = _tensor(value)
    return data


def _tensor(value: np.ndarray) -> torch.Tensor:
    # Arrays read zero-copy from Arrow are read-only; a tensor may be written to.
    value = np.ascontiguousarray(value)
    return torch.from_numpy(value if value.flags.writeable else value.copy())
