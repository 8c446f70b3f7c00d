"""Benchmark: where an isochrone's time goes on NY (``Engine.isochrone``, contours 300 s and 600 s), and
whether the GPU's lattice equals the CPU twin's there.

Per origin (random nodes, seed 0): the engine's time with positions as lists (the Python API) and as
arrays (what the HTTP layer can ask for), the field codes' time (search, extent, marks, field: GPU when
``config.SERVE_ISOCHRONE_DEVICE`` finds one, else CPU) and the polygons' time (tracing, structure,
Douglas-Peucker, checks, GeoJSON), the share drawn by the fast path, the answer's vertices and JSON
bytes (orjson). With a GPU: the GPU's codes against the CPU twin's for every origin (must be equal), and
the CPU path's times beside. Rows are JSON lines naming device and commit.

With ``--compare DIR`` (a copy of ``src/`` before a change): two worker processes, that tree and this one,
answer the same requests in turn (interleaved, the order alternating per origin) on the same dataset:
every answer's JSON bytes (orjson, ``coordinates="arrays"`` as the HTTP layer asks, and lists) must be
equal; per tree the end-to-end time and the time of every stage (search, extent, lattice, marks, field,
the GPU drawer's codes, trace, structure, shared runs, simplify, gather, checks, GeoJSON: wall time in
the request's thread; the nesting check runs beside it in a worker thread), medians over the origins.

Usage: PYTHONPATH=src python3 benchmarks/isochrone_stages.py [--n 20] [--cells N]
       PYTHONPATH=src python3 benchmarks/isochrone_stages.py --compare /tmp/before/src [--n 30] [--device cpu]
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
# a --compare worker imports the tree it is given
sys.path.insert(0, sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else str(ROOT / "src"))

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


# ----------------------------------------------------------------------------------- --compare
#: (module, function, stage) timed in a --compare worker (wall time, the request's thread).
STAGES = [(lattice, "search_turns", "search"), (lattice, "search_cpu", "search"), (lattice, "extent_cpu", "extent"),
          (lattice, "lattice", "lattice"), (lattice, "mark_cpu", "marks"), (lattice, "field_cpu", "field"),
          (polygons, "trace", "trace"), (polygons, "structure", "structure"),
          (polygons, "drop_outside_larger", "structure"), (polygons, "_shared", "shared"),
          (polygons, "anchors", "simplify"), (polygons, "simplify", "simplify"), (polygons, "_gather", "gather"),
          (polygons, "_check", "checks"), (polygons, "_restore", "checks"), (polygons, "geojson_fast", "geojson"),
          (lattice, "codes_cpu", "codes (all)"), (polygons, "rings_of", "rings (all)")]


def worker(args):
    """Answer requests read as JSON lines on stdin (``{"o": [lon, lat], "c": [s, ...], "kw": {...}}``) with
    ``{"t": s, "sha": JSON bytes' SHA-256, "stages": {stage: s}, "bytes": n}``."""
    import hashlib
    import threading

    import orjson

    if args.device:
        config.SERVE_ISOCHRONE_DEVICE = args.device
    if args.cells is not None:
        config.SERVE_ISOCHRONE_MAX_CELLS = args.cells
    eng = Engine.open(str(ROOT / "out" / "service_bench" / "ny-time"))
    main_thread = threading.get_ident()
    acc = {}

    def wrap(fn, key):
        def w(*a, **k):
            if threading.get_ident() != main_thread:
                return fn(*a, **k)
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                acc[key] = acc.get(key, 0.0) + time.perf_counter() - t0
        return w

    for mod, name, key in STAGES:
        if hasattr(mod, name):
            setattr(mod, name, wrap(getattr(mod, name), key))
    if hasattr(lattice.IsochroneGPU, "codes"):
        lattice.IsochroneGPU.codes = wrap(lattice.IsochroneGPU.codes, "gpu codes (all)")
    print(json.dumps({"ready": True, "device": device_name()}), flush=True)
    for line in sys.stdin:
        q = json.loads(line)
        acc.clear()
        t0 = time.perf_counter()
        r = eng.isochrone(q["o"], q["c"], **q.get("kw", {}))
        t = time.perf_counter() - t0
        b = orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY)
        print(json.dumps({"t": t, "sha": hashlib.sha256(b).hexdigest(), "stages": dict(acc), "bytes": len(b)}),
              flush=True)


