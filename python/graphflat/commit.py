"""Committing an output from Python the way graphflat's stages commit theirs, so that its readers
(GraphInfer reading a model, :func:`graphflat.read_table`) take it: the files under their final
names, then ``_manifest.parquet`` (no rows, no columns; the manifest in its footer, format 2 with
a CRC-32 per 256 kB block of every file), then an empty ``_SUCCESS``. Files of the output the
commit replaces that the new manifest does not list are removed after it.

The files are written under ``_temporary/<run>/`` first and moved into place, so a process
killed before the manifest leaves the committed output as it was (and the new run's files, under
names no reader takes, until the next commit). The manifest is written to a temporary name and
renamed: on a local file system without ``overwrite`` by a hard link, which fails when another
run committed meanwhile (create-if-absent, as the Rust commit); on S3 the last manifest written
wins (pyarrow has no conditional put), so two writers of one S3 output must not race.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
import zlib
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from graphflat import switch
from graphflat.guard import CommittedError, guard, kind
from graphflat.manifest import BLOCK_BYTES, FORMAT, KEY, MANIFEST, SUCCESS, Manifest, read_manifest
from graphflat.paths import filesystem_and_path, join

TEMPORARY = "_temporary"

__all__ = ["CommittedError", "commit", "new_run_id", "part_entry"]


def new_run_id() -> str:
    """A run id as graphflat's: 11 hex digits of milliseconds, then 8 random ones."""
    return f"{int(time.time() * 1000):011x}{secrets.randbits(32):08x}"


def part_entry(name: str, data: bytes, rows: int = 0) -> dict[str, Any]:
    """A manifest's entry for the file ``name`` holding ``data``."""
    blocks = b"".join(
        zlib.crc32(data[i : i + BLOCK_BYTES]).to_bytes(4, "little") for i in range(0, len(data), BLOCK_BYTES)
    )
    return {
        "name": name,
        "rows": rows,
        "bytes": len(data),
        "crc32": zlib.crc32(data),
        "blocks": base64.b64encode(blocks).decode(),
    }


