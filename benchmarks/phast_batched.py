"""Benchmark: batched PHAST on the GPU (many trees a pass; Delling, Goldberg, Nowatzyk, Werneck, PHAST, IPDPS
2011; Karimi, Koppelman, Michael, ICS '19 sec. 3.8): variants of the per-level pull (``--variants
UNROLL:DEEP:DEGREE``: one or four in-arcs in flight a thread, ``config.CH_PHAST_LEVEL_UNROLL``, ``ph_level`` /
``ph_level4`` of ``ch/phast.cu``; 8 or 16 on levels of mean in-degree >= DEGREE, ``config.CH_PHAST_DEEP_UNROLL`` /
``_DEEP_DEGREE``) and pass sizes (``--batch-items``, ``config.CH_PHAST_BATCH_ITEMS``), side by side in one process
on the same hierarchy and sources.

Per variant: exactness (a batch of trees equal to Dijkstra's, uint32 and int64), trees/s for --batches sources
(``ch.tree(S, device="gpu", dtype="uint32")``, rows left on the device: the fill, the upward pass from hub labels
or searched, the core step, the downward sweep and the gather into source-major rows), and the per-launch device
times of one pass (``GPUHierarchy.profile``) summed by phase. The bytes floor of a tree (METHOD.md): the
downward pass reads each in-arc's tail distance and each node's own (4 bytes a source) and writes each node's,
the fill writes every node's and the gather reads and writes every node's once more, at the copy bandwidth
measured in the run; without the fill (``--fills nofill``, ``config.CH_PHAST_NO_FILL``, the default) the fill and
the own reads are a bit a (node, source).

Usage (on the device):
    PYTHONPATH=src python3 benchmarks/phast_batched.py [--graph ny] [--batches 256 1000 4000] [--upward "from labels"]
        [--variants 4:8:16 ...] [--batch-items 0 268435456 ...] [--out DIR]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # ch_gpu_queries when loaded from elsewhere
from ch_gpu_queries import copy_bandwidth, med_gpu  # noqa: E402  (benchmarks/, this script's folder)

import gpuroute  # noqa: E402
from gpuroute import config  # noqa: E402
from gpuroute.ch import ContractionHierarchy  # noqa: E402

ROWS = []


def emit(**row):
    ROWS.append(row)
    print(json.dumps(row), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="ny")
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 1000, 4000])
    ap.add_argument("--variants", nargs="+",
                    default=["1:0:0", "4:0:0", "4:8:16", "4:16:16", "4:8:8"],
                    help="UNROLL:DEEP:DEGREE[:THREADS] (config.CH_PHAST_LEVEL_UNROLL, CH_PHAST_DEEP_UNROLL, "
                         "CH_PHAST_DEEP_DEGREE, CH_PHAST_THREADS)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--upward", nargs="+", default=["from labels", "searched"])
    ap.add_argument("--batch-items", type=int, nargs="+", default=[0],
                    help="config.CH_PHAST_BATCH_ITEMS values to run each variant with (0: the config's)")
    ap.add_argument("--fills", nargs="+", default=["nofill"], choices=["nofill", "fill"],
                    help="config.CH_PHAST_NO_FILL True (nofill) / False (fill) to run each variant with")
    ap.add_argument("--out", default="out")
    args = ap.parse_args()
    import cupy as cp

    bw = copy_bandwidth()
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    emit(what="device", device=name.decode() if isinstance(name, bytes) else str(name), copy_bytes_per_s=bw,
         date=dt.date.today().isoformat(), commit=os.environ.get("GPUROUTE_COMMIT", "unknown"))
    g = gpuroute.datasets.load(args.graph)
    t0 = time.perf_counter()
    ch = ContractionHierarchy.build(g, progress=False)
    emit(what="CU-CH build", seconds=time.perf_counter() - t0, levels=int(ch.h.n_levels), core=int(ch.h.core.size))
    rng = np.random.default_rng(7)
    check = rng.integers(0, g.n_nodes, 40)
    ref = gpuroute.sssp(g, check, device="cpu")
    lay = None
    for upward in args.upward:
        config.CH_PHAST_FROM_LABELS = upward == "from labels"
        if upward == "from labels":
            ch.hub_labels()
        default_items, default_threads = config.CH_PHAST_BATCH_ITEMS, config.CH_PHAST_THREADS
        for variant, items, fill in [(v, b, f) for v in args.variants for b in args.batch_items for f in args.fills]:
            config.CH_PHAST_NO_FILL = fill == "nofill"
            config.CH_PHAST_BATCH_ITEMS = items or default_items
            unroll, deep, degree, *threads = (int(x) for x in variant.split(":"))
            config.CH_PHAST_LEVEL_UNROLL, config.CH_PHAST_DEEP_UNROLL, config.CH_PHAST_DEEP_DEGREE = unroll, deep, degree
            config.CH_PHAST_THREADS = threads[0] if threads else default_threads
            ch._gpu = None  # a new GPUHierarchy picks the kernel
            eng = ch._gpu_engine()
            lay = eng.layout
            exact = bool(np.array_equal(ch.tree(check, device="gpu"), ref))
            exact &= bool(np.array_equal(ch.tree(check, device="gpu", dtype="uint32").astype(np.int64),
                                         np.where(ref >= np.iinfo(np.int64).max, np.iinfo(np.uint32).max, ref)))
            per = eng._pass_size(max(args.batches))
            prof = eng.profile(rng.integers(0, g.n_nodes, per))
            by = {}
            for phase, _, _, us in prof:
                key = phase.split("-")[0]
                by[key] = by.get(key, 0.0) + us
            for k in args.batches:
                S = cp.asarray(rng.integers(0, g.n_nodes, k))
                t = med_gpu(lambda S=S: ch.tree(S, device="gpu", dtype="uint32"), args.reps)
                emit(what="PHAST batched", upward=upward, variant=variant, start=eng._pass_start[0], batch_items=config.CH_PHAST_BATCH_ITEMS, sources=k, pass_size=eng._pass_size(k),
                     seconds=t, trees_per_s=k / t, exact=exact)
            emit(what="PHAST pass profile", upward=upward, variant=variant, start=eng._pass_start[0], batch_items=config.CH_PHAST_BATCH_ITEMS, sources=per,
                 us_by_phase={k: round(v, 1) for k, v in by.items()},
                 down_levels=[(p, int(nn), round(us, 1)) for p, _, nn, us in prof if p.startswith("down")][:60])
    n = g.n_nodes
    down_arcs = int(lay.down[0][-1])
    per_tree = 4 * (down_arcs + 2 * n) + 4 * n + 8 * n  # down pull reads + own read/write, fill, gather
    emit(what="bytes floor", start="fill", bytes_per_tree=per_tree, floor_trees_per_s=bw / per_tree, down_arcs=down_arcs,
         nodes=n)
    per_tree = 4 * (down_arcs + n) + n / 8 + 8 * n  # down pull reads + own write, the mask's bit, gather
    emit(what="bytes floor", start="mask", bytes_per_tree=per_tree, floor_trees_per_s=bw / per_tree, down_arcs=down_arcs,
         nodes=n)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "phast_batched.json"), "w") as f:
        json.dump(ROWS, f, indent=1)


if __name__ == "__main__":
    main()
