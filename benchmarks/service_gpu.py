"""Benchmark: the service's GPU targets of issue 12 on NY, end to end through the HTTP application (the
Starlette app in process, driven by Starlette's TestClient: URL and body parsing, the engine, JSON by
orjson), with the engine's own time beside it.

* ``POST /table/v1/driving`` 1000 x 1000 durations (target <= 50 ms with a GPU);
* ``GET /isochrone`` one origin, contours 300 s and 600 s (target <= 10 ms with a GPU);
* ``POST /customize`` of the full travel-time metric (target <= 5 ms with a GPU) and of 1,000 arc updates.

The NY dataset (``ny-time``: DIMACS travel times, lon/lat) is built once with ``gpuroute.pipeline``
(inertial-flow partition: fast) under ``out/service_bench/``. Rows are JSON lines naming device and commit.

Usage: PYTHONPATH=src python3 benchmarks/service_gpu.py [--reps 10] [--out DIR]
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

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.engine.dataset import is_dataset  # noqa: E402
from gpuroute.pipeline import build_dataset  # noqa: E402
from gpuroute.server import create_app  # noqa: E402


def device_name():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:  # no GPU
        return "cpu only"


DEVICE = device_name()


def emit(rows, **row):
    row["device"] = DEVICE
    row["commit"] = os.environ.get("GPUROUTE_COMMIT", "unknown")
    print(json.dumps(row), flush=True)
    rows.append(row)


def timed(fn, reps):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        r = fn()
        out.append(time.perf_counter() - t0)
    return r, out


def stats(xs):
    xs = np.asarray(xs) * 1e3
    return {"p50_ms": float(np.median(xs)), "min_ms": float(xs.min()), "max_ms": float(xs.max()), "n": int(xs.size)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default="out")
    ap.add_argument("--only", choices=["isochrone"], default=None, help="measure this service alone")
    args = ap.parse_args()
    rows = []
    d = ROOT / "out" / "service_bench" / "ny-time"
    if not is_dataset(d):
        t0 = time.perf_counter()
        s = build_dataset("ny-time", d, method="inertial")
        emit(rows, what="dataset build", seconds=time.perf_counter() - t0, stages=s.get("seconds"))
    eng = Engine.open(str(d))
    emit(rows, what="capabilities", table=eng.capabilities)
    from starlette.testclient import TestClient

    eng.limits["max_locations_table"] = 10**7  # as `gpuroute serve --max-table-size` raises both
    app = create_app(eng, limits={"max_locations_table": 10**7, "max_body_bytes": 1 << 26}, allow_customize=True)
    client = TestClient(app)
    g = eng.graph
    rng = np.random.default_rng(0)
    lonlat = np.asarray(g.coords)
    pts = lonlat[rng.choice(g.n_nodes, 1000, replace=False)]
    coords = ";".join(f"{x:.6f},{y:.6f}" for x, y in pts)
    if args.only == "isochrone":
        iso_rows(rows, args, client, eng, lonlat, rng)
        return save(rows, args)
    # table 1000 x 1000
    body = {"coordinates": pts.tolist()}

    def table_http():
        r = client.post("/table/v1/driving", json=body)
        assert r.status_code == 200, r.text[:300]
        return r

    r = table_http()
    tab = r.json()
    n_null = sum(v is None for row in tab["durations"] for v in row)
    _, t_http = timed(table_http, args.reps)
    _, t_eng = timed(lambda: eng.table(pts.tolist()), args.reps)
    # where the engine's time goes: snapping, the hierarchy's node table + the phantom step, the matrix, JSON
    _, t_arr = timed(lambda: eng.table(pts.tolist(), matrices="arrays"), args.reps)
    from gpuroute.engine.algorithms import CH

    ph, t_snap = timed(lambda: eng.segments.snap_many(pts.tolist()), 3)
    cm, t_cm = timed(lambda: CH(eng)._cost_matrix(ph, ph, "auto"), 3)
    from gpuroute.engine.osrm import matrix_array, matrix_json

    arr, t_fmt = timed(lambda: matrix_array(cm[0] / 10.0), 3)
    _, t_json = timed(lambda: matrix_json(arr), 3)
    emit(rows, what="table 1000x1000", http=stats(t_http), engine_lists=stats(t_eng), engine_arrays=stats(t_arr),
         bytes=len(r.content), nulls=n_null, coords_chars=len(coords), snap=stats(t_snap),
         node_table_and_phantoms=stats(t_cm), matrix_array=stats(t_fmt), matrix_json=stats(t_json),
         options_per_phantom=int(ph.padded()[0].shape[1]))
    iso_rows(rows, args, client, eng, lonlat, rng)
    # customize: a full metric, and 1,000 arc updates
    cust_rows(rows, args, client, eng, rng)
    save(rows, args)


def save(rows, args):
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"service_gpu_{dt.date.today()}.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)


def iso_rows(rows, args, client, eng, lonlat, rng):
    """GET /isochrone 5 and 10 min from ``args.reps`` random nodes: HTTP, and the engine's own time (the
    Python API's lists, and the arrays the HTTP layer asks for)."""
    origins = lonlat[rng.choice(eng.graph.n_nodes, args.reps, replace=False)]

    def iso(o):
        r = client.get(f"/isochrone/v1/driving/{o[0]:.6f},{o[1]:.6f}?contours_minutes=5,10")
        assert r.status_code == 200, r.text[:300]
        return r

    iso(origins[0])
    t_iso = []
    for o in origins:
        t0 = time.perf_counter()
        iso(o)
        t_iso.append(time.perf_counter() - t0)
    t_iso_e = []
    for o in origins:
        t0 = time.perf_counter()
        eng.isochrone(o.tolist(), [300, 600])
        t_iso_e.append(time.perf_counter() - t0)
    t_iso_a = []
    for o in origins:
        t0 = time.perf_counter()
        eng.isochrone(o.tolist(), [300, 600], coordinates="arrays")
        t_iso_a.append(time.perf_counter() - t0)
    emit(rows, what="isochrone 5,10 min", http=stats(t_iso), engine=stats(t_iso_e), engine_arrays=stats(t_iso_a))


def cust_rows(rows, args, client, eng, rng):
    g = eng.graph

    def cust_metric():
        r = client.post("/customize", json={"metric": "time"})
        assert r.status_code == 200, r.text[:300]
        return r.json()

    cust_metric()
    res, t_c = timed(cust_metric, args.reps)
    emit(rows, what="customize metric time", http=stats(t_c), engine_seconds_last=res.get("seconds"))
    arcs = rng.integers(0, g.n_arcs, 1000)
    cost0 = np.asarray(eng.overlay.arc_cost)[arcs]
    ups = [{"arc": int(a), "cost": int(c) * 2} for a, c in zip(arcs, cost0, strict=True)]

    def cust_updates():
        r = client.post("/customize", json={"updates": ups})
        assert r.status_code == 200, r.text[:300]
        return r.json()

    res, t_u = timed(cust_updates, args.reps)
    emit(rows, what="customize 1000 arcs", http=stats(t_u), engine_seconds_last=res.get("seconds"),
         cells=res.get("cells"))


if __name__ == "__main__":
    main()
