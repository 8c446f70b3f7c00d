"""The CPU TSP search before and after the Or-opt ILS (issue 23), on a clock of CPU seconds.

For a shared machine: ``gpuroute.tours.budget.clock`` is replaced by ``time.process_time`` (run with
``NUMBA_NUM_THREADS=1``: one thread, so CPU seconds are the search's own), so a loaded machine gives the
same work per limit as a quiet one. "before" is the search a symmetric matrix got before the Or-opt ILS
(the queue-driven 2-opt / Or-opt / swap ILS, 4 starts), run in the same process by making
``api._symmetric_paced`` answer False; "after" is the default. One JSON row per run::

    NUMBA_NUM_THREADS=1 PYTHONPATH=src python benchmarks/tours_or_opt.py --tsp-dir ../shared/data/vrp/TSP \\
        --instances pr1002,u2152,pcb3038,fnl4461 --limits 1,10 --out benchmarks/results/x.json
"""
from __future__ import annotations

import argparse
import json
import time

from gpuroute.tours import api, budget, tsp, tsplib, warm_up


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tsp-dir", required=True, help="folder of <name>.vrp + <name>.sol (TSPLIB in VRPLIB form)")
    ap.add_argument("--instances", default="pr1002,u2152,pcb3038,fnl4461")
    ap.add_argument("--limits", default="1,10", help="CPU seconds, comma-separated")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--variants", default="before,after")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    warm_up("cpu")
    budget.clock = time.process_time
    real = api._symmetric_paced
    rows = []
    for name in a.instances.split(","):
        inst = tsplib.read_tsplib(f"{a.tsp_dir}/{name}.vrp")
        for T in (float(x) for x in a.limits.split(",")):
            for seed in range(a.seeds):
                for v in a.variants.split(","):
                    api._symmetric_paced = (lambda C, pace: False) if v == "before" else real
                    w0 = time.perf_counter()
                    r = tsp(inst.costs, time_limit=T, seed=seed, device="cpu")
                    row = dict(instance=name, n=int(inst.costs.shape[0]), T_cpu_s=T, seed=seed, variant=v,
                               gap_pct=100 * (r.cost / inst.best_cost - 1), cost=int(r.cost),
                               best_known=int(inst.best_cost), cpu_s=r.stats["seconds"],
                               wall_s=time.perf_counter() - w0, ils=r.stats["ils_iterations"],
                               neighbourhood=r.stats["neighbourhood"])
                    rows.append(row)
                    print(row, flush=True)
    api._symmetric_paced = real
    with open(a.out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
