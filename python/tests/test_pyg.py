"""Records as PyG data (``graphflat[pyg]``): the tensors are the collated arrays, PyG's own
layers run on them, and a ``DataLoader`` with workers reads each record of a split once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pyg = pytest.importorskip("torch_geometric")

from torch_geometric.nn import SAGEConv

from graphflat import open_records, read_table
from graphflat.collate import by_type


def test_a_node_batch_is_a_pyg_batch_of_its_arrays(node_records: Path) -> None:
    records = open_records(str(node_records))
    batch = next(records.batches(split="train", batch_size=32, seed=2))
    arrays, data = batch.arrays(), batch.to_pyg()
    assert data.num_graphs == 32 and data.num_nodes == len(arrays["node_id"])
    for key, value in arrays.items():
        assert np.array_equal(getattr(data, key).numpy(), value), key
    data.validate()
    # PyG's layer runs on it; one row per record is its root's.
    out = SAGEConv(records.meta.feature_dim, 7)(data.x, data.edge_index)
    assert out[data.root_index].shape == (32, 7)


def test_a_link_batch_carries_its_pairs(link_records: Path) -> None:
    batch = next(open_records(str(link_records)).batches(split="train", batch_size=16))
    data = batch.to_pyg()
    assert data.edge_label_index.shape == (2, 16 * 3) and data.edge_label.sum().item() == 16
    assert torch.equal(data.node_id[data.src_index], data.link_src)


def test_a_typed_batch_is_hetero_data(typed_records: Path) -> None:
    records = open_records(str(typed_records))
    batch = next(records.batches(split=None, batch_size=40, shuffle=False))
    data = batch.to_pyg()
    data.validate()
    meta = records.meta
    assert sorted(data.node_types) == sorted(n for n, _ in meta.node_types)
    assert sorted(data.edge_types) == sorted((r.src, r.name, r.dst) for r in meta.relations)
    parts = by_type(batch.arrays(), meta)
    for relation in meta.relations:
        store = data[relation.src, relation.name, relation.dst]
        assert np.array_equal(store.edge_index.numpy(), parts[f"relation:{relation.name}"]["edge_index"])
    users = data["user"]
    assert torch.equal(users.node_id[users.root_index], data.root_id)


class Split(torch.utils.data.IterableDataset):
    def __init__(self, path: str) -> None:
        self.path = path

    def __iter__(self):
        for batch in open_records(self.path).batches(split="train", batch_size=20, seed=9):
            yield batch.to_pyg()


def test_dataloader_workers_read_each_record_once(node_records: Path) -> None:
    loader = torch.utils.data.DataLoader(Split(str(node_records)), batch_size=None, num_workers=2)
    seen = sorted(i for data in loader for i in data.root_id.tolist())
    table = read_table(str(node_records), columns=["root_id", "split"]).to_pylist()
    assert seen == sorted(r["root_id"] for r in table if r["split"] == "train")
