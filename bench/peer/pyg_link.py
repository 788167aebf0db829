"""The peer of the link task: PyG's standard link-prediction recipe (its `examples/link_pred.py`)
on the node table and the split edge table that `graphflat split-edges` writes (node
`features`; edge `src`, `dst`, `split`). Edges are in-edges of `dst`, as GraphFlat reads them.

- Message passing over the `train` edges only (and edges without a split), as every stage of
  this project does: `valid` and `test` edges never carry messages.
- Encoder: 2-layer GCN, 128 -> 64 (ReLU between). Decoder: the dot product of the two ends.
- Input: the node `features`, or with `--learned-dim D` (D > 0) a learned vector of D per node
  instead (`torch.nn.Embedding(N, D)`, PyTorch's default init N(0, 1), dense gradients), trained
  jointly with the GCN by the same Adam; the features are then not used at all.
- Training: every `train` edge is a positive; each epoch draws one random negative per positive
  (PyG's `negative_sampling` over the train edges), binary cross-entropy, Adam lr 0.01, one
  thread, `--epochs` epochs (default 100). `--seed` seeds torch and Python's `random` (which
  `negative_sampling` draws from), so a run repeats exactly.
- Evaluation after each epoch: AUC of the `valid` and of the `test` edges against as many random
  node pairs that are no edge of the table (in any split), drawn once with a fixed seed.

Prints, as JSON, the test AUC at the epoch of the best validation AUC, that epoch, the test AUC
of the last epoch, and the seconds of the training loop (evaluation included, loading excluded).
With `--curve PATH`, also writes one JSON line per epoch to PATH: `{"epoch", "valid_auc",
"test_auc", "loss"}` (the loss of that epoch's training step).

    python bench/peer/pyg_link.py GRAPH_DIR [--epochs 100] [--seed 0] [--learned-dim 0] [--curve PATH]

GRAPH_DIR holds `nodes/` and `edges/` (the output of `split-edges`, or a directory with links to
both).
"""

import argparse
import json
import random
import time

import numpy as np
import pyarrow.parquet as pq
import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv
from torch_geometric.utils import negative_sampling


def vectors(column):
    return np.stack([np.asarray(v, dtype=np.float32) for v in column.to_pylist()])


def load(root):
    """Node features by slot, and each split's edges as a 2 x E tensor of slots."""
    nodes = pq.read_table(f"{root}/nodes")
    edges = pq.read_table(f"{root}/edges")
    ids = nodes.column("node_id").to_numpy()
    order = np.argsort(ids)
    slot = np.empty(int(ids.max()) + 1, dtype=np.int64)
    slot[ids[order]] = np.arange(len(ids))
    x = torch.from_numpy(vectors(nodes.column("features"))[order])
    src = slot[edges.column("src").to_numpy()]
    dst = slot[edges.column("dst").to_numpy()]
    split = np.array(["train" if s is None else s for s in edges.column("split").to_pylist()], dtype=object)
    by_split = {s: torch.from_numpy(np.stack([src[split == s], dst[split == s]])) for s in ["train", "valid", "test"]}
    return x, by_split, (src, dst)


def negatives(count, nodes, edges, rng):
    """`count` random node pairs (u, v), u != v, that are no edge of the table."""
    taken = set(zip(edges[0].tolist(), edges[1].tolist()))
    pairs = []
    while len(pairs) < count:
        u, v = (int(a) for a in rng.integers(0, nodes, 2))
        if u != v and (u, v) not in taken:
            pairs.append((u, v))
            taken.add((u, v))
    return torch.tensor(pairs, dtype=torch.long).t()


def auc(positive, negative):
    """The probability that a positive scores above a negative (ties count one half): the
    Mann-Whitney statistic over average ranks."""
    scores = np.concatenate([positive, negative])
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts
    ranks = (first + (counts + 1) / 2.0)[inverse]
    n_pos, n_neg = len(positive), len(negative)
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


class Net(torch.nn.Module):
    """With `nodes` set, the input is a learned `nodes x dim` embedding and `x` is ignored."""

    def __init__(self, dim, hidden=128, out=64, nodes=None):
        super().__init__()
        self.embedding = torch.nn.Embedding(nodes, dim) if nodes else None
        self.conv1 = GCNConv(dim, hidden)
        self.conv2 = GCNConv(hidden, out)

    def encode(self, x, edge_index):
        if self.embedding is not None:
            x = self.embedding.weight
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)

    @staticmethod
    def decode(z, pairs):
        return (z[pairs[0]] * z[pairs[1]]).sum(-1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("graph")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--learned-dim", type=int, default=0, help="D > 0: a learned D-vector per node as input, no features"
    )
    parser.add_argument("--curve", help="write one JSON line per epoch (epoch, valid_auc, test_auc, loss) here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    random.seed(args.seed)  # PyG's negative_sampling draws with Python's `random`
    x, by_split, all_edges = load(args.graph)
    train_edges, n = by_split["train"], x.shape[0]
    rng = np.random.default_rng(12345)
    evaluate = {s: (by_split[s], negatives(by_split[s].shape[1], n, all_edges, rng)) for s in ["valid", "test"]}

    if args.learned_dim > 0:
        model = Net(args.learned_dim, nodes=n)
    else:
        model = Net(x.shape[1])
    curve = []
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    best = {"valid_auc": -1.0, "test_auc": 0.0, "epoch": 0}
    started = time.time()
    for epoch in range(1, args.epochs + 1):
        model.train()
        optimizer.zero_grad()
        z = model.encode(x, train_edges)
        negative = negative_sampling(train_edges, num_nodes=n, num_neg_samples=train_edges.shape[1])
        logits = torch.cat([model.decode(z, train_edges), model.decode(z, negative)])
        labels = torch.cat([torch.ones(train_edges.shape[1]), torch.zeros(negative.shape[1])])
        loss = F.binary_cross_entropy_with_logits(logits, labels)
        loss.backward()
        optimizer.step()

        model.eval()
        with torch.no_grad():
            z = model.encode(x, train_edges)
            aucs = {s: auc(model.decode(z, p).numpy(), model.decode(z, q).numpy()) for s, (p, q) in evaluate.items()}
        if aucs["valid"] > best["valid_auc"]:
            best = {"valid_auc": aucs["valid"], "test_auc": aucs["test"], "epoch": epoch}
        curve.append({"epoch": epoch, "valid_auc": aucs["valid"], "test_auc": aucs["test"], "loss": loss.item()})
    seconds = time.time() - started
    if args.curve:
        with open(args.curve, "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in curve)
    print(
        json.dumps(
            {
                "pyg_gcn_link": {
                    "test_auc_at_best_valid": round(best["test_auc"], 4),
                    "best_valid_auc": round(best["valid_auc"], 4),
                    "best_epoch": best["epoch"],
                    "final_test_auc": round(aucs["test"], 4),
                    "learned_dim": args.learned_dim,
                    "edges": {s: int(e.shape[1]) for s, e in by_split.items()},
                    "seconds": round(seconds, 1),
                }
            }
        )
    )


if __name__ == "__main__":
    main()
