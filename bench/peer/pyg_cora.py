"""The peer of `jobs/cora-infer.toml`'s training: PyG's full-batch 2-layer GCN on Cora with Kipf
& Welling's settings (hidden 16, dropout 0.5, Adam lr 0.01, weight decay 5e-4, row-normalized
features, 200 epochs), evaluating valid and test accuracy after every epoch, one thread. Reads
the same OGB raw layout (`../shared/data/cora`) that `graphflat import ogb` reads, and runs the
same graph: the file's edges as in-edges, self-loops, symmetric normalization by in-degree.

    python bench/peer/pyg_cora.py ../shared/data/cora
"""
import gzip
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv


def read(path, dtype, delimiter=","):
    with gzip.open(path, "rt") as f:
        return np.loadtxt(f, delimiter=delimiter, dtype=dtype, ndmin=1)


def main():
    root = sys.argv[1]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    started = time.time()
    x = torch.from_numpy(read(f"{root}/raw/node-feat.csv.gz", np.float32))
    x = x / x.sum(1, keepdim=True).clamp(min=1)
    y = torch.from_numpy(read(f"{root}/raw/node-label.csv.gz", np.int64).reshape(-1))
    edges = torch.from_numpy(read(f"{root}/raw/edge.csv.gz", np.int64)).t().contiguous()
    split = {s: torch.from_numpy(read(f"{root}/split/public/{s}.csv.gz", np.int64).reshape(-1)) for s in ["train", "valid", "test"]}
    load = time.time() - started

    class Gcn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GCNConv(x.shape[1], 16, cached=False)
            self.conv2 = GCNConv(16, int(y.max()) + 1, cached=False)

        def forward(self, x, edges):
            x = F.dropout(x, 0.5, self.training)
            x = F.relu(self.conv1(x, edges))
            x = F.dropout(x, 0.5, self.training)
            return self.conv2(x, edges)

    model = Gcn()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    started = time.time()
    for _ in range(200):
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x, edges)[split["train"]], y[split["train"]])
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            predicted = model(x, edges).argmax(1)
            accuracy = {s: float((predicted[split[s]] == y[split[s]]).float().mean()) for s in ["valid", "test"]}
    train = time.time() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pyg: load {load:.2f}s, 200 epochs {train:.2f}s, valid {accuracy['valid']:.3f}, test {accuracy['test']:.3f}, peak {peak:.0f} MB")


if __name__ == "__main__":
    main()
