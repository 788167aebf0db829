"""The peer of the edge-feature models: PyG's `GINEConv` and `GATConv(edge_dim=E)`, full batch,
on the same Parquet node and edge tables that `graphflat generate --edge-feature-dim E` writes
(node `features`, `label`, `split`; edge `src`, `dst`, edge `features`). Edges are in-edges of
`dst`, as GraphFlat reads them. Two layers, hidden 16 (GAT: 4 heads of 16), Adam lr 0.01,
weight decay 5e-4, dropout 0.5, `--epochs` epochs, one thread; prints the test accuracy at the
best validation epoch of each model, with and without the edge features (zeros in their place).

    python bench/peer/pyg_edge.py GRAPH_DIR [--epochs 200]

GATConv's edge features only weigh the messages (they enter the attention logit), so a label
that is carried by the edges alone is out of its reach; GINE adds them to the messages.
"""
import argparse
import json
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
    def __init__(self, dim, edge_dim, classes, hidden=16):
        super().__init__()
        mlp = lambda i, o: torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.ReLU(), torch.nn.Linear(o, o))
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


def train(model, x, y, masks, edge_index, edge_attr, epochs):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    best = (-1.0, 0.0)
    for _ in range(epochs):
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
    return best[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("graph")
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    x, y, masks, edge_index, edge_attr = load(args.graph)
    classes = int(y.max()) + 1
    results = {}
    for name, make in [("gine", Gine), ("gat", Gat)]:
        for with_edges in [True, False]:
            torch.manual_seed(0)
            attr = edge_attr if with_edges else torch.zeros_like(edge_attr)
            started = time.time()
            model = make(x.shape[1], edge_attr.shape[1], classes)
            test = train(model, x, y, masks, edge_index, attr, args.epochs)
            key = f"pyg_{name}" + ("" if with_edges else "_no_edge_features")
            results[key] = {"test_accuracy": round(test, 4), "seconds": round(time.time() - started, 1)}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
