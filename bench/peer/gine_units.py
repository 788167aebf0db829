"""Why GINE stalls on 2-hop sums (issue 51, BENCHMARKS section 11): a PyTorch copy of graphflat's
2-layer GINE (`h'_w = MLP(h_w + sum_u ReLU(h_u + e_uw W_e + b_e))`, `MLP = Linear(in, m) -> ReLU ->
Linear(m, out)`, Glorot weights and zero biases, dropout before each layer, ReLU between) on the
whole graph of `graphflat generate` tables (the same as records with every edge), trained on the
train nodes in shuffled batches like the trainer's (Adam lr 0.01, L2 weight decay 5e-4, hidden 16,
dropout 0.5, 200 epochs by default), once per seed. Each variant changes one suspect:

    --mlp out|hidden        m = out (before the fix) or max(hidden, out) (since)
    --init glorot|pyg       ours, or PyTorch's Linear default (within 1/sqrt(fan_in), random biases)
    --dropout R  --weight-decay W  --batch N (0: full batch)

Per seed: the first epoch's loss, the epochs at ln C (to 0.01), the last MLP's units that are
dead for every node after the first epoch, the test accuracy after epochs 20 and 50 and the
last; then how many seeds sat 20 or more epochs at ln C.

    python bench/peer/gine_units.py GRAPH_DIR [--seeds 10] [--mlp out] [--init glorot] ...
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyg_edge import load  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("graph")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--init", choices=["glorot", "pyg"], default="glorot")
    p.add_argument("--mlp", choices=["out", "hidden"], default="out")
    a = p.parse_args()
    torch.set_num_threads(1)
    x, y, masks, edge_index, edge_attr = load(a.graph)
    src, dst = edge_index
    train_nodes = masks["train"].nonzero().flatten()
    classes = int(y.max()) + 1

    def linear(i, o):
        layer = torch.nn.Linear(i, o)
        if a.init == "glorot":
            torch.nn.init.xavier_uniform_(layer.weight)
            torch.nn.init.zeros_(layer.bias)
        return layer

    class Layer(torch.nn.Module):
        def __init__(self, i, o):
            super().__init__()
            m = max(a.hidden, o) if a.mlp == "hidden" else o
            self.l1, self.l2, self.edge = linear(i, m), linear(m, o), linear(edge_attr.shape[1], i)

        def forward(self, h):
            z = h + torch.zeros_like(h).index_add_(0, dst, F.relu(h[src] + self.edge(edge_attr)))
            self.pre = self.l1(z).detach()
            return self.l2(F.relu(self.l1(z)))

    def run(seed):
        torch.manual_seed(seed)
        layers = torch.nn.ModuleList([Layer(x.shape[1], a.hidden), Layer(a.hidden, classes)])
        optimizer = torch.optim.Adam(layers.parameters(), lr=0.01, weight_decay=a.weight_decay)

        def forward(training):
            h = x
            for i, layer in enumerate(layers):
                h = layer(F.dropout(h, a.dropout, training))
                h = F.relu(h) if i == 0 else h
            return h

        history = []
        for _ in range(a.epochs):
            order = train_nodes[torch.randperm(len(train_nodes))]
            size = a.batch or len(order)
            losses = []
            for i in range(0, len(order), size):
                b = order[i : i + size]
                optimizer.zero_grad()
                loss = F.cross_entropy(forward(True)[b], y[b])
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            with torch.no_grad():
                predicted = forward(False).argmax(1)
            dead = int((layers[1].pre > 0).sum(0).eq(0).sum())
            test = float((predicted[masks["test"]] == y[masks["test"]]).float().mean())
            history.append((float(np.mean(losses)), test, dead))
        stuck = sum(abs(h[0] - math.log(classes)) < 0.01 for h in history)
        at = lambda e: history[min(e, len(history)) - 1][1]
        width = layers[1].pre.shape[1]
        print(
            f"seed {seed}: epoch-1 loss {history[0][0]:.2f}, {stuck} epochs at ln C, last MLP units dead after "
            f"epoch 1 {history[0][2]}/{width}, test @20 {at(20):.3f} @50 {at(50):.3f} last {history[-1][1]:.3f}",
            flush=True,
        )
        return stuck, history[-1][1]

    print(vars(a))
    runs = [run(seed) for seed in range(a.seeds)]
    print(f"seeds 20 or more epochs at ln C: {sum(s >= 20 for s, _ in runs)}/{len(runs)}; "
          f"mean last test accuracy {np.mean([t for _, t in runs]):.3f}")


if __name__ == "__main__":
    main()
