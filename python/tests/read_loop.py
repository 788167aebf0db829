"""Readers reading one output directory over and over while graphflat replaces it.

``python read_loop.py DIR COLUMN STOP`` reads ``DIR`` with pandas (``pd.read_parquet(dir)``) and
DuckDB (``read_parquet('DIR/*.parquet')``) in turn until the file ``STOP`` exists, and prints one
JSON object per read (after one saying it is ready): the reader, the rows it read and how many distinct values of ``COLUMN``
they hold (a read that mixes two versions of a table keyed by ``COLUMN`` holds repeats), or the
error it raised and whether it is a "not found" (the retryable error a reader gets when a
switch lands between its listing and its opening of a file), and whether a switch landed during
the read (``straddled``: the directory's inode changed). ``tests/switch.rs`` asserts on it.
"""

from __future__ import annotations

import json
import os
import sys

import duckdb
import pandas as pd


def main(directory: str, column: str, stop: str) -> None:
    readers = {
        "pandas": lambda: pd.read_parquet(directory, columns=[column])[column],
        "duckdb": lambda: duckdb.sql(f"select {column} from read_parquet('{directory}/*.parquet')").df()[column],
    }
    print(json.dumps({"ready": True}))
    sys.stdout.flush()
    while not os.path.exists(stop):
        for name, read in readers.items():
            # A switch exchanges the directory at the path: its inode tells whether one landed
            # during the read, which then listed one version and looked its files up in the other
            # (pyarrow and DuckDB skip a listed file they then find gone).
            before = _inode(directory)
            try:
                values = read()
                line = {"reader": name, "rows": len(values), "distinct": int(values.nunique())}
            except Exception as error:  # noqa: BLE001: every error is reported, then judged
                text = f"{type(error).__name__}: {error}"
                missing = isinstance(error, FileNotFoundError) or any(
                    words in text for words in ("No such file", "No files found", "not found", "does not exist")
                )
                line = {"reader": name, "error": text[:300], "not_found": missing}
            line["straddled"] = before is None or _inode(directory) != before
            print(json.dumps(line))
            sys.stdout.flush()


def _inode(directory: str) -> int | None:
    """The inode at ``directory`` now; ``None`` between a fallback switch's renames."""
    try:
        return os.stat(directory).st_ino
    except FileNotFoundError:
        return None


if __name__ == "__main__":
    main(*sys.argv[1:4])
