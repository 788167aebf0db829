"""A committed output as one Arrow table, every part checked against the manifest."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from graphflat.checked import ChangedError, refuse_special
from graphflat.hold import Hold
from graphflat.manifest import Manifest, Part, read_manifest
from graphflat.paths import filesystem_and_path, join


class NotCommittedError(FileNotFoundError):
    """The path holds no committed output of graphflat (no manifest)."""


def read_table(
    path: str,
    columns: Sequence[str] | None = None,
    filesystem: pafs.FileSystem | None = None,
) -> pa.Table:
    """Read the committed output at ``path`` (a local directory or an ``s3://`` URI).

    Only the parts the manifest lists are read, in its order; each part's bytes are checked
    against the manifest's size and CRC-32 (one read: the CRC runs over the bytes decoded) and
    its rows against the manifest's count. A folder of a committed output that has no manifest
    of its own, such as a model's learned embedding table (``<model>/embeddings``), is read
    from its parent's manifest: the parts it lists in that folder.

    Args:
        path: the output directory.
        columns: the columns to decode (all when ``None``).
        filesystem: a pyarrow file system to read through instead of the one ``path`` names.

    Returns:
        A table of ``manifest.rows`` rows with the output's schema.

    Raises:
        NotCommittedError: no manifest at ``path`` (nor a part in its parent's in this folder).
        ValueError: ``path`` holds a model, whose weights are no table.
        ChangedError: a part whose size, CRC-32 or rows differ from the manifest's.
    """
    fs, root = filesystem_and_path(path, filesystem)
    with Hold(fs, root) as hold:
        manifest = read_manifest(hold.reading, fs, hold.root)
        if manifest is None:
            return _read_folder(path, columns, filesystem)
        if not all(part.name.endswith(".parquet") for part in manifest.parts):
            raise ValueError(
                f"{path} holds a model (its weights are no table): read its learned embedding table with "
                f"read_table({path.rstrip('/') + '/embeddings'!r}), its weights with graphflat.pyg.load_model"
            )
        tables = [_read_part(fs, hold, manifest, part, columns) for part in manifest.parts]
        if not tables:
            return _empty(fs, hold.reading, columns)
        return pa.concat_tables(tables)


def _read_folder(path: str, columns, filesystem: pafs.FileSystem | None) -> pa.Table:
    """The parts the parent directory's manifest lists in the folder ``path``."""
    parent, _, folder = path.rstrip("/").rpartition("/")
    if not (parent and folder):
        raise NotCommittedError(f"{path}: no manifest of a committed graphflat output")
    fs, root = filesystem_and_path(parent, filesystem)
    with Hold(fs, root) as hold:
        manifest = read_manifest(hold.reading, fs, hold.root)
        parts = [p for p in manifest.parts if p.name.startswith(folder + "/")] if manifest else []
        if manifest is None or not parts:
            raise NotCommittedError(f"{path}: no manifest of a committed graphflat output")
        return pa.concat_tables([_read_part(fs, hold, manifest, part, columns) for part in parts])


def _read_part(fs: pafs.FileSystem, hold: Hold, manifest: Manifest, part: Part, columns) -> pa.Table:
    """One part's rows, its bytes and rows checked against ``part``, read in the version
    ``hold`` holds."""
    path = join(hold.reading, part.name)
    where = hold.shown(path)
    refuse_special(fs, path, manifest.run, where)
    try:
        with fs.open_input_file(path) as f:
            data = f.read()
    except FileNotFoundError as e:
        now = read_manifest(hold.reading, fs, hold.root)
        if now is not None and now.run != manifest.run:
            raise ChangedError(f"{where}: run {now.run} replaced the output while it was read; read it again") from e
        raise FileNotFoundError(f"{where}: missing; the manifest of run {manifest.run} lists it") from e
    crc = zlib.crc32(data)
    if len(data) != part.bytes or crc != part.crc32:
        raise ChangedError(
            f"{where}: {len(data)} bytes with CRC-32 {crc:08x}, where the manifest of run {manifest.run} says "
            f"{part.bytes} bytes with CRC-32 {part.crc32:08x}: the part changed after its commit"
        )
    table = pq.read_table(pa.BufferReader(data), columns=columns)
    if table.num_rows != part.rows:
        raise ChangedError(f"{where}: {table.num_rows} rows, where the manifest of run {manifest.run} says {part.rows}")
    return table


def _empty(fs: pafs.FileSystem, root: str, columns) -> pa.Table:
    """A table of no rows with the output's schema (the manifest file's)."""
    with fs.open_input_file(join(root, "_manifest.parquet")) as f:
        schema = pq.read_schema(f)
    table = schema.empty_table()
    return table.select(list(columns)) if columns is not None else table
