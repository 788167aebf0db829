"""A batch within one row group is gathered from the row group's collated arrays
(``collate.take``): the arrays are those that collating the batch's own table gives, for node
records with edge features, link records and multi-hot targets, shuffled or not, batches within
a row group and across row groups."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import graphflat, run_job, scratch

from graphflat import open_records
from graphflat.collate import collate


@pytest.fixture(scope="module")
def multi_label_records(tmp_path_factory) -> Path:
    tmp = scratch(tmp_path_factory, "multi")
    graphflat("generate", "--out", str(tmp / "g"), "--nodes", "300", "--feature-dim", "3", "--multi-label")
    graph = f'nodes = "{tmp}/g/nodes"\nedges = "{tmp}/g/edges"\n'
    run_job(tmp, "flatten", f'[flatten]\n{graph}output = "{tmp}/flat"\nhops = 2\nfanouts = [3, 3]\n')
    return tmp / "flat"


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert list(got) == list(want)
    for key, value in want.items():
        assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
        assert np.array_equal(got[key], value, equal_nan=value.dtype.kind == "f"), key


@pytest.mark.parametrize("fixture", ["node_records", "link_records", "multi_label_records"])
def test_gathered_batches_are_the_collated_tables(fixture: str, request) -> None:
    records = open_records(str(request.getfixturevalue(fixture)))
    gathered = 0
    for split in (None, "train"):
        for shuffle in (True, False):
            for batch_size in (7, 64, 1000):
                batches = list(records.batches(split=split, batch_size=batch_size, shuffle=shuffle, seed=4))
                for batch in batches:
                    gathered += batch._rows is not None
                    assert_same(batch.arrays(), collate(batch.table, records.meta))
                assert sum(len(b) for b in batches) == sum(
                    n for s, n in records.splits().items() if split is None or s == split
                )
    assert gathered


def test_a_gathered_batch_is_the_same_pyg_batch(node_records: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    from graphflat.pyg.data import to_pyg

    records = open_records(str(node_records))
    gathered = 0
    for batch in records.batches(split="train", batch_size=50, seed=1):
        gathered += batch._rows is not None
        got, want = batch.to_pyg(), to_pyg(collate(batch.table, records.meta), records.meta)
        assert got.num_graphs == want.num_graphs and sorted(got.keys()) == sorted(want.keys())
        for key in want.keys():  # noqa: SIM118 (iterating a PyG batch yields (key, value) pairs)
            assert torch.equal(got[key], want[key]), key
    assert gathered
