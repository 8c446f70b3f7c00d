"""Where the GPU tour search's set-up goes at tiny time limits (issue 23, item 1: ``tsp(..., time_limit=0.05,
device="gpu")`` on pcb3038 took 138.6 ms): each phase of :func:`gpuroute.tours.gpu.search` timed by wrapping it
(candidate lists, nearest neighbour, ``GPUTourSearch`` construction and its steps, candidate upload, first
descent), over repeated calls at limits 0.02 .. 0.2 s, and the wall time against ``limit x 1.05 + 50 ms``.

Usage (device machine, repo root): ``python3 benchmarks/tours_setup.py --data-dir local_data/tours --out $OUT``
(``<name>.npz`` written by ``benchmarks/tours_gpu.py --prepare``)."""
from __future__ import annotations

import argparse
import collections
import functools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tours_gpu import load_instance  # noqa: E402

from gpuroute.tours import gpu, local_search, tsp  # noqa: E402

T = collections.defaultdict(list)


def timed(owner, name, label=None):
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def wrap(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            T[label or name].append(time.perf_counter() - t0)

    setattr(owner, name, wrap)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="local_data/tours")
    ap.add_argument("--instances", default="pr1002,pcb3038")
    ap.add_argument("--limits", default="0.02,0.05,0.2")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default="out")
    a = ap.parse_args()
    timed(local_search, "candidate_lists_paced")
    timed(local_search, "nearest_neighbour_paced")
    timed(gpu.GPUTourSearch, "__init__", "GPUTourSearch.__init__")
    timed(gpu.GPUTourSearch, "set_candidates")
    timed(gpu.GPUTourSearch, "cand_descent_batch")
    timed(gpu, "exact_sums")
    rows = []
    for name in a.instances.split(","):
        C, _ = load_instance(a.data_dir, name)
        tsp(C, time_limit=0.2, device="gpu", seed=0)  # compile and warm
        for lim in map(float, a.limits.split(",")):
            for r in range(a.repeat):
                T.clear()
                t0 = time.perf_counter()
                res = tsp(C, time_limit=lim, device="gpu", seed=r)
                wall = time.perf_counter() - t0
                row = {"instance": name, "n": int(C.shape[0]), "limit_s": lim, "wall_s": wall,
                       "within": wall <= lim * 1.05 + 0.05, "cost": float(res.cost),
                       "phases_s": {k: sum(v) for k, v in T.items()}}
                rows.append(row)
                print(json.dumps(row))
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "tours_setup.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
