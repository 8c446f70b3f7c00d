"""Benchmark: the overlay's many-to-many table on the GPU (gpuroute.crp.many_to_many_gpu) against its CPU twin
(gpuroute.crp.many_to_many, numba on every core), in one run on one machine; every GPU table is checked bit for
bit against the CPU twin's (costs, chosen options, same-arc flags, and the ``along`` sums).

Per graph (Monaco, shipped; Andorra and Helsinki where their PBF is under shared/data/osm) and table size
(100 x 100, 1000 x 1000 by default): points are random arcs at random fractions with their reverse arc
as a second option (what segment snapping gives), metric ``time-uturn`` (turn restrictions, U-turn penalty).
Measured: the CPU twin's wall time (after a warm-up call: numba compiled), the GPU's first call (kernel
compile, upload of the overlay's query graph and the state's costs) and its warm wall time, its phases
(``stats["seconds"]``: upload, backward, forward, combine, along), rounds and bucket entries, the same with
one ``along`` quantity (the arcs' lengths, as /table's distances), and after a traffic update (a new state:
its costs uploaded once).

Usage (from the repo root, on a GPU machine):
    PYTHONPATH=src python3 benchmarks/crp_table_gpu.py [--graphs Monaco Andorra Helsinki] [--sizes 100 1000]
        [--reps 5] [--out benchmarks/results]
Writes OUT/crp_table_gpu_<date>_<device>.json (one row per measurement, naming device and commit) and prints the rows.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import gpuroute  # noqa: E402
from gpuroute import Overlay, Partition  # noqa: E402
from gpuroute.crp import many_to_many as mm  # noqa: E402
from gpuroute.crp import many_to_many_gpu as mg  # noqa: E402

OSM_DIRS = [ROOT / "local_data" / "osm", ROOT / "shared" / "data" / "osm", ROOT / ".." / "shared" / "data" / "osm", Path("/work/shared/data/osm")]
PBF = {"Andorra": "andorra.osm.pbf", "Helsinki": "Helsinki.osm.pbf"}


def emit(out, **row):
    row["device"] = DEVICE
    row["commit"] = os.environ.get("GPUROUTE_COMMIT", "unknown")
    row["date"] = str(dt.date.today())
    print(json.dumps(row), flush=True)
    out.append(row)


def load(name):
    if name == "Monaco":
        return gpuroute.datasets.load("monaco")
    for d in OSM_DIRS:
        if (d / PBF[name]).exists():
            return gpuroute.load_osm(d / PBF[name], progress=False, name=name)
    return None


def points(g, rng, k):
    """(k, 2) options: a random arc at a random fraction and its reverse arc (where there is one) at 1 - f."""
    rev = {(int(u), int(v)): i for i, (u, v) in enumerate(zip(g.tail, g.head, strict=True))}
    arcs = np.full((k, 2), -1, np.int64)
    frac = np.zeros((k, 2))
    arcs[:, 0] = rng.integers(0, g.n_arcs, k)
    frac[:, 0] = rng.random(k)
    for i in range(k):
        r = rev.get((int(g.head[arcs[i, 0]]), int(g.tail[arcs[i, 0]])))
        if r is not None:
            arcs[i, 1], frac[i, 1] = r, 1.0 - frac[i, 0]
    return arcs, frac


def same(a, b):
    return bool(np.array_equal(a.cost, b.cost) and np.array_equal(a.src_option, b.src_option)
                and np.array_equal(a.dst_option, b.dst_option) and np.array_equal(a.same_arc, b.same_arc)
                and all(np.array_equal(x, y) for x, y in zip(a.along, b.along, strict=True)))


def timed(reps, fn, *args, **kwargs):
    """Median wall time of ``fn(*args, **kwargs)`` over ``reps`` calls, and the last result."""
    ts, res = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        res = fn(*args, **kwargs)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", nargs="+", default=["Monaco", "Andorra", "Helsinki"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[100, 1000])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()
    rows = []
    for name in args.graphs:
        g = load(name)
        if g is None:
            emit(rows, graph=name, skipped=f"no {PBF.get(name)} under {[str(d) for d in OSM_DIRS]}")
            continue
        t0 = time.perf_counter()
        ov = Overlay.build(g, Partition.build(g, cell_sizes=(64, 512, 4096), method="inertial"))
        ov.customize("time-uturn")
        emit(rows, graph=name, what="overlay", arcs=int(g.n_arcs), seconds=time.perf_counter() - t0)
        length = [(g.weight("distance").astype(np.float64), None)]
        for k in args.sizes:
            rng = np.random.default_rng(k)
            sa, sf = points(g, rng, k)
            ta, tf = points(g, rng, k)
            for label, along in (("cost", ()), ("cost + distance", length)):
                mm.table(ov, sa[:2], sf[:2], ta[:2], tf[:2], along=along)  # numba compiled
                reps_cpu = max(1, args.reps // (5 if k >= 1000 else 1))
                cpu_s, ref = timed(reps_cpu, mm.table, ov, sa, sf, ta, tf, along=along)
                t0 = time.perf_counter()
                mg.table(ov, sa, sf, ta, tf, along=along)
                first = time.perf_counter() - t0
                gpu_s, res = timed(args.reps, mg.table, ov, sa, sf, ta, tf, along=along)
                emit(rows, graph=name, what=f"table {k}x{k}", quantities=label, cpu_seconds=cpu_s, gpu_seconds=gpu_s,
                     gpu_first_call_seconds=first, speedup=cpu_s / gpu_s, exact=same(res, ref),
                     reachable=int(np.isfinite(ref.cost).sum()), gpu_phase_seconds=res.stats["seconds"],
                     cpu_phase_seconds=ref.stats["seconds"], rounds=res.stats["rounds"],
                     bucket_entries=res.stats["bucket_entries"], union_nodes=res.stats["union_nodes"])
            # traffic: a new state (its costs uploaded once), then the warm time on it
            arcs = np.unique(rng.integers(0, g.n_arcs, g.n_arcs // 10))
            ov.update(arcs, 2 * ov.arc_cost[arcs])
            t0 = time.perf_counter()
            res = mg.table(ov, sa, sf, ta, tf)
            first = time.perf_counter() - t0
            gpu_s, res = timed(args.reps, mg.table, ov, sa, sf, ta, tf)
            ref = mm.table(ov, sa, sf, ta, tf)
            emit(rows, graph=name, what=f"table {k}x{k} after a traffic update", gpu_seconds=gpu_s,
                 gpu_first_call_on_the_new_state_seconds=first, exact=same(res, ref))
            ov.customize("time-uturn")
    os.makedirs(args.out, exist_ok=True)
    tag = DEVICE.replace(" ", "_").lower()
    with open(os.path.join(args.out, f"crp_table_gpu_{dt.date.today()}_{tag}.json"), "w") as f:
        json.dump(rows, f, indent=1)


try:
    import cupy

    DEVICE = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
except Exception:  # no GPU: the script needs one
    DEVICE = "none"

if __name__ == "__main__":
    main()
