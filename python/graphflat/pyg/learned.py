"""A model's learned embedding table in PyTorch (``[train] learned_embedding_dim``).

:class:`LearnedRows` holds the table GraphTrainer commits in ``<model>/embeddings`` as one
``nn.Embedding`` per node type that has rows (one in a homogeneous model), and gives a batch's
nodes their rows by id, or by original string in a graph keyed by strings: a node without a row
(new since training) gets zeros, GraphInfer's default (``missing_embedding = "zero"``). The rows
are parameters: fine-tuning trains them with the model (``torch.optim.SparseAdam`` takes them
with ``sparse=True``), and :func:`graphflat.pyg.save_model` writes them back as the model's table.

The whole table is held in memory (``N x D`` floats, and the ids): this is for tables that fit
one process; GraphInfer and GraphTrainer keep tables of any size sharded over their workers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch import Tensor, nn

#: The module key of a homogeneous model's one table (a typed model's are its types' names).
_ALL = "node"


class LearnedRows(nn.Module):
    """Each node's learned row, per node type: ``ids[t]`` (``[N_t]``, int64 or strings, as the
    node tables have them) and ``embeddings[t]`` (``[N_t, D]``); ``t`` is the type's name, or
    ``None`` in a homogeneous model."""

    def __init__(self, tables: dict[str | None, tuple[pa.Array, Tensor]], dim: int, *, sparse: bool = False) -> None:
        super().__init__()
        self.dim = dim
        self.ids: dict[str | None, pa.Array] = {}
        self.embeddings = nn.ModuleDict()
        for name, (ids, rows) in tables.items():
            ids = _plain_ids(ids, name)
            where = f"node type {name!r}: " if name is not None else ""
            if rows.shape != (len(ids), dim):
                raise ValueError(f"{where}{len(ids)} ids for rows of shape {tuple(rows.shape)} (width {dim})")
            if len(pc.unique(ids)) != len(ids):
                raise ValueError(f"{where}an id twice (a node has one row)")
            if not torch.isfinite(rows).all():
                raise ValueError(f"{where}a row with a value that is NaN or infinite")
            self.ids[name] = ids
            embedding = nn.Embedding(len(ids), dim, sparse=sparse) if len(ids) else None
            if embedding is not None:
                embedding.weight.data.copy_(rows)
                self.embeddings[name or _ALL] = embedding

    @property
    def keyed_by_strings(self) -> bool | None:
        """Whether the rows are keyed by strings (``None``: no rows to tell)."""
        kinds = {pa.types.is_string(ids.type) for ids in self.ids.values() if len(ids)}
        return kinds.pop() if len(kinds) == 1 else None

    def check(self, dim: int, types: Sequence[str] | None, strings: bool) -> None:
        """Raises ``ValueError`` unless these rows fit a model whose rows are ``dim`` wide, of
        the node ``types`` of a typed model (``None``: a homogeneous one), in a graph keyed by
        ``strings`` or by integers: what GraphInfer reads (the other checks are made when built)."""
        if self.dim != dim:
            raise ValueError(f"rows {self.dim} wide for a model of learned rows {dim} wide")
        names = set(self.ids)
        if types is None and names - {None}:
            raise ValueError(f"rows of node types {sorted(names - {None})} for a homogeneous model")
        if types is not None and None in names:
            raise ValueError("rows without a node type for a typed model")
        if types is not None and names - set(types):
            raise ValueError(
                f"rows of {sorted(names - set(types))}, node types the model gives no rows ({list(types)})"
            )
        kinds = {pa.types.is_string(ids.type) for ids in self.ids.values() if len(ids)}
        if len(kinds) > 1:
            raise ValueError("rows keyed by integers in one type and by strings in another")
        if kinds - {strings}:
            kind = {True: "strings", False: "integers"}
            raise ValueError(f"rows keyed by {kind[not strings]} for a graph keyed by {kind[strings]}")

    @classmethod
    def from_table(cls, table: pa.Table, dim: int, *, sparse: bool = False) -> LearnedRows:
        """From a table of ``node_id``, ``embedding`` (``fixed_size_list<float32, dim>``) and,
        in a typed model's, ``node_type`` (the schema of ``<model>/embeddings``)."""
        typed = "node_type" in table.column_names
        if typed and table["node_type"].null_count:
            raise ValueError("a row with a null node_type")
        types = pc.unique(table["node_type"]).to_pylist() if typed else [None]
        tables = {}
        for name in types:
            part = table.filter(pc.equal(table["node_type"], name)) if typed else table
            ids = part["node_id"].combine_chunks()
            values = part["embedding"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
            rows = torch.from_numpy(np.asarray(values, np.float32).reshape(len(part), dim).copy())
            tables[name] = (ids, rows)
        return cls(tables, dim, sparse=sparse)

    @classmethod
    def of_records(
        cls,
        records,
        dim: int,
        *,
        types: Sequence[str] = (),
        std: float = 1.0,
        seed: int = 0,
        sparse: bool = False,
    ) -> LearnedRows:
        """A row for every node of the record set ``records`` (``open_records(path)``), of the
        node ``types`` in a typed set (every type when empty), drawn ``N(0, std)`` (as
        ``torch.nn.Embedding`` and ``learned_embedding_init_std``'s default) from ``seed``: a
        model trained in PyTorch with its own rows. Reads every record once."""
        meta = records.meta
        names = [n for n, _ in meta.node_types] if meta.typed else [None]
        unknown = sorted(set(types) - set(names))
        if unknown:
            known = ", ".join(n for n in names if n is not None) or "none: the records are of a homogeneous graph"
            raise ValueError(f"types {unknown} are no node types of the records ({known})")
        wanted = set(types) or set(names)
        seen: dict[str | None, list[pa.Array]] = {n: [] for n in names if n in wanted}
        for batch in records.batches(split=None, batch_size=4096, shuffle=False):
            arrays = batch.arrays()
            ids = pa.array(arrays["node_key"] if "node_key" in arrays else arrays["node_id"])
            kinds = arrays["node_type"] if meta.typed else np.zeros(len(ids), np.int64)
            for t, name in enumerate(names):
                if name in seen:
                    seen[name].append(pc.unique(ids.filter(pa.array(kinds == t))))
        generator = torch.Generator().manual_seed(seed)
        tables = {}
        for name, parts in seen.items():
            ids = pc.unique(pa.chunked_array(parts, parts[0].type if parts else pa.int64()))
            ids = ids.take(pc.sort_indices(ids))
            tables[name] = (ids, torch.randn(len(ids), dim, generator=generator) * std)
        return cls(tables, dim, sparse=sparse)

    def rows(self, ids: Tensor | Sequence, node_type: str | None = None) -> Tensor:
        """The rows of the nodes ``ids`` (``[N]``: a tensor of ids, or a list of the nodes'
        strings) of ``node_type`` -> ``[N, D]``; zeros where a node has no row."""
        query = pa.array(ids.cpu().numpy() if isinstance(ids, Tensor) else list(ids))
        known, key = self.ids.get(node_type), node_type or _ALL
        if known is None or key not in self.embeddings:
            return torch.zeros(len(query), self.dim)
        embedding = self.embeddings[key]
        at = pc.index_in(query, value_set=known)
        found = torch.from_numpy(at.is_valid().to_numpy(zero_copy_only=False))
        index = torch.from_numpy(at.fill_null(0).to_numpy().astype(np.int64))
        return embedding(index) * found[:, None].to(embedding.weight.dtype)

    def to_table(self) -> pa.Table:
        """The rows as ``<model>/embeddings`` holds them, each type's rows sorted by id."""
        item = pa.field("item", pa.float32(), nullable=False)
        parts = []
        for name, ids in self.ids.items():
            if len(ids) == 0:
                continue
            order = pc.sort_indices(ids).to_numpy()
            weight = self.embeddings[name or _ALL].weight.detach().cpu().numpy()[order]
            values = pa.array(weight.reshape(-1), pa.float32())
            columns = {
                "node_id": ids.take(pa.array(order)),
                "embedding": pa.FixedSizeListArray.from_arrays(values, type=pa.list_(item, self.dim)),
            }
            if name is not None:
                columns = {"node_type": pa.array([name] * len(ids), pa.string())} | columns
            parts.append(pa.table(columns))
        return pa.concat_tables(parts) if parts else pa.table({})


def _plain_ids(ids: pa.Array, name: str | None) -> pa.Array:
    """Ids in one encoding to look up in (int64, or utf8 from any string encoding), refused
    where GraphInfer refuses them: null, or an empty string."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    if pa.types.is_dictionary(ids.type):
        ids = ids.dictionary_decode()
    where = f"node type {name!r}: " if name is not None else ""
    if ids.null_count:
        raise ValueError(f"{where}a null id")
    if pa.types.is_integer(ids.type):
        return ids.cast(pa.int64())
    if pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type) or pa.types.is_string_view(ids.type):
        ids = ids.cast(pa.string())
        if len(ids) and pc.any(pc.equal(pc.utf8_length(ids), 0)).as_py():
            raise ValueError(f"{where}an empty string id")
        return ids
    raise ValueError(f"{where}ids of type {ids.type}: integers or strings")
