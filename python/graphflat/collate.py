"""Records of one batch laid out as one graph, from the Arrow buffers, with no Python loop over
nodes or edges: every record's nodes one after another (a record's root first), its edges'
local indices shifted by the nodes before it.

The arrays a batch of ``B`` records with ``N`` nodes and ``E`` edges in all gives
(:func:`collate`), for every record set:

=================  ===========  ==============================================================
name               shape        meaning
=================  ===========  ==============================================================
``node_id``        ``[N]``      each node's id (int64)
``hop``            ``[N]``      its hop distance from its record's root
``in_degree``      ``[N]``      its in-degree in the whole graph (GCN's normalization)
``batch``          ``[N]``      the record (row of the batch) it belongs to
``ptr``            ``[B+1]``    where each record's nodes start (and the end)
``edge_index``     ``[2, E]``   source and destination of each edge, indices into the nodes
``edge_weight``    ``[E]``      each edge's weight (float32)
``edge_layers``    ``[E]``      bit ``l-1`` set: layer ``l`` (1 = the input layer) uses the edge
=================  ===========  ==============================================================

Records of a graph keyed by strings add ``node_key`` ``[N]`` (numpy ``object``: each node's
original string; ``node_id`` then holds the internal ids the stages computed with).
Homogeneous records add ``x`` ``[N, D]`` (float32) and, with edge features, ``edge_attr``
``[E, F]``. Node records add ``root_id`` ``[B]``, ``root_index`` ``[B]`` (each record's root
among the nodes, ``ptr[:-1]``) and ``y``: ``[B]`` int64 classes (-1 where unlabeled) or
``[B, C]`` float32 multi-hot targets (NaN rows where unlabeled). Link records add ``link_src``,
``link_dst`` ``[B]``, ``negatives`` ``[B, K]`` (ids), ``src_index``, ``dst_index`` ``[B]`` and
``neg_index`` ``[B, K]`` (the roots of each endpoint's neighborhood among the nodes),
``edge_label_index`` ``[2, B + B*K]`` (positive pairs, then each negative pair) and
``edge_label`` ``[B + B*K]`` (1, then 0). Typed records keep ``node_type`` ``[N]`` and
``edge_type`` ``[E]``, and each node's features at its type's width as ``feature_offsets``
``[N+1]`` and ``feature_values`` (each edge's as ``edge_feature_offsets`` and
``edge_feature_values``); :func:`by_type` splits them into each type's ``x`` and each
relation's ``edge_attr``.

:func:`take` gives the same arrays for some rows of a table from the table's collated arrays,
without Arrow: a row group is collated once and each shuffled batch of it gathered from that.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphflat.meta import RecordsMeta

Column = pa.Array | pa.ChunkedArray


def collate(table: pa.Table, meta: RecordsMeta) -> dict[str, np.ndarray]:
    """The batch of records ``table`` (rows of one record set, settings ``meta``) as arrays."""
    out = _graph(table)
    if meta.typed:
        out["node_type"] = _values(table["node_types"]).astype(np.int64)
        out["edge_type"] = _values(table["edge_relations"]).astype(np.int64)
        out["feature_offsets"], out["feature_values"] = _ragged(table["node_features"])
        if "edge_features" in table.column_names:
            out["edge_feature_offsets"], out["edge_feature_values"] = _ragged(table["edge_features"])
    else:
        out["x"] = _fixed(table["node_features"], meta.feature_dim)
        if "edge_features" in table.column_names:
            out["edge_attr"] = _fixed(table["edge_features"], meta.edge_feature_dim)
    if meta.task == "link":
        out.update(_link(table, out, meta))
    else:
        out["root_id"] = _array(table["root_id"]).to_numpy()
        out["root_index"] = out["ptr"][:-1].copy()
        out["y"] = _labels(table["label"], meta)
    return out


def _graph(table: pa.Table) -> dict[str, np.ndarray]:
    """The nodes and edges of every record of ``table``, one after another."""
    node_offsets, node_ids = _list(table["node_ids"])
    edge_offsets, src = _list(table["edge_src"])
    _, dst = _list(table["edge_dst"])
    nodes_per_record, edges_per_record = np.diff(node_offsets), np.diff(edge_offsets)
    shift = np.repeat(node_offsets[:-1], edges_per_record)
    keys = {}
    if "node_keys" in table.column_names:
        keys["node_key"] = _list(table["node_keys"])[1].to_numpy(zero_copy_only=False).astype(object)
    return keys | {
        "node_id": node_ids.to_numpy(),
        "hop": _values(table["node_hops"]).astype(np.int64),
        "in_degree": _values(table["node_in_degrees"]).astype(np.int64),
        "batch": np.repeat(np.arange(len(table), dtype=np.int64), nodes_per_record),
        "ptr": node_offsets,
        "edge_index": np.stack([src.to_numpy().astype(np.int64) + shift, dst.to_numpy().astype(np.int64) + shift]),
        "edge_weight": _values(table["edge_weights"]).astype(np.float32),
        "edge_layers": _values(table["edge_layers"]).astype(np.int64),
    }


def _link(table: pa.Table, graph: dict[str, np.ndarray], meta: RecordsMeta) -> dict[str, np.ndarray]:
    """A link record's endpoints: each neighborhood's root is its first node, and the
    neighborhoods of a row (source, destination, each negative) lie one after another."""
    b = len(table)
    _, per_endpoint = _list(table["endpoint_nodes"])
    counts = per_endpoint.to_numpy().astype(np.int64)
    k = meta.negatives
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).reshape(b, k + 2)
    src, dst, neg = starts[:, 0], starts[:, 1], starts[:, 2:]
    pairs = np.concatenate([np.stack([src, dst]), np.stack([np.repeat(src, k), neg.reshape(-1)])], axis=1)
    _, negatives = _list(table["negatives"])
    return {
        "link_src": _array(table["link_src"]).to_numpy(),
        "link_dst": _array(table["link_dst"]).to_numpy(),
        "negatives": negatives.to_numpy().reshape(b, k),
        "src_index": src,
        "dst_index": dst,
        "neg_index": neg,
        "edge_label_index": pairs,
        "edge_label": np.concatenate([np.ones(b, np.float32), np.zeros(b * k, np.float32)]),
    }


def edge_offsets(table: pa.Table) -> np.ndarray:
    """Where each record's edges start among a table's collated edges (and the end)."""
    return _list(table["edge_src"])[0]


#: The arrays :func:`take` gathers by node, by edge and by record.
_BY_NODE = ("node_id", "node_key", "hop", "in_degree", "x")
_BY_EDGE = ("edge_weight", "edge_layers", "edge_attr")
_BY_RECORD = ("root_id", "y", "link_src", "link_dst", "negatives")
#: Indices into the nodes, record by record, that :func:`take` moves with their records' nodes.
_POSITIONS = ("src_index", "dst_index", "neg_index")
#: The arrays :func:`take` makes anew.
_MADE = ("ptr", "batch", "edge_index", "root_index", "edge_label_index", "edge_label")


def take(arrays: dict[str, np.ndarray], edge_ptr: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
    """``collate(table.take(rows), meta)`` from ``arrays = collate(table, meta)`` and
    ``edge_ptr = edge_offsets(table)``: the same arrays, each a numpy gather of the records
    ``rows``' nodes, edges and rows. Homogeneous records only (``meta.typed`` is false)."""
    unknown = set(arrays) - set(_BY_NODE + _BY_EDGE + _BY_RECORD + _POSITIONS + _MADE)
    if unknown:
        raise ValueError(f"take: arrays {sorted(unknown)} of unknown kind (typed records are collated from tables)")
    rows = np.asarray(rows, dtype=np.int64)
    ptr, b = arrays["ptr"], len(rows)
    starts, counts = ptr[rows], ptr[rows + 1] - ptr[rows]
    new_ptr = np.zeros(b + 1, np.int64)
    np.cumsum(counts, out=new_ptr[1:])
    moved = starts - new_ptr[:-1]  # by record: its nodes' old index less their new one
    nodes = np.repeat(moved, counts) + np.arange(new_ptr[-1])
    edge_starts, edge_counts = edge_ptr[rows], edge_ptr[rows + 1] - edge_ptr[rows]
    new_edge_ptr = np.zeros(b + 1, np.int64)
    np.cumsum(edge_counts, out=new_edge_ptr[1:])
    edges = np.repeat(edge_starts - new_edge_ptr[:-1], edge_counts) + np.arange(new_edge_ptr[-1])
    out: dict[str, np.ndarray] = {}
    for key, value in arrays.items():
        if key in _BY_NODE:
            out[key] = np.take(value, nodes, axis=0)
        elif key in _BY_EDGE:
            out[key] = np.take(value, edges, axis=0)
        elif key in _BY_RECORD:
            out[key] = np.take(value, rows, axis=0)
        elif key in _POSITIONS:
            shift = moved.reshape((b,) + (1,) * (value.ndim - 1))
            out[key] = np.take(value, rows, axis=0) - shift
        elif key == "ptr":
            out[key] = new_ptr
        elif key == "batch":
            out[key] = np.repeat(np.arange(b, dtype=np.int64), counts)
        elif key == "edge_index":
            out[key] = np.take(value, edges, axis=1) - np.repeat(moved, edge_counts)
        elif key == "root_index":
            out[key] = new_ptr[:-1].copy()
    if "edge_label_index" in arrays:
        src, dst, neg = out["src_index"], out["dst_index"], out["neg_index"]
        k = neg.shape[1]
        out["edge_label_index"] = np.concatenate(
            [np.stack([src, dst]), np.stack([np.repeat(src, k), neg.reshape(-1)])], axis=1
        )
        out["edge_label"] = np.concatenate([np.ones(b, np.float32), np.zeros(b * k, np.float32)])
    return {key: out[key] for key in arrays}


