"""Every reader data teams use, on graphflat's output directories, against the manifest.

``python readers.py DIR...`` reads each directory with pyarrow (``pq.read_table`` and
``ds.dataset``), pandas, polars (the directory, ``*.parquet`` and ``**/*.parquet``), DuckDB
(``*.parquet`` and ``**/*.parquet``) and Spark's rule (every file below the directory whose path
has no component starting with ``_`` or ``.``, read as Parquet), with no options, and prints one
JSON object per directory: for each reader the rows it read and whether its rows equal the
manifest's (``graphflat.read_table``, which reads only the listed parts and checks their bytes),
compared as sorted rows, or the error it raised. ``tests/readers.rs`` drives the jobs and asserts
on this.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from graphflat import read_manifest, read_table


def spark_rule(directory: str) -> pa.Table:
    """The files Spark takes as data (no ``_`` or ``.`` component), read as Parquet."""
    files = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        files += [os.path.join(root, n) for n in names if not n.startswith(("_", "."))]
    return pa.concat_tables([pq.read_table(f) for f in sorted(files)])


def readers(d: str) -> dict[str, Callable[[], pa.Table]]:
    """Each reader's read of the directory ``d``, as an Arrow table. An ``s3://`` URI is read by
    the readers that take one with the standard AWS environment alone (``AWS_ENDPOINT_URL`` for
    an S3-compatible server): pyarrow and pandas."""
    if d.startswith("s3://"):
        return {
            "pyarrow.parquet.read_table": lambda: pq.read_table(d),
            "pyarrow.dataset": lambda: ds.dataset(d).to_table(),
            "pandas.read_parquet": lambda: pa.Table.from_pandas(pd.read_parquet(d), preserve_index=False),
        }
    return {
        "pyarrow.parquet.read_table": lambda: pq.read_table(d),
        "pyarrow.dataset": lambda: ds.dataset(d).to_table(),
        "pandas.read_parquet": lambda: pa.Table.from_pandas(pd.read_parquet(d), preserve_index=False),
        "polars.read_parquet(dir)": lambda: pl.read_parquet(d).to_arrow(),
        "polars.read_parquet(*.parquet)": lambda: pl.read_parquet(f"{d}/*.parquet").to_arrow(),
        "polars.read_parquet(**/*.parquet)": lambda: pl.read_parquet(f"{d}/**/*.parquet").to_arrow(),
        "duckdb(*.parquet)": lambda: duckdb.sql(f"select * from read_parquet('{d}/*.parquet')").to_arrow_table(),
        "duckdb(**/*.parquet)": lambda: duckdb.sql(f"select * from read_parquet('{d}/**/*.parquet')").to_arrow_table(),
        "spark rule": lambda: spark_rule(d),
    }


def canonical(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` in ``schema``'s columns and types (readers differ in both: large lists, string
    views, pandas' round trip), sorted by every column of scalars (readers differ in order)."""
    table = table.select(schema.names).cast(schema)
    keys = [(f.name, "ascending") for f in schema if not pa.types.is_nested(f.type)]
    return table.sort_by(keys) if keys else table


def check(d: str) -> dict:
    """Each reader's result on the directory ``d`` (see the module doc)."""
    manifest = read_manifest(d)
    out: dict = {"dir": d, "manifest_rows": manifest.rows if manifest else None}
    reference = read_table(d) if manifest else None
    expected = canonical(reference, reference.schema) if reference is not None else None
    results = {}
    for name, read in readers(d).items():
        try:
            table = read()
            equal = expected is not None and canonical(table, expected.schema).equals(expected)
            results[name] = {"rows": table.num_rows, "equal": equal}
        except Exception as e:  # noqa: BLE001 (every failure of a reader is a result to report)
            results[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    out["readers"] = results
    return out


if __name__ == "__main__":
    for directory in sys.argv[1:]:
        print(json.dumps(check(directory)), flush=True)
