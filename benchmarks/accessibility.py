"""Benchmark suite: accessibility (issue 14) side by side in one run on one machine -- pandana against
gpuroute's CPU twin and GPU on DIMACS NY -- plus many-to-many tables on the GPU and over Dask.

* ``aggregate``: pandana ``Network`` (its CH build timed on its own), ``precompute(2000 m)`` (once) then
  ``aggregate(2000, sum, flat, unit="native")`` of ``--points`` values at random nodes; gpuroute ``aggregate`` with the
  same radius (NY weights are DIMACS ~0.1 m steps: 2000 m = 20000) on the CPU and on the GPU by both GPU
  methods (``"ball"``: bounded searches on the graph; ``"phast"``: PHAST trees of the reverse hierarchy,
  contracted once and timed on its own as pandana's CH), no precompute step.
* ``nearest_pois``: k = 10 within 2 km of 1,000 POIs, pandana against ours.
* ``table``: 20,000 x 20,000 on the GPU (``--table``), a smaller one on the CPU (``--cpu-table``).
* ``distributed table``: the same table over ``dask_cuda.LocalCUDACluster`` with 1 and 2 workers when
  dask-cuda and two GPUs are there (blocks written per worker as .npy, and gathered), else over one
  in-process CPU-thread worker driving the GPU (Dask's overhead on one GPU).

Every result is checked: ours CPU = ours GPU exactly (counts, nearest distances) / to 1e-12 (sums);
pandana's against ours within pandana's float32 (rtol 1e-5 for sums, 0.1 DIMACS units ~1 cm for distances;
pandana also truncates float impedances to 1/1000, so a node exactly at the radius could differ: such nodes
are counted); table rows against Dijkstra.

Usage (GPU machine, from the repo root; pandana and dask from the carried wheels):
    PYTHONPATH=src python3 benchmarks/accessibility.py --out OUTDIR [--points 10000] [--pois 1000]
        [--table 20000] [--skip-pandana] [--skip-distributed]
Prints one JSON object per line and writes OUTDIR/accessibility.json.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import gpuroute  # noqa: E402
from gpuroute import accessibility as acc  # noqa: E402
from gpuroute import config  # noqa: E402
from gpuroute.ch import ContractionHierarchy  # noqa: E402

RESULTS = []
#: The GPU methods compared (gpuroute.accessibility.gpu): bounded ball searches, and PHAST trees.
GPU_METHODS = ("ball", "phast")


def commit():
    if os.environ.get("GPUROUTE_COMMIT"):
        return os.environ["GPUROUTE_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except Exception:
        return "unknown"


def emit(**row):
    RESULTS.append(row)
    print(json.dumps(row, default=float), flush=True)


def best(fn, reps=3):
    """(median seconds, last result) of ``reps`` calls after one warm-up call (compilation, uploads)."""
    out = fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), out


def once(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def unique_coord_nodes(g, rng, k):
    """k random nodes whose coordinates no other node shares (pandana snaps POIs by coordinates)."""
    _, first, counts = np.unique(g.coords, axis=0, return_index=True, return_counts=True)
    ok = first[counts == 1]
    return rng.choice(ok, size=k, replace=False)


def pandana_network(g):
    import pandana
    import pandas as pd

    ids = np.arange(g.n_nodes)
    w = g.weight("distance").astype(np.float64) / 10.0  # DIMACS ~0.1 m -> metres
    return pandana.Network(pd.Series(g.coords[:, 0], index=ids), pd.Series(g.coords[:, 1], index=ids),
                           pd.Series(g.tail.astype(np.int64)), pd.Series(g.head.astype(np.int64)),
                           pd.DataFrame({"distance": w}), twoway=False)


def compare(name, ours, theirs, rtol=0.0, atol=0.0):
    """Entries differing by more than ``atol + rtol |theirs|``, and the largest difference."""
    theirs = np.asarray(theirs, dtype=np.float64)
    diff = np.abs(np.asarray(ours, dtype=np.float64) - theirs)
    bad = diff > atol + rtol * np.abs(theirs)
    return {"check": name, "rtol": rtol, "atol": atol, "entries_differing": int(bad.sum()),
            "max_abs_diff": float(diff.max()) if diff.size else 0.0}


#: pandana keeps values and distances as float32 (and truncates impedances to 1/1000 of their unit):
#: sums agree to float32 rounding, distances to a few mm (DIMACS units are ~0.1 m: atol 0.1 = ~1 cm).
PANDANA_RTOL, PANDANA_ATOL_UNITS = 1e-5, 0.1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "out"))
    ap.add_argument("--points", type=int, nargs="*", default=[10000], help="values to aggregate (runs per count)")
    ap.add_argument("--pois", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--radius-m", type=float, default=2000.0)
    ap.add_argument("--table", type=int, default=20000)
    ap.add_argument("--cpu-table", type=int, default=2000)
    ap.add_argument("--skip-pandana", action="store_true")
    ap.add_argument("--skip-cpu", action="store_true")
    ap.add_argument("--skip-distributed", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gpu = gpuroute.gpu_available()
    dev_name = "cpu only"
    n_gpus = 0
    if gpu:
        import cupy as cp

        n_gpus = cp.cuda.runtime.getDeviceCount()
        dev_name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    meta = {"suite": "accessibility", "device": dev_name, "gpus": n_gpus, "cpu_cores": os.cpu_count(),
            "commit": commit(), "date": dt.date.today().isoformat()}
    emit(**meta, what="meta")
    g = gpuroute.datasets.load("ny")
    R = args.radius_m * 10.0  # in DIMACS ~0.1 m steps
    rng = np.random.default_rng(14)
    emit(what="graph", graph="NY", nodes=g.n_nodes, arcs=g.n_arcs, radius_units=R, radius_m=args.radius_m)

    # ------------------------------------------------------------------ hierarchies (built once per graph)
    ch = None
    if gpu:
        ContractionHierarchy.build(gpuroute.RoadGraph.from_arcs(3, [0, 1], [1, 2], {"w": [1, 1]}), device="gpu")
        t, ch = once(lambda: ContractionHierarchy.build(g, "distance", method="cu-ch", device="gpu"))
        emit(what="hierarchy build", impl="gpuroute CU-CH", device="gpu", seconds=t)
    net = None
    if not args.skip_pandana:
        try:
            import pandana  # noqa: F401

            t, net = once(lambda: pandana_network(g))
            emit(what="hierarchy build", impl="pandana Network (its CH)", device="cpu", seconds=t)
        except ImportError as e:
            emit(what="pandana", skipped=f"not importable: {e}")

    # ------------------------------------------------------------------ aggregate
    t_pre = None
    if net is not None:
        # once per network: pandana 0.8 appends to the stored ranges on a second precompute (counts doubled)
        t_pre, _ = once(lambda: net.precompute(args.radius_m))
        emit(what="precompute", impl="pandana", radius_m=args.radius_m, device="cpu", seconds=t_pre)
    for m in args.points:
        nodes = rng.integers(0, g.n_nodes, m)
        values = rng.uniform(1, 100, m)
        res = {}
        if net is not None:
            import pandas as pd

            net.set(pd.Series(nodes), variable=pd.Series(values), name="v")
            t_agg, theirs = best(lambda: net.aggregate(args.radius_m, type="sum", decay="flat", name="v", unit="native").to_numpy())
            res["pandana"] = theirs
            emit(what="aggregate", impl="pandana", points=m, device="cpu", precompute_s=t_pre, aggregate_s=t_agg,
                 seconds=t_pre + t_agg)
        if not args.skip_cpu:
            t, ours = best(lambda nodes=nodes, values=values: acc.aggregate(g, nodes, values, R, type="sum", device="cpu", unit="native"))
            res["cpu"] = ours
            emit(what="aggregate", impl="gpuroute", points=m, device="cpu", seconds=t,
                 distinct_nodes=int(np.unique(nodes).size))
        for method in (GPU_METHODS if ch is not None else ()):
            config.ACCESS_GPU_METHOD = method
            t, ours = best(lambda nodes=nodes, values=values: acc.aggregate(ch, nodes, values, R, type="sum", device="gpu", unit="native"))
            res[f"gpu-{method}"] = ours
            row = {"what": "aggregate", "impl": f"gpuroute ({method})", "points": m, "device": "gpu", "seconds": t}
            if "pandana" in res:
                pandana_s = [r for r in RESULTS if r.get("impl") == "pandana" and r.get("points") == m][-1]["seconds"]
                row["speedup_vs_pandana_precompute_plus_aggregate"] = pandana_s / t
            emit(**row)
            t, cnt_gpu = best(lambda nodes=nodes, values=values: acc.aggregate(ch, nodes, values, R, type="count",
                                                                                device="gpu", unit="native"), reps=1)
            if "cpu" in res:
                cnt_cpu = acc.aggregate(g, nodes, values, R, type="count", device="cpu", unit="native")
                emit(what="aggregate check", points=m, **compare(f"count gpu ({method}) = cpu", cnt_gpu, cnt_cpu))
        config.ACCESS_GPU_METHOD = "auto"
        for a, b in (("cpu", "pandana"), ("gpu-ball", "pandana"), ("gpu-phast", "pandana"), ("gpu-ball", "cpu"),
                     ("gpu-phast", "cpu")):
            if a in res and b in res:
                tol = {"rtol": PANDANA_RTOL} if b == "pandana" else {"rtol": 1e-12}
                emit(what="aggregate check", points=m, **compare(f"sum {a} vs {b}", res[a], res[b], **tol))

    # ------------------------------------------------------------------ nearest POIs
    pois = unique_coord_nodes(g, rng, args.pois)
    res = {}
    if net is not None:
        import pandas as pd

        t_set, _ = once(lambda: net.set_pois("poi", args.radius_m, args.k, pd.Series(g.coords[pois, 0]),
                                             pd.Series(g.coords[pois, 1])))
        t, df = best(lambda: net.nearest_pois(args.radius_m, "poi", num_pois=args.k, include_poi_ids=True, unit="native"))
        res["pandana"] = df[list(range(1, args.k + 1))].to_numpy() * 10.0  # metres -> DIMACS units
        emit(what="nearest_pois", impl="pandana", pois=args.pois, k=args.k, device="cpu", set_pois_s=t_set, seconds=t)
    if not args.skip_cpu:
        t, (d, i) = best(lambda: acc.nearest_pois(g, pois, R, args.k, device="cpu", unit="native"))
        res["cpu"] = d
        emit(what="nearest_pois", impl="gpuroute", pois=args.pois, k=args.k, device="cpu", seconds=t)
    for method in (GPU_METHODS if ch is not None else ()):
        config.ACCESS_GPU_METHOD = method
        t, (d, i) = best(lambda: acc.nearest_pois(ch, pois, R, args.k, device="gpu", unit="native"))
        res[f"gpu-{method}"] = d
        row = {"what": "nearest_pois", "impl": f"gpuroute ({method})", "pois": args.pois, "k": args.k, "device": "gpu",
               "seconds": t}
        pan = [r for r in RESULTS if r.get("what") == "nearest_pois" and r.get("impl") == "pandana"]
        pre = [r for r in RESULTS if r.get("what") == "aggregate" and r.get("impl") == "pandana"]
        if pan and pre:
            row["speedup_vs_pandana_precompute_plus_nearest"] = (pan[-1]["seconds"] + pre[-1]["precompute_s"]) / t
        emit(**row)
    config.ACCESS_GPU_METHOD = "auto"
    for a, b in (("cpu", "pandana"), ("gpu-ball", "pandana"), ("gpu-phast", "pandana"), ("gpu-ball", "cpu"),
                 ("gpu-phast", "cpu")):
        if a in res and b in res:
            # pandana's empties are the radius in metres (x10 here), ours the radius in units: both R
            tol = {"atol": PANDANA_ATOL_UNITS} if b == "pandana" else {}
            emit(what="nearest_pois check", **compare(f"distances {a} vs {b}", res[a], res[b], **tol))

    # ------------------------------------------------------------------ tables
    check_rows = rng.integers(0, args.table, 4)
    if ch is not None:
        import cupy as cp

        S = rng.integers(0, g.n_nodes, args.table)
        T = rng.integers(0, g.n_nodes, args.table)
        for dtype in ("uint32", "int64"):
            t, tab = best(lambda dtype=dtype: ch.table(S, T, device="gpu", dtype=dtype), reps=2)
            emit(what="table", impl="gpuroute PHAST", size=f"{args.table}x{args.table}", device="gpu", dtype=dtype,
                 seconds=t, result="NumPy (host)")
        ref = gpuroute.sssp(g, S[check_rows], device="cpu")[:, T]
        emit(what="table check", rows_checked=int(check_rows.size), equal_to_dijkstra=bool((tab[check_rows] == ref).all()))
        del tab
        Sd, Td = cp.asarray(S), cp.asarray(T)
        t, tab = best(lambda: ch.table(Sd, Td, device="gpu", dtype="uint32"), reps=2)
        emit(what="table", impl="gpuroute PHAST", size=f"{args.table}x{args.table}", device="gpu", dtype="uint32",
             seconds=t, result="CuPy (left on the device)")
        del tab
    if not args.skip_cpu:
        chc = ch if ch is not None else ContractionHierarchy.build(g, "distance", device="cpu", progress=False)
        S = rng.integers(0, g.n_nodes, args.cpu_table)
        T = rng.integers(0, g.n_nodes, args.cpu_table)
        t, tab = best(lambda: chc.table(S, T, device="cpu"), reps=1)
        emit(what="table", impl="gpuroute CH buckets", size=f"{args.cpu_table}x{args.cpu_table}", device="cpu", seconds=t)
        ref = gpuroute.sssp(g, S[:3], device="cpu")[:, T]
        emit(what="table check", device="cpu", equal_to_dijkstra=bool((tab[:3] == ref).all()))

    # ------------------------------------------------------------------ distributed table
    if ch is not None and not args.skip_distributed:
        distributed_tables(ch, g, rng, args, n_gpus)

    with open(os.path.join(args.out, "accessibility.json"), "w") as f:
        json.dump({**meta, "rows": RESULTS}, f, indent=1, default=float)


def distributed_tables(ch, g, rng, args, n_gpus):
    try:
        import distributed
    except ImportError as e:
        emit(what="distributed table", skipped=f"dask/distributed not importable: {e}")
        return
    from gpuroute import distributed as gd

    S = rng.integers(0, g.n_nodes, args.table)
    T = rng.integers(0, g.n_nodes, args.table)
    block = max(1, args.table // 8)
    want_rows = rng.integers(0, args.table, 3)
    ref = ch.table(S[want_rows], T, device="gpu", dtype="uint32")
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as e:
        LocalCUDACluster = None
        emit(what="distributed table", note=f"dask-cuda not importable ({e}): one in-process worker on GPU 0 only")
    configs = []
    if LocalCUDACluster is not None:
        configs = [(w, lambda w=w: LocalCUDACluster(n_workers=w, threads_per_worker=1, dashboard_address=None))
                   for w in ([1, 2] if n_gpus >= 2 else [1])]
    else:
        configs = [(1, lambda: distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                                        dashboard_address=None))]
    base = {}
    for workers, make in configs:
        with make() as cluster, distributed.Client(cluster) as client:
            gd.table(client, ch, S[:block], T, block=block, device="gpu", dtype="uint32")  # broadcast, upload, compile
            for mode in ("gathered", "written", "kept on the workers"):
                out = tempfile.mkdtemp(prefix="gpuroute-dist-") if mode == "written" else None
                try:
                    if mode == "kept on the workers":
                        def kept():
                            futs = gd.table(client, ch, S, T, block=block, device="gpu", dtype="uint32", gather=False)
                            distributed.wait([f for _, f in futs])
                            return futs

                        t, futs = once(kept)
                        rows = dict(futs)
                        ok = all(np.array_equal(rows[(int(i) // block) * block].result()[int(i) % block], ref[q])
                                 for q, i in enumerate(want_rows))
                        del futs, rows
                    else:
                        t, res = once(lambda out=out: gd.table(client, ch, S, T, block=block, device="gpu",
                                                               dtype="uint32", out=out))
                        if mode == "gathered":
                            ok = bool((res[want_rows] == ref).all())
                        else:
                            rows = {r["rows"][0]: r["path"] for r in res}
                            ok = all(np.array_equal(np.load(rows[(int(i) // block) * block])[int(i) % block],
                                                    ref[q]) for q, i in enumerate(want_rows))
                finally:
                    if out:
                        shutil.rmtree(out, ignore_errors=True)
                row = {"what": "distributed table", "size": f"{args.table}x{args.table}", "workers": workers,
                       "gpus": workers, "blocks": -(-args.table // block), "result": mode, "seconds": t,
                       "rows_equal_single_gpu": ok}
                if workers > 1 and mode in base:
                    row["speedup_vs_1_worker"] = base[mode] / t
                if workers == 1:
                    base[mode] = t
                emit(**row)


if __name__ == "__main__":
    main()
