"""The peer of the 1M-node link benchmark (bench/link-1m.sh): PyG's `LinkNeighborLoader` on the
node table and the split edge table that `graphflat split-edges` writes (node `node_id`,
`features`, the latter not read with `--learned-dim`; edge `src`, `dst`, `split`), and full-graph inference of every node's embedding
plus the dot scores of a table of candidate pairs. Edges are in-edges of `dst`, as GraphFlat
reads them (PyG's default flow, source to target). One thread (`torch.set_num_threads(1)`,
`num_workers = 0`: sampling runs inline).

`--stage train` (times one row per epoch):
- Message passing over the `train` edges only (and edges without a split), as every stage of
  the project: `valid` and `test` edges never carry messages.
- Supervision: a seeded 10% Bernoulli sample (`--fraction`, numpy `default_rng(--seed)`) of the
  train edges is trained on, and the same share of the valid and of the test edges is
  evaluated after each epoch. Not the same edges as GraphFlat's `supervision_fraction` draw
  (a hash of (seed, src, dst)), the same share of each split.
- `LinkNeighborLoader`, `num_neighbors = [10, 10]`, `NegativeSampling("binary", 1.0)` (one
  random pair per positive, PyG's `neg_sampling_ratio = 1.0`), `--batch-size` positives a batch
  (default 512, as ours), shuffled.
- Encoder: 2-layer `SAGEConv` (mean), 32 -> `--hidden` -> `--embedding` (64, 64), ReLU between, no
  dropout; decoder: the dot product of the two ends; binary cross-entropy, Adam lr 0.01, no
  weight decay.
- Input: the node `features`, or with `--learned-dim D` (D > 0) a learned vector of D per node
  instead, `torch.nn.Embedding(nodes, D, sparse=True)` (PyTorch's default init N(0, 1)) indexed
  by each batch's sampled global node slots (`batch.n_id`) and stepped by `torch.optim.SparseAdam`
  lr 0.01 (only the batch's rows move), while the SAGE weights keep Adam. The `features` column
  is then not read at all (the node table may have none): the loader's `Data` holds only
  `edge_index` and `num_nodes`. So the layer 1 input is D wide instead of 32.
- Per epoch: the training pass (seconds, of which the seconds spent in the loader: sampling,
  negatives and feature gathering; with `--learned-dim`, the embedding lookup is compute) and the evaluation pass over the sampled valid and test edges
  (sampled 2-hop neighborhoods too, no gradient; AUC of positives against their negatives).
- Writes the model's `state_dict` to `--model`.

`--stage infer` (reads `--model`):
- Full-graph inference: the encoder over every node and every train edge at once (no sampling;
  with `--learned-dim`, the trained embedding table is the input),
  written as zstd Parquet `node_id`, `embedding` (fixed_size_list<float32, 64>) to `--out`/embeddings;
- then the `src`, `dst` table `PAIRS` (int64 node ids): each pair's dot score, in chunks of 1M,
  written as zstd Parquet `src`, `dst`, `score` to `--out`/pairs.

Prints, as JSON, the seconds of each phase and the process's peak RSS (`ru_maxrss`).

    python bench/peer/pyg_link_sampled.py GRAPH_DIR --stage train --model M.pt [--epochs 1] [--learned-dim 0]
    python bench/peer/pyg_link_sampled.py GRAPH_DIR --stage infer --model M.pt --pairs PAIRS --out DIR [--learned-dim 0]

GRAPH_DIR holds `nodes/` and `edges/` (a directory with the node table and `split-edges`'s
output). `LinkNeighborLoader` needs `pyg-lib` or `torch-sparse`; `bench/peer/venv-sampled.sh`
makes a venv with `torch-sparse` over the peers' venv.
"""

import argparse
import json
import os
import resource
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import LinkNeighborLoader
from torch_geometric.nn import SAGEConv
from torch_geometric.sampler import NegativeSampling


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def load(root, features=True):
    """Node ids and features by slot (None without `features`: that column is then not read), each
    split's edges as a 2 x E tensor of slots, and the slot of every node id."""
    nodes = pq.read_table(f"{root}/nodes", columns=["node_id", "features"] if features else ["node_id"])
    ids = nodes.column("node_id").to_numpy()
    x = None
    if features:
        column = nodes.column("features").combine_chunks()
        width = len(column[0])
        x = torch.from_numpy(pc.list_flatten(column).to_numpy().astype(np.float32).reshape(len(ids), width))
    slot = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
    slot[ids] = np.arange(len(ids))
    edges = pq.read_table(f"{root}/edges", columns=["src", "dst", "split"])
    src = slot[edges.column("src").to_numpy()]
    dst = slot[edges.column("dst").to_numpy()]
    split = pc.fill_null(edges.column("split"), "train")
    by_split = {}
    for s in ["train", "valid", "test"]:
        mask = pc.equal(split, s).to_numpy(zero_copy_only=False)
        by_split[s] = torch.from_numpy(np.stack([src[mask], dst[mask]]))
    return ids, x, by_split, slot