def commit(
    path: str,
    run: str,
    files: dict[str, bytes],
    stage: str,
    settings: Any,
    *,
    overwrite: bool = False,
    filesystem: pafs.FileSystem | None = None,
    rows: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Commits ``files`` (name -> bytes; a name may lie in a folder, ``embeddings/part-...``) as
    run ``run``'s output at ``path``, with ``rows`` the rows of each Parquet part among them;
    returns the manifest. Raises :class:`CommittedError` where graphflat's own rule
    (:func:`graphflat.guard.guard`) refuses: ``path`` holds, lies in or holds in a folder a
    committed output of another kind, or one of this stage and not ``overwrite``."""
    fs, root = filesystem_and_path(path, filesystem)
    guard(path, stage, overwrite, filesystem)
    previous = read_manifest(path, filesystem)
    _no_foreign_files(fs, root, previous, files)
    if isinstance(fs, pafs.LocalFileSystem):
        os.makedirs(root, exist_ok=True)
        if switch.can_build(root, run):
            return _commit_local(root, run, files, stage, settings, overwrite, rows)
    staging = join(root, f"{TEMPORARY}/{run}")
    fs.create_dir(staging, recursive=True)
    for name, data in files.items():
        if os.path.dirname(name):
            fs.create_dir(join(staging, os.path.dirname(name)), recursive=True)
        with fs.open_output_stream(join(staging, f"{name}.staged")) as out:
            out.write(data)
    for name in files:
        if os.path.dirname(name):
            fs.create_dir(join(root, os.path.dirname(name)), recursive=True)
        fs.move(join(staging, f"{name}.staged"), join(root, name))
    manifest = _manifest(run, files, stage, settings, rows)
    try:
        _publish(fs, root, staging, manifest, create=not overwrite)
    except CommittedError:
        # Another run committed first: its output stays, this run's files go.
        for name in files:
            _remove(fs, join(root, name))
        fs.delete_dir(staging)
        _remove_empty(fs, join(root, TEMPORARY))
        raise
    with fs.open_output_stream(join(root, SUCCESS)):
        pass
    if previous is not None:
        gone = [part.name for part in previous.parts if part.name not in files]
        for name in gone:
            _remove(fs, join(root, name))
        # A folder the replaced output's parts emptied (a model's embeddings/) goes with them.
        for folder in sorted({os.path.dirname(name) for name in gone if os.path.dirname(name)}, reverse=True):
            _remove_empty(fs, join(root, folder))
    fs.delete_dir(staging)
    _remove_empty(fs, join(root, TEMPORARY))
    return manifest


def _manifest(run: str, files: dict[str, bytes], stage: str, settings: Any, rows: dict[str, int] | None) -> dict:
    """The manifest of run ``run`` committing ``files``."""
    rows = rows or {}
    parts = [part_entry(name, files[name], rows.get(name, 0)) for name in sorted(files)]
    return {
        "format": FORMAT,
        "run": run,
        "stage": stage,
        "rows": sum(p["rows"] for p in parts),
        "bytes": sum(p["bytes"] for p in parts),
        "block_bytes": BLOCK_BYTES,
        "parts": parts,
        "settings": settings,
    }


def _manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """``_manifest.parquet``: no rows, no columns, the manifest in its footer."""
    schema = pa.schema([], metadata={KEY: json.dumps(manifest, separators=(",", ":")).encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({}, schema=schema), sink)
    return sink.getvalue().to_pybytes()


def _commit_local(
    root: str, run: str, files: dict[str, bytes], stage: str, settings: Any, overwrite: bool, rows: dict | None
) -> dict[str, Any]:
    """:func:`commit` on a local file system: the version built beside the output and
    exchanged with it in one step, under the parent's lock (:mod:`graphflat.switch`); the
    replaced version is removed after."""
    manifest = _manifest(run, files, stage, settings, rows)
    with switch.ParentLock(root):
        previous = read_manifest(root)
        if previous is not None and previous.stage != stage:
            raise CommittedError(
                f"{root} holds {kind(previous.stage)} (run {previous.run}), committed while this run wrote, and "
                f"{stage} asked to write {kind(stage)}; an output of another kind is never replaced, with or without "
                "overwrite: choose another output directory"
            )
        if previous is not None and not overwrite:
            raise CommittedError(f"{root}: another run committed an output here meanwhile")
        listed = {part.name for part in previous.parts} if previous is not None else set()
        own = (lambda name: name in listed or f"-{previous.run}" in name) if previous is not None else (lambda _: False)
        switch.switch_in(root, run, files, _manifest_bytes(manifest), own)
    switch.remove_version(switch.sibling(root, run))
    return manifest


def _publish(fs: pafs.FileSystem, root: str, staging: str, manifest: dict[str, Any], create: bool) -> None:
    """Writes ``_manifest.parquet``: staged, then renamed into place (linked when ``create``)."""
    schema = pa.schema([], metadata={KEY: json.dumps(manifest, separators=(",", ":")).encode()})
    staged = join(staging, MANIFEST)
    with fs.open_output_stream(staged) as out:
        pq.write_table(pa.table({}, schema=schema), out)
    final = join(root, MANIFEST)
    if create and isinstance(fs, pafs.LocalFileSystem):
        try:
            os.link(staged, final)
        except FileExistsError:
            raise CommittedError(f"{root}: another run committed an output here meanwhile") from None
        os.unlink(staged)
    else:
        fs.move(staged, final)


def _remove(fs: pafs.FileSystem, where: str) -> None:
    try:
        fs.delete_file(where)
    except FileNotFoundError:
        pass


def _no_foreign_files(fs: pafs.FileSystem, root: str, previous: Manifest | None, files: dict[str, bytes]) -> None:
    """Raises :class:`CommittedError` when a folder the commit writes into, or the replaced
    output's parts lie in (a model's ``embeddings/``), holds a file no manifest lists: a reader
    of the folder would read it beside the parts, and removing it is not this commit's to do
    (GraphTrainer refuses the same)."""
    listed = {part.name for part in previous.parts} if previous is not None else set()
    folders = {os.path.dirname(name) for name in list(files) + sorted(listed) if os.path.dirname(name)}
    for folder in sorted(folders):
        for info in fs.get_file_info(pafs.FileSelector(join(root, folder), allow_not_found=True, recursive=True)):
            name = os.path.relpath(info.path, root)
            if info.type != pafs.FileType.Directory and name not in listed:
                raise CommittedError(
                    f"{info.path}: not a part this project wrote, in a folder the commit writes; move it away "
                    "(not even overwrite takes it)"
                )


def _remove_empty(fs: pafs.FileSystem, where: str) -> None:
    """Removes the directory ``where`` if nothing is left in it (another run may stage there)."""
    try:
        if not fs.get_file_info(pafs.FileSelector(where)):
            fs.delete_dir(where)
    except (FileNotFoundError, OSError):
        pass