def _labels(column: Column, meta: RecordsMeta) -> np.ndarray:
    """Class labels with -1 where unlabeled, or multi-hot targets with NaN rows."""
    labels = _array(column)
    if meta.label != "targets":
        return pc.fill_null(labels, -1).to_numpy().astype(np.int64)
    width = meta.classes or 0
    values = labels.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
    valid = ~labels.is_null().to_numpy(zero_copy_only=False)
    out = np.full((len(labels), width), np.nan, np.float32)
    out[valid] = values.reshape(int(valid.sum()), width)
    return out


def by_type(arrays: dict[str, np.ndarray], meta: RecordsMeta) -> dict[str, dict[str, np.ndarray]]:
    """A typed batch's arrays split by node type and by relation (keys ``"type:<name>"`` and
    ``"relation:<name>"``), each type's nodes and each relation's edges in batch order, edge
    indices into their types' nodes. A type's ``root_index`` lists the roots of its type; in a
    graph keyed by strings its ``node_key`` holds its nodes' strings."""
    node_type, edge_type = arrays["node_type"], arrays["edge_type"]
    local = local_index(node_type)
    out: dict[str, dict[str, np.ndarray]] = {}
    for t, (name, width) in enumerate(meta.node_types):
        nodes = np.nonzero(node_type == t)[0]
        part = {
            key: arrays[key][nodes] for key in ("node_id", "hop", "in_degree", "batch", "node_key") if key in arrays
        }
        part["x"] = _gather(arrays["feature_offsets"], arrays["feature_values"], nodes, width)
        out[f"type:{name}"] = part
    roots = arrays["ptr"][:-1]
    for t, (name, _) in enumerate(meta.node_types):
        mine = roots[node_type[roots] == t]
        out[f"type:{name}"]["root_index"] = local[mine]
    for r, relation in enumerate(meta.relations):
        edges = np.nonzero(edge_type == r)[0]
        part = {key: arrays[key][..., edges] for key in ("edge_index", "edge_weight", "edge_layers")}
        part["edge_index"] = local[part["edge_index"]]
        if "edge_feature_offsets" in arrays:
            offsets, values = arrays["edge_feature_offsets"], arrays["edge_feature_values"]
            part["edge_attr"] = _gather(offsets, values, edges, relation.edge_feature_dim)
        out[f"relation:{relation.name}"] = part
    return out


