"""graphflat.open_records against record sets the graphflat binary flattens: node, link and
typed records, edge features on. Every collated array is checked against a plain loop over the
records' Python lists (an independent layout of the same batch)."""

from __future__ import annotations

import functools
import operator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import run_job, scratch, typed_graph

from graphflat import ChangedError, open_records, read_table
from graphflat.collate import by_type


def by_loop(rows: list[dict]) -> dict[str, list]:
    """The batch laid out one record at a time, from Python lists."""
    keys = ("node_id", "hop", "in_degree", "batch", "src", "dst", "weight", "layers", "x", "attr")
    out: dict[str, list] = {k: [] for k in keys}
    base = 0
    for i, row in enumerate(rows):
        n = len(row["node_ids"])
        out["node_id"] += row["node_ids"]
        out["hop"] += row["node_hops"]
        out["in_degree"] += row["node_in_degrees"]
        out["batch"] += [i] * n
        out["src"] += [base + s for s in row["edge_src"]]
        out["dst"] += [base + d for d in row["edge_dst"]]
        out["weight"] += row["edge_weights"]
        out["layers"] += row["edge_layers"]
        out["x"] += row["node_features"]
        out["attr"] += row.get("edge_features") or []
        base += n
    return out


def test_node_batches_lay_out_every_record_as_a_loop_does(node_records: Path) -> None:
    records = open_records(str(node_records))
    meta = records.meta
    assert (meta.task, meta.hops, meta.fanouts, meta.feature_dim, meta.edge_feature_dim) == ("node", 2, (4, 3), 5, 3)
    assert len(records.manifest.parts) == 2 and len(records) == 600
    seen = []
    for batch in records.batches(split=None, batch_size=64, shuffle=True, seed=1):
        rows = batch.table.to_pylist()
        got, want = batch.arrays(), by_loop(rows)
        assert got["node_id"].tolist() == want["node_id"] and got["hop"].tolist() == want["hop"]
        assert got["in_degree"].tolist() == want["in_degree"] and got["batch"].tolist() == want["batch"]
        assert got["edge_index"].tolist() == [want["src"], want["dst"]]
        assert np.array_equal(got["edge_weight"], np.array(want["weight"], np.float32))
        assert got["edge_layers"].tolist() == want["layers"]
        assert np.array_equal(got["x"], np.array(want["x"], np.float32).reshape(-1, 5))
        assert np.array_equal(got["edge_attr"], np.array(want["attr"], np.float32).reshape(-1, 3))
        assert got["root_id"].tolist() == [r["root_id"] for r in rows]
        assert got["node_id"][got["root_index"]].tolist() == [r["root_id"] for r in rows]
        assert got["y"].tolist() == [-1 if r["label"] is None else r["label"] for r in rows]
        seen += [r["root_id"] for r in rows]
    assert sorted(seen) == sorted(read_table(str(node_records), columns=["root_id"])["root_id"].to_pylist())


def test_a_split_reads_its_own_row_groups_and_shards_divide_them(node_records: Path) -> None:
    records = open_records(str(node_records))
    table = read_table(str(node_records), columns=["root_id", "split"]).to_pylist()
    # Each row group holds one split, and its statistics say which (no column read to tell).
    import pyarrow.parquet as pq

    for part in records.manifest.parts:
        footer = pq.ParquetFile(node_records / part.name).metadata
        split = [footer.schema.column(i).path for i in range(footer.num_columns)].index("split")
        assert all(footer.row_group(g).column(split).statistics is not None for g in range(footer.num_row_groups))
    for split in ("train", "valid", "test"):
        want = sorted(r["root_id"] for r in table if r["split"] == split)
        whole = [b.table for b in records.batches(split=split, batch_size=50, seed=3)]
        assert all(len(t) == 50 for t in whole[:-1])
        got = sorted(i for t in whole for i in t["root_id"].to_pylist())
        assert got == want and records.splits()[split] == len(want)
        shards = [
            [
                i
                for b in records.batches(split=split, batch_size=50, seed=3, shard=(k, 3))
                for i in b.table["root_id"].to_pylist()
            ]
            for k in range(3)
        ]
        assert sorted(functools.reduce(operator.iadd, shards, [])) == want
    # The same seed and epoch give the same order; another epoch another.
    order = lambda epoch: [i for b in records.batches(seed=5, epoch=epoch) for i in b.table["root_id"].to_pylist()]
    assert order(0) == order(0) and order(0) != order(1) and sorted(order(0)) == sorted(order(1))


