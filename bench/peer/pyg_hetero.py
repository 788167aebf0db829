"""The peer of the typed models: PyG's `to_hetero(SAGE)` on the tables `graphflat generate
--hetero --erased` writes (`nodes/<type>/`, `edges/<relation>/`; users are the labeled target
type), and plain GraphSAGE on the same graph's erased view (`erased/nodes`, `erased/edges`).

Every relation is reversed (`rev_<name>`, as `reverse = true` on every relation in the typed
job, and as the erased view holds every edge both ways). Each type's features are projected to
`hidden` by a Linear of its own (as the typed models here do), then two SAGE layers (mean)
made heterogeneous by `to_hetero` (a SAGEConv per relation, summed per destination type).
Training samples with `NeighborLoader` (10 in-edges per relation and hop, as `fanouts = [10,
10]` per relation), batches of 128 users, Adam lr 0.01, `--epochs` epochs, one thread; each
epoch is evaluated on the full graph. Prints the test accuracy at the best validation epoch of
both models, and the mean epoch time, as JSON.

    $(bench/peer/venv-sampled.sh) bench/peer/pyg_hetero.py GRAPH_DIR [--epochs 10] [--hidden 32]

`NeighborLoader` needs `torch-sparse`: the sampled loaders' venv (`bench/peer/venv-sampled.sh`).
"""
import argparse
import json
import time

import numpy as np
import pyarrow.parquet as pq
import torch
import torch.nn.functional as F
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import SAGEConv, to_hetero

RELATIONS = [("buys", "user", "item"), ("returns", "user", "item"), ("follows", "user", "user"), ("sells", "shop", "item")]


def vectors(column):
    """A list<float32> column of equal-length rows as one [rows, width] tensor, without Python lists."""
    column = column.combine_chunks()
    values = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
    return torch.from_numpy(values.reshape(len(column), -1))


def node_table(path, labeled):
    """Features (rows in id order: generated ids are 0..n), and labels and split masks."""
    table = pq.read_table(path)
    ids = table.column("node_id").to_numpy()
    order = np.argsort(ids)
    assert (ids[order] == np.arange(len(ids))).all(), f"{path}: ids are 0..n"
    x = vectors(table.column("features"))[order]
    if not labeled:
        return x, None, None
    labels = np.array(table.column("label").to_pylist(), dtype=object)[order]
    splits = np.array(table.column("split").to_pylist(), dtype=object)[order]
    y = torch.from_numpy(np.array([-1 if v is None else v for v in labels], dtype=np.int64))
    masks = {s: torch.from_numpy(splits == s) for s in ["train", "valid", "test"]}
    return x, y, masks


def edge_index(path):
    table = pq.read_table(path, columns=["src", "dst"])
    return torch.from_numpy(np.stack([table.column("src").to_numpy(), table.column("dst").to_numpy()]))


def typed(root):
    data = HeteroData()
    for t in ["user", "item", "shop"]:
        x, y, masks = node_table(f"{root}/nodes/{t}", t == "user")
        data[t].x = x
        if y is not None:
            data[t].y = y
            for s, m in masks.items():
                data[t][f"{s}_mask"] = m
    for name, src, dst in RELATIONS:
        ends = edge_index(f"{root}/edges/{name}")
        data[src, name, dst].edge_index = ends
        data[dst, f"rev_{name}", src].edge_index = ends.flip(0)
    return data


def erased(root):
    x, y, masks = node_table(f"{root}/erased/nodes", True)
    data = Data(x=x, y=y, edge_index=edge_index(f"{root}/erased/edges"))
    for s, m in masks.items():
        data[f"{s}_mask"] = m
    return data


class Sage(torch.nn.Module):
    def __init__(self, hidden, classes):
        super().__init__()
        self.conv1 = SAGEConv((-1, -1), hidden)
        self.conv2 = SAGEConv((-1, -1), classes)
        # A module, not F.dropout(training=...): to_hetero's tracing would bake the flag in.
        self.dropout = torch.nn.Dropout(0.5)

    def forward(self, x, edge_index):
        x = self.dropout(F.relu(self.conv1(x, edge_index)))
        return self.conv2(x, edge_index)


class Typed(torch.nn.Module):
    """A Linear per node type to `hidden`, then `to_hetero(Sage)`."""

    def __init__(self, data, hidden, classes):
        super().__init__()
        self.project = torch.nn.ModuleDict({t: torch.nn.Linear(data[t].x.shape[1], hidden) for t in data.node_types})
        self.gnn = to_hetero(Sage(hidden, classes), data.metadata(), aggr="sum")

    def forward(self, x_dict, edge_index_dict):
        x_dict = {t: F.dropout(self.project[t](x), 0.5, self.training) for t, x in x_dict.items()}
        return self.gnn(x_dict, edge_index_dict)["user"]


class Plain(torch.nn.Module):
    def __init__(self, data, hidden, classes):
        super().__init__()
        self.sage = Sage(hidden, classes)

    def forward(self, x, edge_index):
        return self.sage(F.dropout(x, 0.5, self.training), edge_index)


def run(model, data, is_typed, epochs, batch_size=128):
    target = data["user"] if is_typed else data
    seeds = ("user", target.train_mask) if is_typed else target.train_mask
    fanouts = {k: [10, 10] for k in data.edge_types} if is_typed else [10, 10]
    loader = NeighborLoader(data, num_neighbors=fanouts, batch_size=batch_size, input_nodes=seeds, shuffle=True)
    args = lambda d: (d.x_dict, d.edge_index_dict) if is_typed else (d.x, d.edge_index)
    with torch.no_grad():  # the lazy (-1) input widths
        model(*args(data))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    best, times = (-1.0, 0.0), []
    for _ in range(epochs):
        start = time.perf_counter()
        model.train()
        for batch in loader:
            optimizer.zero_grad()
            size = (batch["user"] if is_typed else batch).batch_size
            out = model(*args(batch))[:size]
            y = (batch["user"] if is_typed else batch).y[:size]
            F.cross_entropy(out, y).backward()
            optimizer.step()
        times.append(time.perf_counter() - start)
        model.eval()
        with torch.no_grad():
            predicted = model(*args(data)).argmax(1)
        accuracy = {s: (predicted[m] == target.y[m]).float().mean().item() for s, m in
                    (("valid", target.valid_mask), ("test", target.test_mask))}
        if accuracy["valid"] > best[0]:
            best = (accuracy["valid"], accuracy["test"])
    return {"test_accuracy": round(best[1], 4), "epoch_s": round(float(np.median(times)), 3)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("graph")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--hidden", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = typed(args.graph)
    classes = int(data["user"].y.max()) + 1
    result = {"typed_sage": run(Typed(data, args.hidden, classes), data, True, args.epochs)}
    plain = erased(args.graph)
    result["erased_sage"] = run(Plain(plain, args.hidden, classes), plain, False, args.epochs)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
