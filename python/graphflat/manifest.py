"""The manifest of a committed output: the parts a run committed, with their rows, sizes and
checksums, the stage and its settings.

It lives in the footer of ``_manifest.parquet`` (a Parquet file of no rows with the table's
schema, key ``graphflat.manifest``), beside an empty ``_SUCCESS``; outputs of earlier versions
keep it as JSON in ``_SUCCESS``. ``schemas/README.md`` in the repository states the layout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from graphflat.paths import filesystem_and_path, join

MANIFEST = "_manifest.parquet"
SUCCESS = "_SUCCESS"
KEY = b"graphflat.manifest"


@dataclass(frozen=True)
class Part:
    """One committed part: its file name in the output, rows, bytes and CRC-32 of its bytes."""

    name: str
    rows: int
    bytes: int
    crc32: int


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
    def from_json(value: dict) -> "Manifest":
        parts = tuple(Part(p["name"], int(p["rows"]), int(p["bytes"]), int(p["crc32"])) for p in value["parts"])
        return Manifest(
            run=value["run"],
            stage=value["stage"],
            rows=int(value["rows"]),
            bytes=int(value["bytes"]),
            parts=parts,
            settings=value.get("settings"),
            raw=value,
        )


def read_manifest(path: str, filesystem: Optional[pafs.FileSystem] = None) -> Optional[Manifest]:
    """The manifest of the output at ``path`` (a local directory or an ``s3://`` URI).

    Returns ``None`` for a directory that holds none (not committed, or another tool's).
    """
    fs, root = filesystem_and_path(path, filesystem)
    manifest = join(root, MANIFEST)
    if fs.get_file_info(manifest).type == pafs.FileType.File:
        with fs.open_input_file(manifest) as f:
            metadata = pq.read_metadata(f).metadata or {}
        if KEY not in metadata:
            raise ValueError(f"{manifest}: not a manifest of graphflat (no {KEY.decode()} in its footer)")
        return Manifest.from_json(json.loads(metadata[KEY]))
    success = join(root, SUCCESS)
    if fs.get_file_info(success).type != pafs.FileType.File:
        return None
    with fs.open_input_file(success) as f:
        text = f.read().decode("utf-8", errors="replace").strip()
    # Hadoop and Spark write an empty _SUCCESS: no manifest.
    return Manifest.from_json(json.loads(text)) if text.startswith("{") else None
