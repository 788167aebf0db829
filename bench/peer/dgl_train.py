"""The peer of GraphTrainer's epoch on the generated graph: DGL's sampled mini-batch training of
a 2-layer GCN (hidden 16, `GraphConv` with symmetric normalization over the sampled blocks,
fanouts [10, 10], Adam lr 0.01, batches of 1024), one epoch over the train nodes, then the
same sampled forward pass over the valid and test nodes. One thread. Prints load and epoch
seconds.

    python bench/peer/dgl_train.py NODES_DIR EDGES_DIR
"""
import resource
import sys
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
        self.first = GraphConv(dim, hidden, norm="both", allow_zero_in_degree=True)
        self.second = GraphConv(hidden, classes, norm="both", allow_zero_in_degree=True)

    def forward(self, blocks, x):
        return self.second(blocks[1], F.relu(self.first(blocks[0], x)))


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    started = time.time()
    graph, x, nodes = load(sys.argv[1], sys.argv[2], ("node_id", "features", "label", "split"))
    y = torch.from_numpy(nodes["label"].to_numpy())  # graph positions are table rows
    split = np.array(nodes["split"].to_pylist(), dtype=object)
    train = torch.from_numpy(np.flatnonzero(split == "train"))
    held = torch.from_numpy(np.flatnonzero((split == "valid") | (split == "test")))
    load_s = time.time() - started

    model = Gcn(x.shape[1], 16, int(y.max()) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    sampler = dgl.dataloading.NeighborSampler([10, 10])
    started = time.time()
    model.train()
    for input_nodes, output_nodes, blocks in dgl.dataloading.DataLoader(graph, train, sampler, batch_size=1024, shuffle=True):
        loss = F.cross_entropy(model(blocks, x[input_nodes]), y[output_nodes])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    train_s = time.time() - started
    started = time.time()
    model.eval()
    correct = 0
    with torch.no_grad():
        for input_nodes, output_nodes, blocks in dgl.dataloading.DataLoader(graph, held, sampler, batch_size=1024):
            correct += int((model(blocks, x[input_nodes]).argmax(1) == y[output_nodes]).sum())
    eval_s = time.time() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"dgl sampled epoch: {len(train)} train + {len(held)} eval nodes: load {load_s:.2f}s, train {train_s:.2f}s, "
          f"eval {eval_s:.2f}s, epoch {train_s + eval_s:.2f}s, accuracy {correct / len(held):.3f}, peak {peak:.0f} MB")


if __name__ == "__main__":
    main()