class Net(torch.nn.Module):
    """With `nodes` set, the input is a learned `nodes x dim` sparse embedding, not the features."""

    def __init__(self, dim, hidden, out, nodes=None):
        super().__init__()
        self.embedding = torch.nn.Embedding(nodes, dim, sparse=True) if nodes else None
        self.conv1 = SAGEConv(dim, hidden)
        self.conv2 = SAGEConv(hidden, out)

    def inputs(self, batch):
        """Layer 1's input rows for a sampled batch: its nodes' embedding rows or features."""
        return self.embedding(batch.n_id) if self.embedding is not None else batch.x

    def forward(self, x, edge_index):
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)

    @staticmethod
    def decode(z, pairs):
        return (z[pairs[0]] * z[pairs[1]]).sum(-1)


def auc(positive, negative):
    """The probability that a positive scores above a negative, ties counting one half."""
    scores = np.concatenate([positive, negative])
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ranks = ((np.cumsum(counts) - counts) + (counts + 1) / 2.0)[inverse]
    n_pos, n_neg = len(positive), len(negative)
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def loader(data, edges, batch_size, shuffle):
    return LinkNeighborLoader(
        data,
        num_neighbors=[10, 10],
        edge_label_index=edges,
        neg_sampling=NegativeSampling("binary", 1.0),
        batch_size=batch_size,
        shuffle=shuffle,
    )


def timed_batches(batches):
    """Yields the loader's batches and adds the seconds spent producing them to `waited[0]`."""
    waited = [0.0]

    def gen():
        it = iter(batches)
        while True:
            t = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                return
            waited[0] += time.perf_counter() - t
            yield batch

    return gen(), waited


def model_for(args, x, nodes):
    if args.learned_dim > 0:
        return Net(args.learned_dim, args.hidden, args.embedding, nodes=nodes)
    return Net(x.shape[1], args.hidden, args.embedding)


def train(args):
    started = time.perf_counter()
    ids, x, by_split, _ = load(args.graph, features=args.learned_dim == 0)
    rng = np.random.default_rng(args.seed)
    supervision = {}
    for s, e in by_split.items():
        keep = torch.from_numpy(rng.random(e.shape[1]) < args.fraction)
        supervision[s] = e[:, keep]
    if x is None:
        data = Data(edge_index=by_split["train"], num_nodes=len(ids))
    else:
        data = Data(x=x, edge_index=by_split["train"], num_nodes=x.shape[0])
    load_s = time.perf_counter() - started

    model = model_for(args, x, len(ids))
    dense = [p for name, p in model.named_parameters() if not name.startswith("embedding.")]
    optimizers = [torch.optim.Adam(dense, lr=0.01)]
    if model.embedding is not None:
        optimizers.append(torch.optim.SparseAdam(model.embedding.parameters(), lr=0.01))
    train_loader = loader(data, supervision["train"], args.batch_size, True)
    evaluate = {s: loader(data, supervision[s], args.batch_size, False) for s in ["valid", "test"]}
    epochs = []
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        batches, waited = timed_batches(train_loader)
        loss_sum, steps = 0.0, 0
        for batch in batches:
            for optimizer in optimizers:
                optimizer.zero_grad()
            z = model(model.inputs(batch), batch.edge_index)
            logits = model.decode(z, batch.edge_label_index)
            loss = F.binary_cross_entropy_with_logits(logits, batch.edge_label)
            loss.backward()
            for optimizer in optimizers:
                optimizer.step()
            loss_sum, steps = loss_sum + float(loss), steps + 1
        train_s = time.perf_counter() - t0
        train_wait = waited[0]

        t1 = time.perf_counter()
        model.eval()
        aucs, eval_wait = {}, 0.0
        with torch.no_grad():
            for s, eval_loader in evaluate.items():
                batches, waited = timed_batches(eval_loader)
                pos, neg = [], []
                for batch in batches:
                    score = model.decode(model(model.inputs(batch), batch.edge_index), batch.edge_label_index)
                    label = batch.edge_label.bool()
                    pos.append(score[label].numpy())
                    neg.append(score[~label].numpy())
                eval_wait += waited[0]
                aucs[s] = round(auc(np.concatenate(pos), np.concatenate(neg)), 4)
        eval_s = time.perf_counter() - t1
        epochs.append(
            {
                "epoch": epoch,
                "seconds": round(train_s + eval_s, 2),
                "train_seconds": round(train_s, 2),
                "train_loader_seconds": round(train_wait, 2),
                "eval_seconds": round(eval_s, 2),
                "eval_loader_seconds": round(eval_wait, 2),
                "loss": round(loss_sum / max(steps, 1), 4),
                "valid_auc": aucs["valid"],
                "test_auc": aucs["test"],
            }
        )
    torch.save(model.state_dict(), args.model)
    return {
        "load_seconds": round(load_s, 2),
        "supervision": {s: int(e.shape[1]) for s, e in supervision.items()},
        "message_passing_edges": int(by_split["train"].shape[1]),
        "learned_dim": args.learned_dim,
        "epochs": epochs,
    }


