"""Benchmark suite: the /trip tour search's stall bound (issue 20; ``config.SERVE_TRIP_STALL_KICKS_PER_STOP``,
``gpuroute.tours.tsp``'s ``stall``). The cost matrices of the trips of a ``benchmarks/serve.py --trips`` run (the
trip service's own: the overlay's many-to-many between the snapped stops, unreachable cells made dear, the
diagonal 0) on the datasets that run built (Monaco, Andorra with OSRM's car.lua); for each matrix, interleaved,
``tsp`` with the trip's time budget (``SERVE_TRIP_TIME_PER_STOP_S`` x n within [``_MIN_S``, ``_MAX_S``]) alone and
with ``stall`` = k x n kicks, seed 0 as the service: CPU ms (``time.process_time``, one numba thread as a serve
worker on 2 cores), ILS kicks, whether it stopped on the bound, and the tour cost against the best of two 1 s runs.
``--join K`` joins the points of the 25-stop trips into trips of K stops (50, 100: the budget's side).

Usage (from the repo root; the datasets of an earlier serve.py --dataset run under out/serve_bench/dataset):
    .venv/bin/python benchmarks/trip_stall.py [--k 2 3 4 5 6 8] [--reps 3] [--join 50] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
REQUESTS = ROOT / "benchmarks" / "results" / "serve_dataset_2026-11-26_trip_db19feb.requests.json.gz"
DATASETS = ROOT / "out" / "serve_bench" / "dataset"


def matrices(graphs, size, join):
    from gpuroute.engine import Engine
    from gpuroute.engine.algorithms import table_search

    reqs = json.loads(gzip.decompress(REQUESTS.read_bytes()))
    out = []
    for g in graphs:
        e = Engine.open(DATASETS / g)
        trips = reqs[g]["trips"][str(size)]
        if join:
            pts = [p for c in trips for p in c.split(";")]
            trips = [";".join(pts[j:j + join]) for j in range(0, len(pts) - join + 1, join)]
        for c in trips:
            ph = e._snap([tuple(float(x) for x in p.split(",")) for p in c.split(";")])
            cost = table_search(e).many_to_many(ph, ph).cost
            fin = np.isfinite(cost)
            n = cost.shape[0]
            m = np.where(fin, cost, float(cost[fin].max()) * (n + 1) + 1.0)
            np.fill_diagonal(m, 0.0)
            out.append((g, m))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=["Monaco", "Andorra"])
    ap.add_argument("--size", type=int, default=25, help="the trips of this many stops")
    ap.add_argument("--join", type=int, default=0, help="join their points into trips of this many stops")
    ap.add_argument("--k", type=float, nargs="+", default=[2, 3, 4, 5, 6, 8], help="stall = k x n kicks")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import numba

    numba.set_num_threads(1)
    from gpuroute import config
    from gpuroute.tours import tsp, warm_up

    warm_up("cpu")
    mats = matrices(args.graphs, args.size, args.join)
    n = mats[0][1].shape[0]
    limit = min(max(config.SERVE_TRIP_TIME_PER_STOP_S * n, config.SERVE_TRIP_TIME_MIN_S), config.SERVE_TRIP_TIME_MAX_S)
    best = [min(tsp(m, time_limit=1.0, seed=s).cost for s in range(2)) for _, m in mats]
    ks = [None] + list(args.k)
    rows = {str(k): [] for k in ks}
    for rep in range(args.reps):
        for i, (_, m) in enumerate(mats):
            for k in ks:
                t = time.process_time()
                r = tsp(m, time_limit=limit, seed=0, stall=None if k is None else max(1, int(k * n)))
                rows[str(k)].append({"matrix": i, "rep": rep, "cpu_ms": (time.process_time() - t) * 1e3,
                                     "cost_over_best": r.cost / best[i], "stalled": bool(r.stats.get("stalled")),
                                     "kicks": int(r.stats["ils_iterations"])})
    summary = {}
    base = rows["None"]
    print(f"{len(mats)} matrices of {n} stops ({', '.join(args.graphs)}), budget {limit * 1e3:.0f} ms, {args.reps} reps")
    for k, v in rows.items():
        cpu = np.array([x["cpu_ms"] for x in v])
        gap = np.array([x["cost_over_best"] for x in v])
        worse = sum(x["cost_over_best"] > y["cost_over_best"] + 1e-12 for x, y in zip(v, base, strict=True))
        s = summary[k] = {"cpu_ms_mean": float(cpu.mean()), "cpu_ms_max": float(cpu.max()),
                          "cost_over_best_mean": float(gap.mean()), "cost_over_best_max": float(gap.max()),
                          "worse_than_budget_alone": int(worse), "runs": len(v),
                          "stalled": int(sum(x["stalled"] for x in v)),
                          "kicks_mean": float(np.mean([x["kicks"] for x in v]))}
        print(f"stall {'none' if k == 'None' else k + ' x n'}: CPU ms mean {s['cpu_ms_mean']:.2f} max {s['cpu_ms_max']:.2f}; "
              f"cost / best mean {s['cost_over_best_mean']:.5f} max {s['cost_over_best_max']:.5f}; worse than the "
              f"budget alone {worse}/{len(v)}; stopped on the bound {s['stalled']}; kicks {s['kicks_mean']:.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"n": n, "limit_s": limit, "summary": summary, "rows": rows,
                                               "loadavg": list(__import__("os").getloadavg())}, indent=1))


if __name__ == "__main__":
    main()