def ny_time(n):
    """The NY-time dataset (built once under ``out/service_bench``) opened, and ``n`` random origins (seed 0)."""
    d = ROOT / "out" / "service_bench" / "ny-time"
    if not is_dataset(d):
        build_dataset("ny-time", d, method="inertial")
    eng = Engine.open(str(d))
    g = eng.graph
    rng = np.random.default_rng(0)
    return eng, np.asarray(g.coords)[rng.choice(g.n_nodes, n, replace=False)]


def compare(args):
    """The --compare driver (see the module doc)."""
    import subprocess

    eng, origins = ny_time(args.n)
    del eng
    extra = [] if args.device is None else ["--device", args.device]
    extra += [] if args.cells is None else ["--cells", str(args.cells)]
    trees = {"before": args.compare, "after": str(ROOT / "src")}
    procs = {}
    for name, src in trees.items():
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                     if p and Path(p).resolve() != (ROOT / "src").resolve()])
        procs[name] = subprocess.Popen([sys.executable, __file__, "--worker", "--src", src] + extra, env=env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for name, p in procs.items():
        hello = json.loads(p.stdout.readline())
        emit(what=f"isochrone compare worker {name}", src=trees[name], worker_device=hello["device"])

    def ask(name, o, c, kw):
        p = procs[name]
        p.stdin.write(json.dumps({"o": o, "c": c, "kw": kw}) + "\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline())

    # exactness: every origin, several contour sets and options, both trees
    sets = [([300, 600], {"coordinates": "arrays"}), ([300, 600], {}), ([120], {"coordinates": "arrays"}),
            ([60, 180, 420, 900], {"coordinates": "arrays"}), ([300, 900], {"coordinates": "arrays", "generalize": 0.0}),
            ([300, 600], {"polygons": False, "denoise": 0.0, "generalize": 0.0})]
    equal = total = 0
    diff = []
    for o in origins:
        for c, kw in sets:
            a = ask("before", o.tolist(), c, kw)
            b = ask("after", o.tolist(), c, kw)
            total += 1
            equal += a["sha"] == b["sha"]
            if a["sha"] != b["sha"]:
                diff.append([o.tolist(), c, kw])
    emit(what="isochrone compare: equal JSON bytes", equal=equal, total=total, first_diffs=diff[:5])
    # timing: 5 and 10 min, arrays (the HTTP layer's call), interleaved, the order alternating per origin
    for o in origins[:2]:
        for name in trees:
            ask(name, o.tolist(), [300, 600], {"coordinates": "arrays"})
    res = {name: [] for name in trees}
    for rep in range(args.reps):
        for i, o in enumerate(origins):
            order = list(trees) if (i + rep) % 2 == 0 else list(trees)[::-1]
            for name in order:
                res[name].append(ask(name, o.tolist(), [300, 600], {"coordinates": "arrays"}))
    for name, rows in res.items():
        keys = sorted({k for r in rows for k in r["stages"]})
        st = {k: round(float(np.median([r["stages"].get(k, 0.0) for r in rows])) * 1e3, 3) for k in keys}
        mean = {k: round(float(np.mean([r["stages"].get(k, 0.0) for r in rows])) * 1e3, 3) for k in keys}
        emit(what=f"isochrone 5,10 min arrays, {name}", device_setting=args.device or str(config.SERVE_ISOCHRONE_DEVICE),
             engine=p50([r["t"] for r in rows]), mean_ms=round(float(np.mean([r["t"] for r in rows])) * 1e3, 3),
             stages_p50_ms=st, stages_mean_ms=mean, n=len(rows))
    for p in procs.values():
        p.stdin.close()
        p.wait()
    return equal == total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--cells", type=int, default=None, help="config.SERVE_ISOCHRONE_MAX_CELLS")
    ap.add_argument("--compare", default=None, help="a copy of src/ before a change: answers and times against it")
    ap.add_argument("--device", default=None, help="config.SERVE_ISOCHRONE_DEVICE of --compare's workers")
    ap.add_argument("--reps", type=int, default=1, help="timing passes over the origins (--compare)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--src", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.compare:
        sys.exit(0 if compare(args) else 1)
    if args.cells is not None:
        config.SERVE_ISOCHRONE_MAX_CELLS = args.cells
    eng, origins = ny_time(args.n)
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
            got, lg = gpu.codes(req, met if met.turns is not None else None)
            t_gpu.append(time.perf_counter() - t0)
            equal += int((lg.W, lg.H, lg.i0, lg.j0) == (lw.W, lw.H, lw.i0, lw.j0) and np.array_equal(got, want))
        emit(what="isochrone GPU codes vs CPU twin", origins=len(origins), equal=equal, gpu_codes=p50(t_gpu))


if __name__ == "__main__":
    main()