def local_index(node_type: np.ndarray) -> np.ndarray:
    """Each node's index among the batch's nodes of its type, in batch order."""
    order = np.argsort(node_type, kind="stable")
    starts = np.searchsorted(node_type[order], node_type[order])
    local = np.empty(len(node_type), np.int64)
    local[order] = np.arange(len(node_type)) - starts
    return local


def _gather(offsets: np.ndarray, values: np.ndarray, rows: np.ndarray, width: int) -> np.ndarray:
    """Rows ``rows`` of a list column (``offsets``, ``values``) of which each of those rows
    holds ``width`` values."""
    if len(rows) and not np.all(offsets[rows + 1] - offsets[rows] == width):
        raise ValueError(f"a feature vector of another width than its type's {width}")
    return values[offsets[rows][:, None] + np.arange(width)].reshape(len(rows), width)


def _array(column: Column) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        # One chunk (a row group, or a batch within one) is used as it is: combining copies.
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


def _list(column: Column) -> tuple[np.ndarray, pa.Array]:
    """A list column's offsets (from 0, int64, one per row and the end) and its values."""
    array = _array(column)
    offsets = array.offsets.to_numpy().astype(np.int64)
    return offsets - offsets[0], array.flatten()


def _values(column: Column) -> np.ndarray:
    return _list(column)[1].to_numpy(zero_copy_only=False)


def _fixed(column: Column, width: int) -> np.ndarray:
    """A ``list<fixed_size_list<float32, width>>`` column's vectors as one ``[n, width]`` array."""
    vectors = _list(column)[1]
    values = vectors.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
    return values.reshape(len(vectors), width)


def _ragged(column: Column) -> tuple[np.ndarray, np.ndarray]:
    """A ``list<list<float32>>`` column's inner offsets (one per node or edge, and the end) and
    values."""
    inner = _list(column)[1]
    offsets = inner.offsets.to_numpy().astype(np.int64)
    return offsets - offsets[0], inner.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
