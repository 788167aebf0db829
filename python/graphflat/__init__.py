"""graphflat's outputs from Python.

A committed output of graphflat (records, scores, embeddings, pair scores, generated tables) is
a directory of Parquet parts, ``_manifest.parquet`` (no rows; its footer holds the manifest) and
an empty ``_SUCCESS``. Any Parquet reader reads the directory as it is (pyarrow, pandas, polars,
DuckDB, Spark); :func:`read_table` reads only the parts the manifest lists and checks each part's
size, CRC-32 and rows against it.
"""

from graphflat.checked import ChangedError
from graphflat.manifest import Manifest, Part, read_manifest
from graphflat.meta import RecordsMeta, Relation
from graphflat.records import Records, RecordsBatch, open_records
from graphflat.table import NotCommittedError, read_table

__all__ = [
    "ChangedError",
    "Manifest",
    "NotCommittedError",
    "Part",
    "Records",
    "RecordsBatch",
    "RecordsMeta",
    "Relation",
    "open_records",
    "read_manifest",
    "read_table",
]
