"""An independent, dense PyTorch reference of control variates on a Planetoid graph in the OGB raw
layout (Cora, or CiteSeer from bench/planetoid-to-ogb.py): does an estimate over 2 drawn in-edges
reach the exact model, for the GCN and for GraphSAGE, outside this project's code?

The model is bench/control-variates-cora.sh's: a dense first layer over [precompute]'s product
(`Â X` for the GCN, `[X | mean X]` for GraphSAGE, X row-normalized), hidden 16, then the sampled
last layer; dropout 0.5 on the input and the hidden rows, Adam 0.01, weight decay 5e-4 on the
first layer, 200 epochs of one full step over the training nodes, test accuracy at the best
validation epoch. Each node's pool is 5 of its in-edges drawn once (all when fewer), and each
epoch draws 2 of the pool. Histories are the hidden rows without dropout, refreshed after each
step (zeros for the first). Modes:

- exact: every in-edge;
- cv: the sampled sum of `h - h̄` plus every in-edge's `h̄` (VR-GCN's CV);
- cvd: VR-GCN's CVD, as graphtrainer computes it: the dropout-free rows carry the control
  variate, and the dropout noise `h - h̊` is summed over the sample scaled by `sqrt(n / |S|)`.

    python bench/control-variates-reference.py ../shared/data/cora sage exact,cv,cvd [seeds]
"""

from __future__ import annotations

import gzip
import sys

import numpy as np
import torch
import torch.nn.functional as F


def lines(path: str) -> list[str]:
    return [line.strip() for line in gzip.open(path, "rt") if line.strip()]


def load(data: str):
    x = np.array([[float(v) for v in line.split(",")] for line in lines(f"{data}/raw/node-feat.csv.gz")], np.float32)
    x = torch.tensor(x / np.maximum(x.sum(1, keepdims=True), 1e-12))
    y = torch.tensor([int(line) for line in lines(f"{data}/raw/node-label.csv.gz")])
    edges = [tuple(int(v) for v in line.split(",")) for line in lines(f"{data}/raw/edge.csv.gz")]
    split = {s: torch.tensor([int(line) for line in lines(f"{data}/split/public/{s}.csv.gz")])
             for s in ("train", "valid", "test")}
    return x, y, edges, split


def main(data: str, model: str, modes: list[str], seeds: list[int]) -> None:
    x, y, edges, split = load(data)
    n = x.shape[0]
    ins: list[list[int]] = [[] for _ in range(n)]
    for s, d in edges:
        ins[d].append(s)
    a = torch.zeros(n, n)
    for v, sources in enumerate(ins):
        for u in sources:
            a[v, u] += 1
    mean = a / a.sum(1).clamp(min=1).unsqueeze(1)
    a_hat = a + torch.eye(n)
    d_hat = a_hat.sum(1)
    gcn = a_hat / torch.sqrt(d_hat.unsqueeze(1) * d_hat.unsqueeze(0))
    # The last layer's in-edge weights (without GCN's own term) and its own-row weights.
    weights = mean if model == "sage" else gcn - torch.diag(torch.diag(gcn))
    own = torch.zeros(n) if model == "sage" else torch.diag(gcn)
    product = torch.cat([x, mean @ x], 1) if model == "sage" else gcn @ x

    def run(mode: str, seed: int) -> float:
        g = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        classes = int(y.max()) + 1
        w0 = torch.nn.Linear(product.shape[1], 16)
        # The last layer: GCN's one weight, or GraphSAGE's self and neighbor weights.
        w_own = torch.nn.Linear(16, classes)
        w_in = torch.nn.Linear(16, classes, bias=False) if model == "sage" else None
        last_params = [*w_own.parameters(), *(w_in.parameters() if w_in else [])]
        opt = torch.optim.Adam([{"params": w0.parameters(), "weight_decay": 5e-4},
                                {"params": last_params, "weight_decay": 0.0}], lr=0.01)

        def last(h_own, agg):
            # GraphSAGE: h_v W_self + agg W_neigh + b; GCN: (own_v h_v + agg) W + b.
            if model == "sage":
                return w_own(h_own) + w_in(agg)
            return w_own(own.unsqueeze(1) * h_own + agg)

        pools = [p if len(p) <= 5 else [p[i] for i in torch.randperm(len(p), generator=g)[:5].tolist()] for p in ins]
        history = torch.zeros(n, 16)
        best, test = -1.0, 0.0
        for _ in range(200):
            h = F.dropout(F.relu(w0(F.dropout(product, 0.5))), 0.5)
            if mode == "exact":
                agg = weights @ h
            else:
                sampled, noise = torch.zeros(n, n), torch.zeros(n, n)
                for v, pool in enumerate(pools):
                    drawn = pool if len(pool) <= 2 else [pool[i] for i in torch.randperm(len(pool), generator=g)[:2].tolist()]
                    for u in drawn:
                        ratio = len(ins[v]) / len(drawn)
                        sampled[v, u] += weights[v, u] * ratio
                        noise[v, u] += weights[v, u] * ratio ** 0.5
                if mode == "cv":
                    agg = sampled @ (h - history) + weights @ history
                else:
                    clean = F.relu(w0(product))
                    agg = noise @ (h - clean) + sampled @ (clean - history) + weights @ history
            loss = F.cross_entropy(last(h, agg)[split["train"]], y[split["train"]])
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                h = F.relu(w0(product))
                history = h.clone()
                prediction = last(h, weights @ h).argmax(1)
                valid = (prediction[split["valid"]] == y[split["valid"]]).float().mean().item()
                if valid > best:
                    best = valid
                    test = (prediction[split["test"]] == y[split["test"]]).float().mean().item()
        return test

    for mode in modes:
        accuracies = [run(mode, seed) for seed in seeds]
        print(model, mode, [round(t, 3) for t in accuracies], f"mean {sum(accuracies) / len(accuracies):.4f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    torch.set_num_threads(2)
    seeds = [int(s) for s in sys.argv[4].split(",")] if len(sys.argv) > 4 else list(range(5))
    main(sys.argv[1], sys.argv[2], sys.argv[3].split(","), seeds)
