"""Benchmark suite: seed 002's own setting, for a table next to its Tables I and II.

Random graphs of k x 2^20 nodes where every node gets seven random predecessors (in-degree 7) with
integer weights 1..10 (seed 002 sec. V-C.1; the paper averages 25 instances per size, we time one
graph per size and several sources). For each size: the CPU twins of Martin et al. (successor and
predecessor variants, numba, one thread: the paper's "Succ-CPU"/"Pred-CPU"), the GPU versions of
Martin et al. and of Crauser et al. (general and economic), each variant, every result checked
against the CPU Dijkstra. The ratios the paper reports are computed from these times: CPU Martin
vs GPU Crauser (Table I) and GPU Martin vs GPU Crauser (Table II).

Usage (GPU machine, from the repo root):
    PYTHONPATH=src python3 benchmarks/seed002_table.py --out OUTDIR [--sizes 1 3 5 7 9 11]
Writes OUTDIR/seed002_table.json and prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from sssp_one_to_all import commit, seed002_graph  # noqa: E402

import gpuroute  # noqa: E402

GPU = [("martin", "successor"), ("martin", "predecessor"), ("crauser", "successor"), ("crauser", "predecessor"),
       ("crauser-economic", "successor"), ("crauser-economic", "predecessor")]
CPU = [("martin", "successor"), ("martin", "predecessor")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "out"))
    ap.add_argument("--sizes", type=int, nargs="*", default=[1, 3, 5, 7, 9, 11])
    ap.add_argument("--sources", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import cupy as cp

    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    rows = []
    res = {"device": dev, "commit": commit(), "date": time.strftime("%Y-%m-%d"), "rows": rows}
    rng = np.random.default_rng(3)
    for k in args.sizes:
        t = time.perf_counter()
        g = seed002_graph(k * 2**20, seed=k)
        print(f"\n## {k} x 2^20: n={g.n_nodes:,} m={g.n_arcs:,} (built in {time.perf_counter() - t:.1f} s)", flush=True)
        srcs = rng.integers(0, g.n_nodes, args.sources)
        ref = gpuroute.sssp(g, int(srcs[0]), device="cpu")
        row = {"k": k, "n": g.n_nodes, "m": g.n_arcs}
        for alg, var in CPU:
            gpuroute.sssp(g, int(srcs[0]), algorithm=alg, variant=var, device="cpu")  # compile
            t = time.perf_counter()
            d = gpuroute.sssp(g, int(srcs[0]), algorithm=alg, variant=var, device="cpu")
            row[f"cpu {alg} {var}"] = (time.perf_counter() - t) * 1e3
            assert np.array_equal(d, ref), f"CPU {alg}/{var} differs from Dijkstra"
        for alg, var in GPU:
            r = gpuroute.sssp_full(g, cp.asarray(srcs[:1]), algorithm=alg, variant=var, device="gpu")  # warm-up
            ok = bool(np.array_equal(r.dist.get()[0], ref))
            per = []
            for s in srcs:
                sc = cp.asarray([int(s)])
                cp.cuda.Device().synchronize()
                t = time.perf_counter()
                gpuroute.sssp_full(g, sc, algorithm=alg, variant=var, device="gpu")
                cp.cuda.Device().synchronize()
                per.append((time.perf_counter() - t) * 1e3)
            row[f"gpu {alg} {var}"] = float(np.median(per))
            row[f"phases {alg} {var}"] = int(np.asarray(r.stats["phases"]).ravel()[0])
            row[f"exact {alg} {var}"] = ok
        rows.append(row)
        print("  " + ", ".join(f"{key}={val:.2f}" if isinstance(val, float) else f"{key}={val}"
                               for key, val in row.items()), flush=True)
        del g
        cp.get_default_memory_pool().free_all_blocks()
        with open(os.path.join(args.out, "seed002_table.json"), "w") as f:
            json.dump(res, f, indent=1, default=float)
    # the paper's ratios, averaged over sizes as its tables are
    for var in ("successor", "predecessor"):
        t1 = np.mean([r[f"cpu martin {var}"] / r[f"gpu crauser {var}"] for r in rows])
        t2 = np.mean([(r[f"gpu martin {var}"] - r[f"gpu crauser {var}"]) / r[f"gpu martin {var}"] * 100 for r in rows])
        res[f"table1 {var}"] = float(t1)
        res[f"table2 {var}"] = float(t2)
        print(f"{var}: CPU Martin / GPU Crauser = {t1:.2f}x (paper: {'20.65' if var == 'successor' else '13.17'}x); "
              f"GPU Crauser faster than GPU Martin by {t2:.1f}% (paper: {'1.07' if var == 'successor' else '8.14'}%)")
    with open(os.path.join(args.out, "seed002_table.json"), "w") as f:
        json.dump(res, f, indent=1, default=float)
    print("\nDone.")


if __name__ == "__main__":
    main()