def infer(args):
    started = time.perf_counter()
    ids, x, by_split, slot = load(args.graph, features=args.learned_dim == 0)
    edge_index = by_split["train"]
    del by_split
    load_s = time.perf_counter() - started

    model = model_for(args, x, len(ids))
    model.load_state_dict(torch.load(args.model))
    model.eval()
    if model.embedding is not None:
        x = model.embedding.weight.detach()
    t0 = time.perf_counter()
    with torch.no_grad():
        z = model(x, edge_index)
    embed_s = time.perf_counter() - t0
    del x, edge_index

    t1 = time.perf_counter()
    os.makedirs(f"{args.out}/embeddings", exist_ok=True)
    flat = pa.array(z.numpy().reshape(-1))
    table = pa.table({"node_id": pa.array(ids), "embedding": pa.FixedSizeListArray.from_arrays(flat, z.shape[1])})
    pq.write_table(table, f"{args.out}/embeddings/part-0.parquet", compression="zstd")
    del table, flat
    embed_write_s = time.perf_counter() - t1

    t2 = time.perf_counter()
    pairs = pq.read_table(args.pairs, columns=["src", "dst"])
    src_ids = pairs.column("src").to_numpy()
    dst_ids = pairs.column("dst").to_numpy()
    src, dst = torch.from_numpy(slot[src_ids]), torch.from_numpy(slot[dst_ids])
    scores = torch.empty(len(src_ids), dtype=torch.float32)
    chunk = 1 << 20
    with torch.no_grad():
        for i in range(0, len(src_ids), chunk):
            scores[i : i + chunk] = (z[src[i : i + chunk]] * z[dst[i : i + chunk]]).sum(-1)
    pairs_s = time.perf_counter() - t2

    t3 = time.perf_counter()
    os.makedirs(f"{args.out}/pairs", exist_ok=True)
    table = pa.table({"src": src_ids, "dst": dst_ids, "score": scores.numpy()})
    pq.write_table(table, f"{args.out}/pairs/part-0.parquet", compression="zstd")
    pairs_write_s = time.perf_counter() - t3
    return {
        "load_seconds": round(load_s, 2),
        "embed_seconds": round(embed_s, 2),
        "embed_write_seconds": round(embed_write_s, 2),
        "pairs": len(src_ids),
        "pairs_seconds": round(pairs_s, 2),
        "pairs_write_seconds": round(pairs_write_s, 2),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("graph")
    parser.add_argument("--stage", choices=["train", "infer"], required=True)
    parser.add_argument("--model", required=True, help="the state_dict: written by train, read by infer")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--embedding", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--learned-dim", type=int, default=0, help="D > 0: a learned sparse D-vector per node as input, no features"
    )
    parser.add_argument("--pairs", help="infer: the src, dst table to score")
    parser.add_argument("--out", help="infer: where embeddings/ and pairs/ go")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    result = train(args) if args.stage == "train" else infer(args)
    result["seconds"] = round(time.perf_counter() - started, 2)
    result["peak_mb"] = peak_mb()
    print(json.dumps({f"pyg_link_sampled_{args.stage}": result}))


if __name__ == "__main__":
    main()
