"""Benchmark: the CPU parts of a large ``/table`` on NY (issue 12's 1000 x 1000 target): snapping 1000
coordinates one at a time (``SegmentIndex.snap``) against all together (``SegmentIndex.snap_batch``, as
``Engine._snap`` does), and the table's matrix as nested lists + orjson (``matrix_or_none``) against
arrays + orjson (``matrix_array``, ``OPT_SERIALIZE_NUMPY``) and arrays + the compiled parallel writer
(``matrix_json``, spliced in as ``orjson.Fragment``: what the HTTP server does).

The coordinates are 1000 random NY nodes (junctions: most snap with ties), as in
``benchmarks/service_gpu.py``. The matrix is the engine's own cost matrix of those phantoms (computed once;
its time is not measured here). Rows are JSON lines naming device and commit.

Usage: PYTHONPATH=src python3 benchmarks/snap_table_encode.py [--reps 5] [--k 1000] [--out DIR]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.engine.algorithms import CH  # noqa: E402
from gpuroute.engine.dataset import is_dataset  # noqa: E402
from gpuroute.engine.osrm import matrix_array, matrix_json, matrix_or_none  # noqa: E402
from gpuroute.engine.params import Waypoints  # noqa: E402
from gpuroute.geo.segments import PhantomSet  # noqa: E402


def emit(rows, **row):
    row["device"] = f"cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    row["commit"] = os.environ.get("GPUROUTE_COMMIT", "unknown")
    row["date"] = str(dt.date.today())
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
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--out", default="out")
    args = ap.parse_args()
    import orjson

    rows = []
    d = ROOT / "out" / "service_bench" / "ny-time"
    eng = Engine.open(str(d) if is_dataset(d) else "ny-time")
    seg = eng.segments
    g = eng.graph
    rng = np.random.default_rng(0)
    pts = np.asarray(g.coords)[rng.choice(g.n_nodes, args.k, replace=False)]
    lons, lats = pts[:, 0].copy(), pts[:, 1].copy()
    seg.snap_batch(lons[:4], lats[:4])  # compile

    def one_by_one():
        return PhantomSet.concat([seg.snap(x, y, index=i) for i, (x, y) in enumerate(pts.tolist())])

    want, t_one = timed(one_by_one, args.reps)
    got, t_batch = timed(lambda: seg.snap_batch(lons, lats), args.reps)
    assert all(np.array_equal(getattr(got, f), getattr(want, f)) for f in ("point_start", "arc", "fraction", "lon", "lat"))
    coords = pts.tolist()
    _, t_engine = timed(lambda: eng._snap(Waypoints.from_kwargs(coords)), args.reps)
    emit(rows, what=f"snap {args.k} NY nodes", one_by_one=stats(t_one), batch=stats(t_batch),
         engine_snap=stats(t_engine), ties=int(got.tie.sum()))
    cost, _ = CH(eng)._cost_matrix(got, got, "auto")
    dur = cost * eng._w_scale
    dur[: args.k // 50, :: 7] = np.inf  # a few unreachable cells, as a table on a real graph may hold
    opt = orjson.OPT_SERIALIZE_NUMPY
    lists, t_lists = timed(lambda: matrix_or_none(dur), args.reps)
    js_l, t_lists_json = timed(lambda: orjson.dumps({"durations": lists}, option=opt), args.reps)
    arr, t_arr = timed(lambda: matrix_array(dur), args.reps)
    js_a, t_arr_json = timed(lambda: orjson.dumps({"durations": arr}, option=opt), args.reps)
    matrix_json(arr[:2, :2])  # compile
    js_w, t_arr_writer = timed(lambda: orjson.dumps({"durations": orjson.Fragment(matrix_json(arr))}), args.reps)
    emit(rows, what=f"table {args.k}x{args.k} durations to JSON", lists=stats(t_lists), lists_orjson=stats(t_lists_json),
         arrays=stats(t_arr), arrays_orjson=stats(t_arr_json), arrays_matrix_json=stats(t_arr_writer),
         bytes=len(js_a), same_bytes=js_a == js_l == js_w)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"snap_table_encode_{dt.date.today()}.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)


if __name__ == "__main__":
    main()