def test_link_batches_point_at_each_endpoints_root(link_records: Path) -> None:
    records = open_records(str(link_records))
    assert records.meta.task == "link" and records.meta.negatives == 2
    for batch in records.batches(split=None, batch_size=40, shuffle=False):
        rows = batch.table.to_pylist()
        got, want = batch.arrays(), by_loop(rows)
        assert got["edge_index"].tolist() == [want["src"], want["dst"]]
        ids = got["node_id"]
        assert ids[got["src_index"]].tolist() == [r["link_src"] for r in rows]
        assert ids[got["dst_index"]].tolist() == [r["link_dst"] for r in rows]
        assert ids[got["neg_index"]].tolist() == [r["negatives"] for r in rows]
        assert (got["hop"][got["neg_index"]] == 0).all()
        pairs = got["edge_label_index"]
        assert pairs.shape == (2, 3 * len(rows)) and got["edge_label"].sum() == len(rows)
        assert ids[pairs[1, len(rows) :]].tolist() == [n for r in rows for n in r["negatives"]]


def test_typed_batches_split_by_type_and_relation(typed_records: Path) -> None:
    records = open_records(str(typed_records))
    meta = records.meta
    assert meta.typed and meta.target_type == "user" and "rev_buys" in [r.name for r in meta.relations]
    widths = dict(meta.node_types)
    for batch in records.batches(split=None, batch_size=80, shuffle=False):
        rows = batch.table.to_pylist()
        arrays = batch.arrays()
        parts = by_type(arrays, meta)
        names = [n for n, _ in meta.node_types]
        # Each type's nodes, in batch order, with their features at the type's width.
        flat = [(t, i, f) for r in rows for t, i, f in zip(r["node_types"], r["node_ids"], r["node_features"])]
        for t, name in enumerate(names):
            mine = [(i, f) for tt, i, f in flat if tt == t]
            assert parts[f"type:{name}"]["node_id"].tolist() == [i for i, _ in mine]
            assert np.array_equal(
                parts[f"type:{name}"]["x"], np.array([f for _, f in mine], np.float32).reshape(-1, widths[name])
            )
        users = parts["type:user"]
        assert users["node_id"][users["root_index"]].tolist() == [r["root_id"] for r in rows]
        # Each relation's edges join nodes of its types, by their global ids.
        for r, relation in enumerate(meta.relations):
            want = []
            for row in rows:
                for s, d, rel in zip(row["edge_src"], row["edge_dst"], row["edge_relations"]):
                    if rel == r:
                        want.append((row["node_ids"][s], row["node_ids"][d]))
            part = parts[f"relation:{relation.name}"]
            src = parts[f"type:{relation.src}"]["node_id"][part["edge_index"][0]]
            dst = parts[f"type:{relation.dst}"]["node_id"][part["edge_index"][1]]
            assert list(zip(src.tolist(), dst.tolist())) == want
            if relation.edge_feature_dim:
                assert part["edge_attr"].shape == (len(want), relation.edge_feature_dim)


