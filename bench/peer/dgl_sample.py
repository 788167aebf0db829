"""The peer of GraphFlat with fanouts [10, 10] over every node: DGL's `NeighborSampler` (in-edges,
uniform without replacement) building the 2-layer blocks of all targets in batches of 1024,
with each batch's input features gathered, in memory, writing nothing. One thread. Prints load
and sampling seconds and targets per second.

    python bench/peer/dgl_sample.py NODES_DIR EDGES_DIR
"""
import resource
import sys
import time

import torch

import dgl
from dgl_common import load


def main():
    torch.set_num_threads(1)
    started = time.time()
    graph, x, _ = load(sys.argv[1], sys.argv[2])
    load_s = time.time() - started

    sampler = dgl.dataloading.NeighborSampler([10, 10])
    targets = torch.arange(graph.num_nodes())
    loader = dgl.dataloading.DataLoader(graph, targets, sampler, batch_size=1024, shuffle=False, drop_last=False)
    started = time.time()
    rows = 0
    for input_nodes, _, blocks in loader:
        rows += x[input_nodes].shape[0]
    sample_s = time.time() - started
    n = graph.num_nodes()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"dgl NeighborSampler: {n} targets, {rows} input rows: load {load_s:.2f}s, sampling + gather {sample_s:.2f}s "
          f"({n / sample_s / 1e3:.1f}k targets/s), peak {peak:.0f} MB")


if __name__ == "__main__":
    main()
