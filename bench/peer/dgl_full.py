"""The peer of full-graph training (BENCHMARKS.md section 23): DGL's full-graph training of a
2-layer GCN on CPU. Self-loops are removed and added back once each (`dgl.remove_self_loop`,
then `dgl.add_self_loop`), so `GraphConv(norm="both")` is the GCN with self-loops and symmetric
normalization (each edge scaled by 1 / sqrt(out-degree(src) * in-degree(dst)), self-loops
counted: D^-1/2 (A + I) D^-1/2 where the graph is undirected). GraphConv(dim, 16) -> ReLU ->
dropout 0.5 -> GraphConv(16, classes); no dropout on the input features. Adam lr 0.01. Each
epoch: a forward pass over the whole graph in train mode, cross-entropy on the train nodes,
backward, step; then an evaluation forward pass over the whole graph (eval mode, no grad)
scoring the valid and test nodes. One thread. Prints a line per epoch (train, eval and epoch
seconds), then one JSON line: load seconds, each epoch's seconds and their median, the last
epoch's valid and test accuracy, peak RSS.

    python bench/peer/dgl_full.py NODES_DIR EDGES_DIR [--epochs N]      (default 3 epochs)
"""
import argparse
import json
import resource
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F
from dgl.nn import GraphConv

import dgl
from dgl_common import load


class Gcn(torch.nn.Module):
    def __init__(self, dim, hidden, classes):
        super().__init__()
        self.first = GraphConv(dim, hidden, norm="both")
        self.second = GraphConv(hidden, classes, norm="both")

    def forward(self, graph, x):
        h = F.dropout(F.relu(self.first(graph, x)), p=0.5, training=self.training)
        return self.second(graph, h)


def accuracy(logits, y, nodes):
    return float((logits[nodes].argmax(1) == y[nodes]).float().mean())


def main():
    parser = argparse.ArgumentParser(description="DGL full-graph GCN training, the peer of section 23")
    parser.add_argument("nodes_dir")
    parser.add_argument("edges_dir")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    np.random.seed(0)
    started = time.time()
    graph, x, nodes = load(args.nodes_dir, args.edges_dir, ("node_id", "features", "label", "split"))
    graph = dgl.add_self_loop(dgl.remove_self_loop(graph))
    y = torch.from_numpy(nodes["label"].to_numpy()).long()  # graph positions are table rows
    split = np.array(nodes["split"].to_pylist(), dtype=object)
    train = torch.from_numpy(np.flatnonzero(split == "train"))
    valid = torch.from_numpy(np.flatnonzero(split == "valid"))
    test = torch.from_numpy(np.flatnonzero(split == "test"))
    load_s = time.time() - started
    print(f"dgl full graph: {graph.num_nodes()} nodes, {graph.num_edges()} edges with self-loops, "
          f"{len(train)} train, {len(valid)} valid, {len(test)} test; load {load_s:.2f}s", flush=True)

    model = Gcn(x.shape[1], 16, int(y.max()) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    epoch_seconds = []
    valid_acc = test_acc = float("nan")
    for epoch in range(1, args.epochs + 1):
        started = time.time()
        model.train()
        loss = F.cross_entropy(model(graph, x)[train], y[train])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        train_s = time.time() - started
        started = time.time()
        model.eval()
        with torch.no_grad():
            logits = model(graph, x)
            valid_acc, test_acc = accuracy(logits, y, valid), accuracy(logits, y, test)
        eval_s = time.time() - started
        epoch_seconds.append(train_s + eval_s)
        print(f"epoch {epoch}: loss {float(loss):.4f}, train {train_s:.3f}s, eval {eval_s:.3f}s, "
              f"epoch {train_s + eval_s:.3f}s, valid {valid_acc:.4f}, test {test_acc:.4f}", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"dgl_full_gcn": {
        "load_seconds": round(load_s, 3),
        "epoch_seconds": [round(s, 4) for s in epoch_seconds],
        "median_epoch_seconds": round(statistics.median(epoch_seconds), 4) if epoch_seconds else None,
        "valid_acc": round(valid_acc, 4),
        "test_acc": round(test_acc, 4),
        "peak_rss_mb": round(peak),
    }}))


if __name__ == "__main__":
    main()
