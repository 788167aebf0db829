"""The peer of the edge-feature models: PyG's `GINEConv` and `GATConv(edge_dim=E)`, full batch,
on the same Parquet node and edge tables that `graphflat generate --edge-feature-dim E` writes
(node `features`, `label`, `split`; edge `src`, `dst`, edge `features`). Edges are in-edges of
`dst`, as GraphFlat reads them. Two layers, hidden 16 (GAT: 4 heads of 16), Adam lr 0.01,
weight decay 5e-4, dropout 0.5, `--epochs` epochs, one thread; prints the test accuracy at the
best validation epoch of each model, with and without the edge features (zeros in their place),
per seed (`torch.manual_seed`), as lists in `--seeds` order.

    python bench/peer/pyg_edge.py GRAPH_DIR [--epochs 200] [--seeds 0 1 2] [--models gine]
        [--with-edges-only] [--gine-mlp out|hidden] [--metrics DIR]

GINE's MLPs are `Linear(in, m) -> ReLU -> Linear(m, out)`: `--gine-mlp out` (the default, as
PyG's examples and its `GIN` model build them) has `m = out`, so the last layer's MLP is
`classes` units wide; `--gine-mlp hidden` has `m = max(hidden, out)`, as graphflat's GINE since
issue 51 (BENCHMARKS section 11). `--metrics DIR` writes each run's epochs to
`DIR/<model>-seed<S>.jsonl` (`epoch`, `train_loss`, `valid_accuracy`, `test_accuracy`), as
graphflat's `metrics.jsonl`.

GATConv's edge features only weigh the messages (they enter the attention logit), so a label
that is carried by the edges alone is out of its reach; GINE adds them to the messages.
"""
import argparse
import contextlib
import json
import os
import time

import numpy as np
import pyarrow.parquet as pq
import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, GINEConv


def vectors(column):
    return np.stack([np.asarray(v, dtype=np.float32) for v in column.to_pylist()])


def load(root):
    nodes = pq.read_table(f"{root}/nodes")
    edges = pq.read_table(f"{root}/edges")
    ids = nodes.column("node_id").to_numpy()
    order = np.argsort(ids)
    index = {int(v): i for i, v in enumerate(ids[order])}
    x = torch.from_numpy(vectors(nodes.column("features"))[order])
    y = torch.from_numpy(nodes.column("label").to_numpy(zero_copy_only=False)[order].astype(np.int64))
    splits = np.array(nodes.column("split").to_pylist(), dtype=object)[order]
    masks = {s: torch.from_numpy(splits == s) for s in ["train", "valid", "test"]}
    src = [index[int(v)] for v in edges.column("src").to_numpy()]
    dst = [index[int(v)] for v in edges.column("dst").to_numpy()]
    edge_index = torch.tensor([src, dst], dtype=torch.long)
    edge_attr = torch.from_numpy(vectors(edges.column("features")))
    return x, y, masks, edge_index, edge_attr


class Gine(torch.nn.Module):
    def __init__(self, dim, edge_dim, classes, hidden=16, wide=False):
        super().__init__()

        def mlp(i, o):
            m = max(hidden, o) if wide else o
            return torch.nn.Sequential(torch.nn.Linear(i, m), torch.nn.ReLU(), torch.nn.Linear(m, o))

        self.conv1 = GINEConv(mlp(dim, hidden), edge_dim=edge_dim)
        self.conv2 = GINEConv(mlp(hidden, classes), edge_dim=edge_dim)

    def forward(self, x, edge_index, edge_attr):
        x = F.dropout(x, 0.5, self.training)
        x = F.relu(self.conv1(x, edge_index, edge_attr))
        x = F.dropout(x, 0.5, self.training)
        return self.conv2(x, edge_index, edge_attr)


class Gat(torch.nn.Module):
    def __init__(self, dim, edge_dim, classes, hidden=16, heads=4):
        super().__init__()
        self.conv1 = GATConv(dim, hidden, heads=heads, edge_dim=edge_dim)
        self.conv2 = GATConv(hidden * heads, classes, heads=1, edge_dim=edge_dim)

    def forward(self, x, edge_index, edge_attr):
        x = F.dropout(x, 0.5, self.training)
        x = F.elu(self.conv1(x, edge_index, edge_attr))
        x = F.dropout(x, 0.5, self.training)
        return self.conv2(x, edge_index, edge_attr)


def train(model, x, y, masks, edge_index, edge_attr, epochs, metrics=None):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    best = (-1.0, 0.0)
    for epoch in range(1, epochs + 1):
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x, edge_index, edge_attr)[masks["train"]], y[masks["train"]])
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            predicted = model(x, edge_index, edge_attr).argmax(1)
        accuracy = {s: float((predicted[m] == y[m]).float().mean()) for s, m in masks.items()}
        if accuracy["valid"] > best[0]:
            best = (accuracy["valid"], accuracy["test"])
        if metrics is not None:
            row = {"epoch": epoch, "train_loss": loss.item()}
            row.update({f"{s}_accuracy": accuracy[s] for s in ["valid", "test"]})
            metrics.write(json.dumps(row) + "\n")
    return best[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("graph")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--models", nargs="+", choices=["gine", "gat"], default=["gine", "gat"])
    parser.add_argument("--with-edges-only", action="store_true", help="skip the runs with zeros for edge features")
    parser.add_argument("--gine-mlp", choices=["out", "hidden"], default="out")
    parser.add_argument("--metrics", help="a directory for each run's epochs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    x, y, masks, edge_index, edge_attr = load(args.graph)
    classes = int(y.max()) + 1
    if args.metrics:
        os.makedirs(args.metrics, exist_ok=True)
    makers = {"gine": lambda *a: Gine(*a, wide=args.gine_mlp == "hidden"), "gat": Gat}
    results = {}
    for name in args.models:
        for with_edges in [True] if args.with_edges_only else [True, False]:
            key = f"pyg_{name}" + ("" if with_edges else "_no_edge_features")
            runs = results[key] = {"seeds": args.seeds, "test_accuracy": [], "seconds": []}
            for seed in args.seeds:
                torch.manual_seed(seed)
                attr = edge_attr if with_edges else torch.zeros_like(edge_attr)
                started = time.time()
                model = makers[name](x.shape[1], edge_attr.shape[1], classes)
                path = args.metrics and os.path.join(args.metrics, f"{key}-seed{seed}.jsonl")
                with open(path, "w") if path else contextlib.nullcontext() as metrics:
                    test = train(model, x, y, masks, edge_index, attr, args.epochs, metrics)
                runs["test_accuracy"].append(round(test, 4))
                runs["seconds"].append(round(time.time() - started, 1))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