def test_a_changed_byte_fails_the_read_that_reaches_it(node_records: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "flat"
    shutil.copytree(node_records, copy)
    part = min(copy.glob("part-*.parquet"))
    data = bytearray(part.read_bytes())
    data[100] ^= 0x10
    part.write_bytes(bytes(data))
    # The part is one block: opening (its footer) reads it.
    with pytest.raises(ChangedError, match=rf"{part.name}: bytes 0\.\.\d+ have CRC-32 \w+ where the manifest"):
        for _ in open_records(str(copy)).batches(split=None):
            pass


def test_row_groups_without_statistics_are_told_by_their_split_column(tmp_path: Path) -> None:
    """An earlier version wrote no statistics on `split`: its column tells each row group's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from graphflat import Part
    from graphflat.records import MIXED, _row_groups

    splits = ["train"] * 4 + ["valid"] * 4 + [None] * 4 + ["test", "valid", "test", "test"]
    table = pa.table({"root_id": list(range(16)), "split": splits})
    for statistics in (True, False):
        path = tmp_path / f"p{statistics}.parquet"
        pq.write_table(table, path, row_group_size=4, write_statistics=statistics)
        groups = _row_groups(Part(path.name, 16, 0, 0), pq.ParquetFile(path))
        assert [g.split for g in groups] == ["train", "valid", None, MIXED], statistics


def test_records_replaced_while_read_are_one_error_naming_the_new_run(node_records: Path, tmp_path: Path) -> None:
    import json
    import shutil

    from graphflat import read_manifest

    copy = tmp_path / "flat"
    shutil.copytree(node_records, copy)
    records = open_records(str(copy))
    # Another run commits: a manifest of its own, the parts this one listed gone.
    raw = read_manifest(str(copy)).raw
    for part in records.manifest.parts:
        (copy / part.name).unlink()
    (copy / "_manifest.parquet").unlink()
    (copy / "_SUCCESS").write_text(json.dumps({**raw, "run": "the-replacing-run"}))
    with pytest.raises(ChangedError, match="run the-replacing-run replaced the records while they were read"):
        next(records.batches(split=None))


def test_records_read_the_version_they_opened_while_a_flatten_replaces_it(tmp_path_factory) -> None:
    from conftest import graphflat

    tmp = scratch(tmp_path_factory, "held")
    graphflat("generate", "--out", str(tmp / "g"), "--nodes", "500", "--feature-dim", "4")

    def flatten(targets: str) -> None:
        keys = f'nodes = "{tmp}/g/nodes"\nedges = "{tmp}/g/edges"\noutput = "{tmp}/flat"\noverwrite = true\n'
        run_job(tmp, "flatten", f"[flatten]\n{keys}fanouts = [3, 2]\n{targets}")

    def roots(records) -> list[int]:
        return sorted(r for b in records.batches(split=None, shuffle=False) for r in b.table["root_id"].to_pylist())

    def beside() -> list[str]:
        return sorted(p.name for p in tmp.iterdir() if p.name.startswith(".flat."))

    flatten("")
    records = open_records(str(tmp / "flat"))
    first = records.manifest.run
    flatten('targets = ["train"]\n')
    # The records read the version they opened, whole, after another run replaced it.
    assert roots(records) == list(range(500))
    assert records.manifest.run == first and len(beside()) == 1 and beside()[0].endswith(".kept")
    assert len(read_table(str(tmp / "flat"), columns=["root_id"])) < 500
    records.close()
    graphflat("inspect", str(tmp / "flat"))
    assert beside() == [], "the kept version goes once its reader let go"
    with open_records(str(tmp / "flat")) as now:
        assert len(roots(now)) == len(now) < 500


def test_records_of_string_ids_carry_each_nodes_string(string_records: Path) -> None:
    records = open_records(str(string_records))
    for batch in records.batches(split=None, batch_size=50, shuffle=True, seed=1):
        rows = batch.table.to_pylist()
        got = batch.arrays()
        assert got["node_key"].tolist() == [k for r in rows for k in r["node_keys"]]
        assert all(k.startswith("n") for k in got["node_key"])
        # The endpoints' strings: each link's source is the first node of its neighborhood.
        sources = got["node_key"][got["src_index"]]
        assert [r["node_keys"][0] for r in rows] == sources.tolist()
        data = batch.to_pyg()
        assert data.node_key == got["node_key"].tolist() and data.num_nodes == len(data.node_key)


@pytest.fixture(scope="module")
def typed_string_records(tmp_path_factory) -> Path:
    """Node records of a typed graph whose ids are strings (``<type>-<id>``)."""
    tmp = scratch(tmp_path_factory, "typed-strings")
    graph = typed_graph(tmp)
    ends = {
        "buys": ("user", "item"),
        "returns": ("user", "item"),
        "follows": ("user", "user"),
        "sells": ("shop", "item"),
    }
    columns = {f"nodes/{t}": {"node_id": t} for t in ("user", "item", "shop")}
    columns |= {f"edges/{r}": {"src": src, "dst": dst} for r, (src, dst) in ends.items()}
    for table, keyed in columns.items():
        data = pq.read_table(tmp / "g" / table)
        for column, prefix in keyed.items():
            keys = pc.binary_join_element_wise(f"{prefix}-", pc.cast(data[column], pa.string()), "")
            data = data.set_column(data.schema.get_field_index(column), column, keys)
        pq.write_table(data, tmp / "g" / table / "part-0.parquet")
        for part in (tmp / "g" / table).glob("*.parquet"):
            if part.name != "part-0.parquet":
                part.unlink()
        (tmp / "g" / table / "_SUCCESS").unlink(missing_ok=True)
    run_job(
        tmp, "flatten", f'{graph}[flatten]\noutput = "{tmp}/flat"\ntarget_type = "user"\nhops = 2\nfanouts = [3, 2]\n'
    )
    return tmp / "flat"


def test_typed_records_of_string_ids_carry_each_types_strings(typed_string_records: Path) -> None:
    records = open_records(str(typed_string_records))
    names = [n for n, _ in records.meta.node_types]
    for batch in records.batches(split=None, batch_size=80, shuffle=False):
        rows = batch.table.to_pylist()
        parts = by_type(batch.arrays(), records.meta)
        data = batch.to_pyg()
        flat = [(t, k) for r in rows for t, k in zip(r["node_types"], r["node_keys"])]
        for t, name in enumerate(names):
            keys = parts[f"type:{name}"]["node_key"]
            assert keys.tolist() == [k for tt, k in flat if tt == t]
            assert all(k.startswith(f"{name}-") for k in keys), name
            assert data[name].node_key == keys.tolist() and len(data[name].node_key) == data[name].num_nodes
        users = parts["type:user"]
        assert users["node_key"][users["root_index"]].tolist() == [r["node_keys"][0] for r in rows]
