#!/usr/bin/env python3
"""The 1M table of BENCHMARKS.md section 27 from bench/control-variates-1m.sh's work directory:
per run, each seed's test accuracy at the best validation epoch, mean epoch seconds, seconds to
the exact run's best validation accuracy (and to 0.002 and 0.005 below it), counted from the
training's start (the first step's offset, which holds the refresh before the first epoch, plus
the epochs' seconds), and the histories' and exchange phases.

    python3 bench/control-variates-summary.py /tmp/graphflat-cv-1m
    SEEDS="0 1 2 3 4 5" python3 bench/control-variates-summary.py /tmp/graphflat-cv-1m
"""
import json, sys, os, re, statistics
work = sys.argv[1]
names = ["exact", "plain-10-10", "plain-5-5", "plain-2-2", "ax-2", "cv-2", "cv-5-draw2"]
def load(name, seed):
    d = f"{work}/model-{name}-{seed}"
    if not os.path.exists(f"{d}/metrics.jsonl"): return None
    m = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
    t = [json.loads(l) for l in open(f"{d}/timings.jsonl")]
    log = open(f"{work}/{name}-{seed}.log").read()
    first = re.search(r"first step ([0-9.]+)s after the start", log)
    return m, t, float(first.group(1)) if first else 0.0
def reach(m, t, target, start):
    s = start
    for a, b in zip(m, t):
        s += b["seconds"]
        if a["valid_accuracy"] >= target - 1e-12: return s
    return None
for name in names:
    rows = []
    for seed in [int(s) for s in os.environ.get("SEEDS", "0 1 2").split()]:
        e = load("exact", seed); r = load(name, seed)
        if not e or not r: continue
        best = max(a["valid_accuracy"] for a in e[0])
        m, t, start = r
        bi = max(range(len(m)), key=lambda i: (m[i]["valid_accuracy"], -i))
        rows.append(dict(test=m[bi]["test_accuracy"], epoch=statistics.mean(x["seconds"] for x in t),
            r0=reach(m, t, best, start), r2=reach(m, t, best - 0.002, start), r5=reach(m, t, best - 0.005, start),
            hist=statistics.mean(x.get("histories_seconds", 0) for x in t), exch=statistics.mean(x["exchange_seconds"] for x in t)))
    if not rows:
        continue  # not among the script's RUNS
    f = lambda v: "-" if v is None else f"{v:.1f}"
    print(name, "| test", " ".join(f"{r['test']:.4f}" for r in rows), f"mean {statistics.mean(r['test'] for r in rows):.4f}",
          "| epoch", " ".join(f"{r['epoch']:.2f}" for r in rows),
          "| to best", " ".join(f(r['r0']) for r in rows), "| to best-0.002", " ".join(f(r['r2']) for r in rows),
          "| to best-0.005", " ".join(f(r['r5']) for r in rows), "| hist", " ".join(f"{r['hist']:.2f}" for r in rows), "exch", " ".join(f"{r['exch']:.2f}" for r in rows))
