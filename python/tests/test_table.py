"""graphflat.read_table against tables the graphflat binary commits.

The binary is ``GRAPHFLAT_BIN``, else the release build of the repository
(``target/release/graphflat``, which ``cargo test --release`` builds); without one the tests skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from graphflat import ChangedError, NotCommittedError, read_manifest, read_table

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("GRAPHFLAT_BIN", ROOT / "target" / "release" / "graphflat"))


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> Path:
    """A generated graph: ``nodes/`` and ``edges/``, each a committed table."""
    if not BINARY.exists():
        pytest.skip(f"no graphflat binary at {BINARY} (build it, or set GRAPHFLAT_BIN)")
    out = tmp_path_factory.mktemp("graph")
    subprocess.run([str(BINARY), "generate", "--out", str(out), "--nodes", "500", "--seed", "3"], check=True)
    return out


def copy(table: Path, to: Path) -> Path:
    shutil.copytree(table, to)
    return to


def test_read_table_reads_the_listed_parts_whole(graph: Path) -> None:
    manifest = read_manifest(str(graph / "nodes"))
    assert manifest is not None and manifest.stage == "generate"
    table = read_table(str(graph / "nodes"))
    assert table.num_rows == manifest.rows == 500
    assert table.equals(pq.read_table(graph / "nodes").select(table.column_names))
    assert read_table(str(graph / "nodes"), columns=["node_id"]).column_names == ["node_id"]
    # Every part's CRC-32 is the manifest's.
    for part in manifest.parts:
        assert zlib.crc32((graph / "nodes" / part.name).read_bytes()) == part.crc32


def test_a_changed_byte_is_named_with_both_checksums(graph: Path, tmp_path: Path) -> None:
    table = copy(graph / "edges", tmp_path / "edges")
    part = next(table.glob("part-*.parquet"))
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x01
    part.write_bytes(bytes(data))
    with pytest.raises(ChangedError, match=rf"{part.name}: .* with CRC-32 .* says .* CRC-32"):
        read_table(str(table))


def test_a_directory_without_a_manifest_is_not_committed(graph: Path, tmp_path: Path) -> None:
    table = copy(graph / "edges", tmp_path / "plain")
    (table / "_manifest.parquet").unlink()
    assert read_manifest(str(table)) is None
    with pytest.raises(NotCommittedError):
        read_table(str(table))


def test_an_earlier_versions_json_manifest_is_read(graph: Path, tmp_path: Path) -> None:
    table = copy(graph / "nodes", tmp_path / "legacy")
    raw = read_manifest(str(table)).raw
    (table / "_manifest.parquet").unlink()
    (table / "_SUCCESS").write_text(json.dumps(raw))
    assert read_table(str(table)).num_rows == 500


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda m: m.update(format=3), "newer than this package reads"),
        (lambda m: m["parts"][0].update(name="../nodes/x.parquet"), "not a file name"),
        (lambda m: m["parts"][0].update(name="../x.parquet"), "not a file name"),
        (lambda m: m["parts"].append(dict(m["parts"][0])), "listed twice"),
        (lambda m: m.update(rows=m["rows"] + 1), "where its totals say"),
    ],
)
def test_a_manifest_a_reader_cannot_rely_on_is_refused(graph: Path, tmp_path: Path, edit, words: str) -> None:
    table = copy(graph / "nodes", tmp_path / "edited")
    raw = read_manifest(str(table)).raw
    edit(raw)
    (table / "_manifest.parquet").unlink()
    (table / "_SUCCESS").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=words):
        read_table(str(table))


def test_a_part_one_folder_deep_is_read(graph: Path, tmp_path: Path) -> None:
    """A model's learned table is listed as ``embeddings/part-...``: a manifest may name a file
    in a folder of its directory."""
    table = copy(graph / "nodes", tmp_path / "folder")
    raw = read_manifest(str(table)).raw
    part = raw["parts"][0]["name"]
    (table / "inner").mkdir()
    (table / part).rename(table / "inner" / part)
    raw["parts"][0]["name"] = f"inner/{part}"
    (table / "_manifest.parquet").unlink()
    (table / "_SUCCESS").write_text(json.dumps(raw))
    assert read_table(str(table)).num_rows == 500


def test_a_models_learned_table_is_read_from_its_folder_and_the_model_itself_is_refused(
    graph: Path, tmp_path: Path
) -> None:
    """``<model>/embeddings`` has no manifest of its own: the model's lists its parts."""
    job = tmp_path / "job.toml"
    job.write_text(
        f'[flatten]\nnodes = "{graph}/nodes"\nedges = "{graph}/edges"\noutput = "{tmp_path}/flat"\nfanouts = [3, 3]\n'
        f'[train]\nrecords = "{tmp_path}/flat"\noutput = "{tmp_path}/model"\nlearned_embedding_dim = 4\nepochs = 1\n'
    )
    subprocess.run([str(BINARY), "run", str(job)], check=True, stdout=subprocess.DEVNULL)
    folder = tmp_path / "model" / "embeddings"
    table = read_table(str(folder))
    assert table.column_names == ["node_id", "embedding"]
    # Every row once, as pandas reads the folder.
    assert table.num_rows == len(pq.read_table(folder)) == len(set(table["node_id"].to_pylist())) > 0
    with pytest.raises(ValueError, match="holds a model"):
        read_table(str(tmp_path / "model"))
    with pytest.raises(NotCommittedError):
        read_table(str(tmp_path / "model" / "checkpoints"))


def test_a_held_version_is_kept_until_its_reader_lets_go(tmp_path: Path) -> None:
    import pyarrow.fs as pafs

    from graphflat import switch
    from graphflat.hold import Hold

    version = tmp_path / ".out.graphflat-run"
    version.mkdir()
    (version / "part").write_bytes(b"old")
    hold = Hold(pafs.LocalFileSystem(), str(version))
    assert hold.held and open(f"{hold.reading}/part", "rb").read() == b"old"
    switch.remove_version(str(version))
    kept = tmp_path / (version.name + switch.KEPT)  # no manifest: its own name, then KEPT
    assert not version.exists() and (kept / "part").exists()
    # Read through the hold wherever the version went; messages name the path opened.
    assert open(f"{hold.reading}/part", "rb").read() == b"old"
    assert hold.shown(f"{hold.reading}/part") == f"{version}/part"
    hold.close()
    switch.remove_version(str(kept))
    assert list(tmp_path.iterdir()) == []


def test_a_missing_part_and_a_broken_manifest_are_named_by_the_readers_path(node_records: Path, tmp_path: Path) -> None:
    import re

    from graphflat import open_records

    copy = tmp_path / "flat"
    shutil.copytree(node_records, copy)
    manifest = read_manifest(str(copy))
    (copy / manifest.parts[0].name).unlink()
    missing = re.escape(f"{copy}/{manifest.parts[0].name}: missing; the manifest of run {manifest.run} lists it")
    with pytest.raises(FileNotFoundError, match=missing):
        read_table(str(copy))
    with pytest.raises(FileNotFoundError, match=missing):
        [len(b) for b in open_records(str(copy)).batches(split=None)]
    (copy / "_manifest.parquet").write_bytes(b"PAR1 truncated")
    with pytest.raises(ValueError, match=re.escape(f"{copy}/_manifest.parquet: not a Parquet file")):
        read_table(str(copy))
