"""Benchmark: where an isochrone's time goes on NY (``Engine.isochrone``, contours 300 s and 600 s), and
whether the GPU's lattice equals the CPU twin's there.

Per origin (random nodes, seed 0): the engine's time with positions as lists (the Python API) and as
arrays (what the HTTP layer can ask for), the field codes' time (search, extent, marks, field: GPU when
``config.SERVE_ISOCHRONE_DEVICE`` finds one, else CPU) and the polygons' time (tracing, structure,
Douglas-Peucker, checks, GeoJSON), the share drawn by the fast path, the answer's vertices and JSON
bytes (orjson). With a GPU: the GPU's codes against the CPU twin's for every origin (must be equal), and
the CPU path's times beside. Rows are JSON lines naming device and commit.

Usage: PYTHONPATH=src python3 benchmarks/isochrone_stages.py [--n 20] [--cells N]
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

import gpuroute.engine.services.isochrone as iso  # noqa: E402
from gpuroute import config  # noqa: E402
from gpuroute.engine import Engine  # noqa: E402
from gpuroute.engine.dataset import is_dataset  # noqa: E402
from gpuroute.engine.services.isochrone import lattice, polygons, search  # noqa: E402
from gpuroute.pipeline import build_dataset  # noqa: E402


def device_name():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:  # no GPU
        return "cpu only"


def emit(**row):
    row["device"] = device_name()
    row["commit"] = os.environ.get("GPUROUTE_COMMIT", "unknown")
    print(json.dumps(row), flush=True)


def p50(xs):
    xs = np.asarray(xs) * 1e3
    return {"p50_ms": round(float(np.median(xs)), 3), "min_ms": round(float(xs.min()), 3),
            "max_ms": round(float(xs.max()), 3)}


def run(eng, origins, device):
    """Times of one device setting; returns a dict of lists."""
    config.SERVE_ISOCHRONE_DEVICE = device
    t = {"lists": [], "arrays": [], "codes": [], "polygons": [], "fast": [], "vertices": [], "bytes": []}
    orig_codes_cpu, orig_geoms = lattice.codes_cpu, polygons.geometries
    gpu_codes = lattice.IsochroneGPU.codes

    def timed(fn, key):
        def w(*a, **k):
            t0 = time.perf_counter()
            r = fn(*a, **k)
            t[key].append(time.perf_counter() - t0)
            return r
        return w

    lattice.codes_cpu = timed(orig_codes_cpu, "codes")
    lattice.IsochroneGPU.codes = timed(gpu_codes, "codes")

    def geoms(*a, **k):
        t0 = time.perf_counter()
        r = orig_geoms(*a, **k)
        t["polygons"].append(time.perf_counter() - t0)
        t["fast"].append(r[1])
        return r

    polygons.geometries = geoms
    import orjson

    try:
        eng.isochrone(origins[0].tolist(), [300, 600])  # compile, upload
        for k in t:
            t[k].clear()
        for o in origins:
            t0 = time.perf_counter()
            eng.isochrone(o.tolist(), [300, 600])
            t["lists"].append(time.perf_counter() - t0)
        t["codes"].clear()
        t["polygons"].clear()
        t["fast"].clear()
        for o in origins:
            t0 = time.perf_counter()
            r = eng.isochrone(o.tolist(), [300, 600], coordinates="arrays")
            t["arrays"].append(time.perf_counter() - t0)
            t["bytes"].append(len(orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY)))
            n = 0
            for f in r["features"]:
                g = f["geometry"]
                polys = g["coordinates"] if g["type"] == "MultiPolygon" else [g["coordinates"]]
                n += sum(len(ring) for p in polys for ring in p)
            t["vertices"].append(n)
    finally:
        lattice.codes_cpu, polygons.geometries, lattice.IsochroneGPU.codes = orig_codes_cpu, orig_geoms, gpu_codes
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--cells", type=int, default=None, help="config.SERVE_ISOCHRONE_MAX_CELLS")
    args = ap.parse_args()
    if args.cells is not None:
        config.SERVE_ISOCHRONE_MAX_CELLS = args.cells
    d = ROOT / "out" / "service_bench" / "ny-time"
    if not is_dataset(d):
        build_dataset("ny-time", d, method="inertial")
    eng = Engine.open(str(d))
    g = eng.graph
    rng = np.random.default_rng(0)
    origins = np.asarray(g.coords)[rng.choice(g.n_nodes, args.n, replace=False)]
    has_gpu = device_name() != "cpu only"
    for device in (["gpu", "cpu"] if has_gpu else ["cpu"]):
        t = run(eng, origins, device)
        emit(what=f"isochrone 5,10 min stages ({device})", max_cells=int(config.SERVE_ISOCHRONE_MAX_CELLS),
             engine_lists=p50(t["lists"]), engine_arrays=p50(t["arrays"]), codes=p50(t["codes"]),
             polygons=p50(t["polygons"]), fast_path=float(np.mean(t["fast"])),
             vertices_p50=int(np.median(t["vertices"])), json_bytes_p50=int(np.median(t["bytes"])))
    if has_gpu:  # the GPU's codes against the CPU twin's, every origin
        met = iso.metric_of(eng, "duration")
        gpu = iso.gpu_drawer(eng, met) or lattice.IsochroneGPU(iso.graph_arrays(eng), met)
        equal = 0
        t_gpu = []
        for o in origins:
            origin = eng.segments.snap(*o)
            own = ~origin.tie  # the nearest segment's options, as the isochrone service takes them
            req = search.Request(met, eng._head, list(zip(origin.arc[own].tolist(), origin.fraction[own].tolist(), strict=True)),
                              [600 / met.scale, 300 / met.scale], float(origin.lon[0]), float(origin.lat[0]))
            want, lw = lattice.codes_cpu(iso.graph_arrays(eng), met, req)
            want = want.copy()
            t0 = time.perf_counter()
            got, lg = gpu.codes(req)
            t_gpu.append(time.perf_counter() - t0)
            equal += int((lg.W, lg.H, lg.i0, lg.j0) == (lw.W, lw.H, lw.i0, lw.j0) and np.array_equal(got, want))
        emit(what="isochrone GPU codes vs CPU twin", origins=len(origins), equal=equal, gpu_codes=p50(t_gpu))


if __name__ == "__main__":
    main()
