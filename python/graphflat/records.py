"""GraphFlat's records from Python: a record set's settings, and batches of its records for a
training loop, read a row group at a time, every byte checked against the manifest.

A flatten writes each split's records in row groups of their own, so a pass over one split
reads only that split's row groups. Row groups are the unit that a pass shuffles and divides
among ``DataLoader`` workers and DDP ranks: each reads a disjoint share, and together they read
every record of the split once.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from graphflat.checked import ChangedError, CheckedFile
from graphflat.collate import collate, edge_offsets, take
from graphflat.hold import Hold
from graphflat.manifest import Manifest, Part, read_manifest
from graphflat.meta import RecordsMeta
from graphflat.paths import filesystem_and_path, join
from graphflat.table import NotCommittedError

#: A row group holds the records of this split (``None``: records without one), or ``MIXED``.
MIXED = "\0mixed"


@dataclass(frozen=True)
class RowGroup:
    """One row group of a record set: its part, its index in the part, rows and split."""

    part: Part
    index: int
    rows: int
    split: str | None


class _Group:
    """The records of one row group as read (``table``), collated once when a batch of them is
    first laid out, so that each batch within it is a numpy gather (``collate.take``)."""

    def __init__(self, table: pa.Table, meta: RecordsMeta) -> None:
        self.table, self.meta = table, meta
        self._collated: tuple[dict[str, np.ndarray], np.ndarray] | None = None

    def take(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        if self._collated is None:
            self._collated = (collate(self.table, self.meta), edge_offsets(self.table))
        return take(*self._collated, rows)


class RecordsBatch:
    """``len(self)`` records of one record set, as an Arrow table (``table``).

    :meth:`arrays` lays them out as one graph (``graphflat.collate`` states the arrays and their
    shapes); :meth:`to_pyg` gives the same as a ``torch_geometric`` batch.
    """

    def __init__(
        self, table: pa.Table | None, meta: RecordsMeta, *, _rows: tuple[_Group, np.ndarray] | None = None
    ) -> None:
        # A batch of :meth:`Records.batches` within one row group of homogeneous records is
        # ``_rows`` (the group, the rows in batch order): its table is taken only when asked for.
        self._table, self.meta, self._rows = table, meta, _rows

    @property
    def table(self) -> pa.Table:
        if self._table is None:
            group, rows = self._rows
            self._table = group.table.take(rows)
        return self._table

    def __len__(self) -> int:
        return len(self._rows[1]) if self._table is None else self._table.num_rows

    def arrays(self) -> dict[str, np.ndarray]:
        """The records as one graph: numpy arrays named and shaped as ``graphflat.collate``
        states."""
        if self._rows is not None:
            group, rows = self._rows
            return group.take(rows)
        return collate(self.table, self.meta)

    def to_pyg(self):
        """The records as a ``torch_geometric.data.Batch`` (``HeteroData`` for typed records);
        needs ``graphflat[pyg]``. ``graphflat.pyg.data`` states the attributes."""
        from graphflat.pyg.data import to_pyg

        return to_pyg(self.arrays(), self.meta)


class Records:
    """A committed record set (GraphFlat's output) at ``path``, a local directory or an
    ``s3://`` URI: its settings (:attr:`meta`) and its records in batches (:meth:`batches`).

    Opening reads the manifest and each part's footer (checked); no record is read. On a local
    disk the record set holds the version it opened (:mod:`graphflat.hold`) until :meth:`close`
    or until it is collected: a flatten that replaces it meanwhile changes nothing it reads.
    """

    def __init__(self, path: str, filesystem: pafs.FileSystem | None = None) -> None:
        self.path = path
        self._fs, self._root = filesystem_and_path(path, filesystem)
        # Every read goes to the version opened here, whatever replaces it meanwhile.
        self._hold = Hold(self._fs, self._root)
        manifest = read_manifest(self._hold.reading, self._fs, self._root)
        if manifest is None:
            raise NotCommittedError(f"{path}: no manifest of a committed graphflat output")
        if manifest.stage != "flatten":
            raise ValueError(f"{path}: a {manifest.stage} output, not a record set (a flatten's)")
        self.manifest: Manifest = manifest
        self.row_groups: list[RowGroup] = []
        self.meta: RecordsMeta | None = None
        self._footers: dict[str, pq.FileMetaData] = {}  # each part's, read (and checked) once
        for part in manifest.parts:
            with self._open(part) as file:
                parquet = pq.ParquetFile(file)
                self._footers[part.name] = parquet.metadata
                if self.meta is None:
                    schema = parquet.schema_arrow
                    self.meta = RecordsMeta.from_metadata(schema.metadata, join(self._root, part.name))
                self.row_groups.extend(_row_groups(part, parquet))
        if self.meta is None:
            raise ValueError(f"{path}: a record set of no parts")

    def __len__(self) -> int:
        return self.manifest.rows

    def close(self) -> None:
        """Lets the version go (see :mod:`graphflat.hold`); later reads read the output's
        current version's files, and fail with :class:`ChangedError` where it was replaced."""
        self._hold.close()

    def __enter__(self) -> Records:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    @property
    def keyed_by_strings(self) -> bool:
        """Whether the records' graph is keyed by strings (they carry ``node_keys``)."""
        footer = next(iter(self._footers.values()))
        return "node_keys" in footer.schema.to_arrow_schema().names

    def splits(self) -> dict[str | None, int]:
        """Records per split, from each row group's statistics or, where it has none (an
        earlier version's records), its split column (``MIXED``: a row group of several)."""
        counts: dict[str | None, int] = {}
        for group in self.row_groups:
            counts[group.split] = counts.get(group.split, 0) + group.rows
        return counts

    def batches(
        self,
        split: str | None = "train",
        batch_size: int = 512,
        shuffle: bool = True,
        seed: int = 0,
        epoch: int = 0,
        shard: tuple[int, int] | None = None,
        columns: list[str] | None = None,
    ) -> Iterator[RecordsBatch]:
        """The records of ``split`` (every record with ``None``) in batches of ``batch_size``
        (the last may be smaller).

        With ``shuffle``, the row groups and the records within each are in an order drawn from
        ``(seed, epoch)``: the same on every worker, another each epoch. Row groups are divided
        among shards, ``shard = (index, count)``; by default the ``DataLoader`` worker and the
        DDP rank this runs in (``torch.distributed``, when initialized) make the shard. Memory:
        one row group, its records collated (each batch within it is gathered from them), and
        one batch.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size {batch_size}: at least 1")
        rng = np.random.default_rng([seed, epoch])
        groups = [g for g in self.row_groups if split is None or g.split in (split, MIXED)]
        order = rng.permutation(len(groups)) if shuffle else np.arange(len(groups))
        index, count = shard if shard is not None else _current_shard()
        pending: list[tuple[_Group, np.ndarray]] = []  # rows not yet in a batch, in order
        waiting = 0
        for i in order[index::count]:
            table = self._read(groups[i], split, columns)
            rows = rng.permutation(table.num_rows) if shuffle else np.arange(table.num_rows)
            pending.append((_Group(table, self.meta), rows))
            waiting += table.num_rows
            while waiting >= batch_size:
                yield self._batch(pending, batch_size)
                waiting -= batch_size
        if waiting:
            yield self._batch(pending, waiting)

    def _batch(self, pending: list[tuple[_Group, np.ndarray]], size: int) -> RecordsBatch:
        """The first ``size`` rows of ``pending``, taken off it. Rows of one row group of
        homogeneous records are gathered from its collated arrays; others are taken from the
        tables."""
        pieces = []
        while size:
            group, rows = pending[0]
            pieces.append((group, rows[:size]))
            if len(rows) > size:
                pending[0] = (group, rows[size:])
            else:
                pending.pop(0)
            size -= len(pieces[-1][1])
        if len(pieces) == 1 and not self.meta.typed:
            return RecordsBatch(None, self.meta, _rows=pieces[0])
        return RecordsBatch(pa.concat_tables([group.table.take(rows) for group, rows in pieces]), self.meta)

    def _read(self, group: RowGroup, split: str | None, columns: list[str] | None) -> pa.Table:
        filtered = split is not None and group.split == MIXED
        wanted = columns if columns is None or not filtered or "split" in columns else [*columns, "split"]
        with self._open(group.part) as file:
            footer = self._footers[group.part.name]
            table = pq.ParquetFile(file, metadata=footer).read_row_group(group.index, columns=wanted)
        if table.num_rows != group.rows:
            where = join(self._root, group.part.name)
            raise ValueError(f"{where}: row group {group.index} holds {table.num_rows} rows, its footer {group.rows}")
        if filtered:
            table = table.filter(pc.equal(table["split"], split))
        return table if columns is None else table.select(columns)

    def _open(self, part: Part) -> CheckedFile:
        where = join(self._root, part.name)
        try:
            return CheckedFile(self._fs, join(self._hold.reading, part.name), self.manifest, part, where)
        except FileNotFoundError as e:
            now = read_manifest(self._hold.reading, self._fs, self._root)
            if now is not None and now.run != self.manifest.run:
                raise ChangedError(
                    f"{where}: run {now.run} replaced the records while they were read; open them again"
                ) from e
            raise FileNotFoundError(f"{where}: missing; the manifest of run {self.manifest.run} lists it") from e


def open_records(path: str, filesystem: pafs.FileSystem | None = None) -> Records:
    """The committed record set at ``path`` (see :class:`Records`)."""
    return Records(path, filesystem)


def _row_groups(part: Part, parquet: pq.ParquetFile) -> list[RowGroup]:
    """The row groups of a part, each with its split: its chunk statistics tell (this version
    writes them), else its split column, read."""
    footer = parquet.metadata
    names = [footer.schema.column(i).path for i in range(footer.num_columns)]
    column = names.index("split") if "split" in names else None
    groups = []
    for i in range(footer.num_row_groups):
        rows = footer.row_group(i).num_rows
        split: str | None = None
        if column is not None:
            stats = footer.row_group(i).column(column).statistics
            split = _split_of(stats, rows) if stats is not None else _split_read(parquet, i)
        groups.append(RowGroup(part, i, rows, split))
    return groups


def _split_of(stats: pq.Statistics, rows: int) -> str | None:
    if stats.null_count == rows:
        return None
    if stats.has_min_max and stats.null_count == 0 and stats.min == stats.max:
        return stats.min if isinstance(stats.min, str) else bytes(stats.min).decode()
    return MIXED


def _split_read(parquet: pq.ParquetFile, index: int) -> str | None:
    values = pc.unique(parquet.read_row_group(index, columns=["split"])["split"]).to_pylist()
    return values[0] if len(values) == 1 else MIXED


def _current_shard() -> tuple[int, int]:
    """(index, count) of this process's share: its ``DataLoader`` worker within its DDP rank.
    torch is asked only when the program imported it."""
    torch = sys.modules.get("torch")
    if torch is None:
        return 0, 1
    rank, world = 0, 1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    info = torch.utils.data.get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return rank * workers + worker, world * workers
