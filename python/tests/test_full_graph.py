"""Full-graph training (``[train] nodes`` and ``edges``) against PyG's own full-batch GCN: the
model after one epoch, loaded with :func:`graphflat.pyg.load_model` into two ``GCNConv`` layers
(PyG's normalization and self-loops), takes one SGD step on PyG's full-batch loss; the model
after two epochs must hold the same weights, to float tolerance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import BINARY, run_job

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.nn import GCNConv

from graphflat.pyg import load_model

NODES, EDGES, DIM, CLASSES, LR = 120, 600, 6, 3, 0.5


def write_graph(
    root: Path,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A random graph without self-edges (PyG's GCNConv replaces them): its tables under
    ``root``, and its features, edge index, labels and training mask as tensors."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(NODES, DIM)).astype(np.float32)
    y = rng.integers(0, CLASSES, NODES)
    split = np.array(["train", "valid", "test"])[rng.integers(0, 3, NODES)]
    src, dst = rng.integers(0, NODES, EDGES), rng.integers(0, NODES, EDGES)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    (root / "nodes").mkdir(parents=True)
    (root / "edges").mkdir(parents=True)
    features = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), DIM)
    nodes = pa.table(
        {"node_id": np.arange(NODES), "features": features, "label": y, "split": split}
    )
    pq.write_table(nodes, root / "nodes" / "part-0.parquet")
    pq.write_table(
        pa.table({"src": src, "dst": dst}), root / "edges" / "part-0.parquet"
    )
    edge_index = torch.tensor(np.stack([src, dst]))
    return (
        torch.from_numpy(x),
        edge_index,
        torch.from_numpy(y),
        torch.from_numpy(split == "train"),
    )


def train(tmp: Path, name: str, epochs: int, workers: int) -> Path:
    run_job(
        tmp,
        name,
        f"""[cluster]
workers = {workers}
[train]
nodes = "{tmp}/g/nodes"
edges = "{tmp}/g/edges"
output = "{tmp}/{name}"
layers = 2
model = "gcn"
hidden = 8
epochs = {epochs}
optimizer = "sgd"
lr = {LR}
weight_decay = 0.0
dropout = 0.0
seed = 5
""",
    )
    return tmp / name


def test_an_epoch_is_one_step_of_pyg_full_batch_gcn(tmp_path: Path) -> None:
    if not BINARY.exists():
        pytest.skip(f"no graphflat binary at {BINARY}")
    x, edge_index, y, train_mask = write_graph(tmp_path / "g")
    before, after = (
        load_model(str(train(tmp_path, "one", 1, 2))),
        load_model(str(train(tmp_path, "two", 2, 3))),
    )
    convs = [GCNConv(DIM, 8), GCNConv(8, CLASSES)]
    with torch.no_grad():
        for conv, layer in zip(convs, before.layers):
            conv.lin.weight.copy_(layer.weight.T)
            conv.bias.copy_(layer.bias)
    h = torch.relu(convs[0](x, edge_index))
    loss = torch.nn.functional.cross_entropy(
        convs[1](h, edge_index)[train_mask], y[train_mask]
    )
    loss.backward()
    for conv, layer in zip(convs, after.layers):
        stepped_weight = (conv.lin.weight - LR * conv.lin.weight.grad).T
        stepped_bias = conv.bias - LR * conv.bias.grad
        torch.testing.assert_close(
            layer.weight, stepped_weight.detach(), atol=1e-5, rtol=0
        )
        torch.testing.assert_close(layer.bias, stepped_bias.detach(), atol=1e-5, rtol=0)
    assert (after.layers[0].weight - before.layers[0].weight).abs().max() > 1e-3, (
        "a step that moves the weights"
    )
