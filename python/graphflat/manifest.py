"""The manifest of a committed output: the parts a run committed, with their rows, sizes and
checksums, the stage and its settings.

It lives in the footer of ``_manifest.parquet`` (a Parquet file of no rows with the table's
schema, key ``graphflat.manifest``), beside an empty ``_SUCCESS``; outputs of earlier versions
keep it as JSON in ``_SUCCESS``. ``schemas/README.md`` in the repository states the layout.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from graphflat.paths import filesystem_and_path, join

MANIFEST = "_manifest.parquet"
SUCCESS = "_SUCCESS"
KEY = b"graphflat.manifest"
#: The newest manifest format this package reads.
FORMAT = 2


#: The block size of a format-2 manifest's per-block checksums.
BLOCK_BYTES = 256 << 10


@dataclass(frozen=True)
class Part:
    """One committed part: its file name in the output, rows, bytes, CRC-32 of its bytes and
    the CRC-32 of each :data:`BLOCK_BYTES` block (empty in an earlier version's manifest)."""

    name: str
    rows: int
    bytes: int
    crc32: int
    blocks: tuple[int, ...] = ()


def _blocks(text: str) -> tuple[int, ...]:
    """The block checksums a manifest keeps as the base64 of their little-endian bytes."""
    raw = base64.b64decode(text) if text else b""
    return tuple(int.from_bytes(raw[i : i + 4], "little") for i in range(0, len(raw) - len(raw) % 4, 4))


@dataclass(frozen=True)
class Manifest:
    """What one run committed (the JSON object itself is ``raw``)."""

    run: str
    stage: str
    rows: int
    bytes: int
    parts: tuple[Part, ...]
    settings: Any = None
    raw: dict = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(value: dict, file: str = "manifest") -> Manifest:
        """The manifest of the JSON object ``value`` read from ``file``, checked as the Rust
        readers check it: a known format, plain part names (or one folder deep, as a model's
        ``embeddings/part-....parquet``) listed once, totals that add up."""
        parts = tuple(
            Part(p["name"], int(p["rows"]), int(p["bytes"]), int(p["crc32"]), _blocks(p.get("blocks", "")))
            for p in value["parts"]
        )
        manifest = Manifest(
            run=value["run"],
            stage=value["stage"],
            rows=int(value["rows"]),
            bytes=int(value["bytes"]),
            parts=parts,
            settings=value.get("settings"),
            raw=value,
        )
        manifest._check(int(value.get("format", 1)), file)
        return manifest

    def _check(self, format: int, file: str) -> None:
        if format > FORMAT:
            raise ValueError(f"{file}: manifest format {format} is newer than this package reads ({FORMAT})")
        names = [p.name for p in self.parts]
        bad = [n for n in names if not _listed_name(n)]
        if bad:
            raise ValueError(f"{file}: part {bad[0]!r} is not a file name of the table's directory")
        if len(set(names)) != len(names):
            raise ValueError(f"{file}: a part is listed twice")
        for part in self.parts:
            needed = -(-part.bytes // BLOCK_BYTES)
            if format >= 2 and len(part.blocks) != needed:
                raise ValueError(
                    f"{file}: part {part.name} of {part.bytes} bytes has {len(part.blocks)} block checksums "
                    f"where it needs {needed}"
                )
        rows, size = sum(p.rows for p in self.parts), sum(p.bytes for p in self.parts)
        if (rows, size) != (self.rows, self.bytes):
            raise ValueError(
                f"{file}: its parts hold {rows} rows and {size} bytes where its totals say {self.rows} and {self.bytes}"
            )


def read_manifest(path: str, filesystem: pafs.FileSystem | None = None, shown: str | None = None) -> Manifest | None:
    """The manifest of the output at ``path`` (a local directory or an ``s3://`` URI).

    Returns ``None`` for a directory that holds none (not committed, or another tool's).
    ``shown`` names the directory in messages where ``path`` is not the user's (a held
    version's, see :mod:`graphflat.hold`).
    """
    fs, root = filesystem_and_path(path, filesystem)
    manifest, named = join(root, MANIFEST), join(shown or root, MANIFEST)
    if fs.get_file_info(manifest).type == pafs.FileType.File:
        # One read of the whole file: a manifest a commit replaces meanwhile is read whole.
        with fs.open_input_stream(manifest) as f:
            data = f.read()
        try:
            metadata = pq.read_metadata(pa.BufferReader(data)).metadata or {}
        except pa.ArrowInvalid as e:
            raise ValueError(f"{named}: not a Parquet file ({e})") from e
        if KEY not in metadata:
            raise ValueError(f"{named}: not a manifest of graphflat (no {KEY.decode()} in its footer)")
        return Manifest.from_json(json.loads(metadata[KEY]), named)
    success = join(root, SUCCESS)
    if fs.get_file_info(success).type != pafs.FileType.File:
        return None
    with fs.open_input_file(success) as f:
        text = f.read().decode("utf-8", errors="replace").strip()
    # Hadoop and Spark write an empty _SUCCESS: no manifest.
    return Manifest.from_json(json.loads(text), join(shown or root, SUCCESS)) if text.startswith("{") else None


def _plain_name(name: str) -> bool:
    return name not in ("", ".", "..") and not any(c in name for c in "/\\\0")


def _listed_name(name: str) -> bool:
    """A plain file name of the directory, or one in a folder of it: never out of it."""
    segments = name.split("/")
    return len(segments) <= 2 and all(_plain_name(s) for s in segments)
