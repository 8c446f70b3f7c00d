"""Benchmark: the NY 1,000-stop trip end to end (issue 23, items 3 and 4): gpuroute's ``Engine.trip`` (the
hierarchy's table, the tour search, the legs) against LKH-3 on the same matrix and OSRM's ``/trip`` on the
same stops, in one run on one machine.

* **gpuroute**: ``Engine.trip(coords, time_limit=T)`` on the ``ny-time`` dataset (DIMACS travel times, built
  once with ``gpuroute.pipeline`` under ``out/service_bench/ny-time``, as benchmarks/service_gpu.py), the
  stops ``--stops`` random nodes of the largest strongly connected component, at their coordinates. One
  untimed call first (compilation, caches); then ``--reps`` timed calls, each split into table (the
  many-to-many search, synchronised), tour (``gpuroute.tours.tsp``), and the rest (snapping, the legs'
  route, the answer). ``matrix_on_device``: whether ``tsp`` got the table's CuPy matrix (issue 23, item 3:
  the matrix never leaves the device).
* **LKH-3** (``elkai``'s core, benchmarks/tours_peers.py's child process): the exact matrix ``tsp`` saw
  (captured in one more untimed call), as integers (``lkh_scale`` x the costs, rounded), ``RUNS = 1``,
  ``TIME_LIMIT = --lkh-time-limit`` (default 10 T; LKH counts it after its ascent, so its wall time is
  what to compare). Its tour is costed on the float matrix.
* **OSRM** ``/trip`` (osrm-routed, MLD, car.lua) on NY written as OSM (benchmarks/crp.py's ``ny_osm``: one
  OSM node per DIMACS node, one oneway way per arc, maxspeed from the arc's length / travel time) with
  ``--max-trip-size`` raised; the stops sent as one polyline. OSRM prices its own graph (car.lua), so its
  visiting order is costed on our matrix (``osrm_order_cost``) beside its own reported duration. Building
  OSRM's NY (write the OSM file, osrm-extract, -partition, -customize: about 2.5 min on the 2-core CI
  machine) runs only when the time budget allows (``--budget-s``), cached under ``out/trip_bench/osrm``;
  ``--no-osrm`` skips it.

Targets (issue 23): gpuroute's tour within 2 % of LKH's at 10x less time (``gap_vs_lkh``,
``lkh_time_over_ours``); at least 10 % shorter than OSRM's trip (``gap_vs_osrm_order``).

Output: ``--out DIR`` gets ``trip_ny_<date>[_<tag>].json`` (device, commit, date, every number) and a
Markdown table is printed. ``--graph monaco --stops 200`` is a quick smoke run (the shipped Monaco extract,
its OSM file for OSRM).

Usage (repo root; the GPU machine has no network: carry ``.whl/peers/elkai-*.whl`` and ``local_data/osrm``)::

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/peers/elkai-*.whl
    PYTHONPATH=src:/tmp/site python3 benchmarks/trip_ny.py --out $OUT          # < 8 min
    PYTHONPATH=src python3 benchmarks/trip_ny.py --graph monaco --stops 200 --reps 1 --out out   # smoke
"""
from __future__ import annotations

import argparse
import datetime as dt
import http.client
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import gpuroute.tours as tours  # noqa: E402
from gpuroute.backend import is_cupy_array  # noqa: E402
from gpuroute.engine import Engine, algorithms  # noqa: E402
from gpuroute.geo.snap import largest_scc_mask  # noqa: E402

CACHE = ROOT / "out" / "trip_bench"
T0 = time.perf_counter()


def sibling(name):
    """benchmarks/<name>.py as a module (its helpers reused: crp's OSRM plumbing, tours_peers' LKH)."""
    spec = importlib.util.spec_from_file_location(f"_trip_{name}", Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def commit():
    if os.environ.get("GPUROUTE_COMMIT"):
        return os.environ["GPUROUTE_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except Exception:
        return "unknown"


def device_name():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:
        return f"CPU only ({os.cpu_count()} cores, {platform.processor() or platform.machine()})"


def sync():
    """Wait for the GPU (timings of asynchronous work); nothing without one."""
    try:
        import cupy

        cupy.cuda.Device().synchronize()
    except Exception:
        pass


def left(budget):
    return budget - (time.perf_counter() - T0)


# ------------------------------------------------------------------------------------------ gpuroute
def open_engine(graph):
    if graph == "monaco":
        return Engine.open("monaco"), {}
    from gpuroute.engine.dataset import is_dataset
    from gpuroute.pipeline import build_dataset

    d = ROOT / "out" / "service_bench" / "ny-time"
    info = {}
    if not is_dataset(d):
        t = time.perf_counter()
        s = build_dataset("ny-time", d, method="inertial")
        info = {"dataset_build_s": time.perf_counter() - t, "stages_s": s.get("seconds")}
    return Engine.open(str(d)), info


class Probe:
    """Times the table search and the tour search inside ``Engine.trip`` (wrapping
    ``algorithms.CH/CRP.many_to_many`` and ``gpuroute.tours.tsp``), records whether ``tsp`` got a CuPy
    matrix, and keeps a host copy of that matrix when ``capture`` is set."""

    def __init__(self):
        self.capture = False
        self.reset()

    def reset(self):
        self.table_s = self.tour_s = 0.0
        self.on_device = None
        self.matrix = self.kw = self.result = None

    def install(self):
        for cls in (algorithms.CH, algorithms.CRP):
            real = cls.many_to_many

            def m2m(obj, *a, _real=real, **k):
                t = time.perf_counter()
                out = _real(obj, *a, **k)
                sync()
                self.table_s += time.perf_counter() - t
                return out

            cls.many_to_many = m2m
        real_tsp = tours.tsp

        def tsp(m, **k):
            self.on_device = is_cupy_array(m)
            if self.capture:
                self.matrix = m.get() if self.on_device else np.array(m)
                self.kw = dict(k)
            t = time.perf_counter()
            r = real_tsp(m, **k)
            self.tour_s += time.perf_counter() - t
            self.result = r
            return r

        tours.tsp = tsp


def trip_order(res):
    wi = np.array([w["waypoint_index"] for w in res["waypoints"]])
    assert np.array_equal(np.sort(wi), np.arange(wi.size)), "a waypoint not visited once"
    return np.argsort(wi)


def closed_cost(M, order):
    o = np.asarray(order, np.int64)
    return float(M[o, np.roll(o, -1)].sum())


# ------------------------------------------------------------------------------------------ LKH
def lkh(M, T, seed, timeout):
    peers = sibling("tours_peers")
    scale = 1.0 if np.all(M == np.rint(M)) else 10.0 ** max(0, 6 - int(np.log10(max(1.0, float(M.max())))))
    Mi = np.rint(M * scale).astype(np.int64)
    r = peers._lkh(types.SimpleNamespace(costs=Mi), T, seed, 0, timeout)
    tour = np.asarray(r["solution"], np.int64)
    assert np.array_equal(np.sort(tour), np.arange(M.shape[0])), "LKH's tour is not a permutation"
    return {"cost": closed_cost(M, tour), "wall_s": r["wall_s"], "prep_s": r["prep_s"], "solve_s": r["solve_s"],
            "lkh_scale": scale, "params": r["lkh_params"]}


# ------------------------------------------------------------------------------------------ OSRM
def polyline5(lonlat):
    """Google's encoded polyline (precision 5, (lat, lon) pairs) as OSRM's ``polyline(...)`` takes it."""
    out = []
    prev = (0, 0)
    for lon, lat in lonlat:
        cur = (int(round(lat * 1e5)), int(round(lon * 1e5)))
        for v in (cur[0] - prev[0], cur[1] - prev[1]):
            v = ~(v << 1) if v < 0 else v << 1
            while v >= 0x20:
                out.append(chr((0x20 | (v & 0x1F)) + 63))
                v >>= 5
            out.append(chr(v + 63))
        prev = cur
    return "".join(out)


def osrm_dataset(crp, graph, bindir, prof, budget, note):
    """The .osrm base of ``graph`` built for MLD (cached), or None with ``note['osrm']`` saying why."""
    work = CACHE / "osrm" / graph
    work.mkdir(parents=True, exist_ok=True)
    if graph == "monaco":
        import gpuroute

        pbf = Path(gpuroute.datasets.load("monaco").meta["source"])
    else:
        pbf = work / "ny_dimacs.osm.pbf"
    base = work / (pbf.name.split(".")[0] + ".osrm")
    if Path(str(base) + ".mldgr").exists():
        note["osrm_build"] = "cached"
        return base
    steps = {}
    try:
        if graph != "monaco" and not pbf.exists():  # (a carried / earlier file is used as it is)
            t = time.perf_counter()
            g, metrics, _ = crp.load("NY")
            crp.ny_osm(g, np.asarray(metrics["time"].arc_cost), pbf)
            steps["write_osm_s"] = time.perf_counter() - t
        src = pbf if pbf.parent == work else work / pbf.name
        if src != pbf:
            src.write_bytes(pbf.read_bytes())
        cores = os.cpu_count()
        for name, cmd in (("extract", [Path(bindir) / "osrm-extract", "-p", Path(prof) / "car.lua", "-t", str(cores),
                                       src]),
                          ("partition", [Path(bindir) / "osrm-partition", "-t", str(cores), base]),
                          ("customize", [Path(bindir) / "osrm-customize", "-t", str(cores), base])):
            tl = left(budget) - 60
            if tl <= 0:
                note["osrm"] = f"skipped: the time budget ran out before osrm-{name} ({steps})"
                return None
            steps[f"{name}_s"] = crp.osrm_run(cmd, timeout=tl)[0]
    except subprocess.TimeoutExpired as e:
        note["osrm"] = f"skipped: {e.cmd[0]} outran the time budget ({steps})"
        return None
    note["osrm_build"] = steps
    return base


def osrm_trip(crp, bindir, base, coords, reps, budget):
    """OSRM's /trip on ``coords`` (one polyline), ``reps`` times while the budget lasts (at least once):
    (answer, wall seconds each, URL length)."""
    port = crp.free_port()
    n = len(coords)
    proc = subprocess.Popen([os.path.join(bindir, "osrm-routed"), "--algorithm", "mld", "-i", "127.0.0.1", "-p",
                             str(port), "-t", str(os.cpu_count()), "--max-trip-size", str(n + 1), str(base)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        conn = None
        for _ in range(300):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                conn.request("GET", "/nearest/v1/driving/0,0")
                conn.getresponse().read()
                break
            except OSError:
                conn = None
                time.sleep(0.1)
        if conn is None:
            raise RuntimeError("osrm-routed did not answer within 30 s")
        url = (f"/trip/v1/driving/polyline({polyline5(coords)})?roundtrip=true&source=any&destination=any"
               "&overview=false&steps=false")
        walls, body = [], None
        for _ in range(reps):
            if walls and left(budget) < 2 * walls[0]:
                break
            t = time.perf_counter()
            conn.request("GET", url)
            body = json.loads(conn.getresponse().read())
            walls.append(time.perf_counter() - t)
        if body.get("code") != "Ok":
            raise RuntimeError(f"OSRM /trip answered {body.get('code')}: {body.get('message')}")
        return body, walls, len(url)
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------------------------------ main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", choices=("ny", "monaco"), default="ny")
    ap.add_argument("--stops", type=int, default=1000)
    ap.add_argument("--time-limit", type=float, default=1.0, help="gpuroute's tour search (s)")
    ap.add_argument("--lkh-time-limit", type=float, default=None, help="LKH's TIME_LIMIT (s; default 10x ours)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-lkh", action="store_true")
    ap.add_argument("--no-osrm", action="store_true")
    ap.add_argument("--osrm-bin", default=None, help="directory of the osrm-* binaries (default: crp.py's search)")
    ap.add_argument("--budget-s", type=float, default=450.0,
                    help="wall-time budget of the whole run: OSRM's build is skipped when it cannot fit")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--tag", default="")
    a = ap.parse_args(argv)
    doc = {"meta": {"device": device_name(), "host": platform.node(), "commit": commit(),
                    "date": dt.date.today().isoformat(), "graph": a.graph, "stops": a.stops,
                    "time_limit_s": a.time_limit, "reps": a.reps, "seed": a.seed, "cpu_count": os.cpu_count(),
                    "python": platform.python_version()},
           "notes": {}, "gpuroute": {}, "lkh": None, "osrm": None, "summary": {}}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"trip_{a.graph}_{doc['meta']['date']}{'_' + a.tag if a.tag else ''}.json"

    def save():
        doc["meta"]["wall_s"] = time.perf_counter() - T0
        path.write_text(json.dumps(doc, indent=1, default=lambda v: v.item() if hasattr(v, "item") else str(v)))

    print(f"# {doc['meta']['device']}, commit {doc['meta']['commit']}", flush=True)
    # ---------------------------------------------------------------- gpuroute
    t = time.perf_counter()
    eng, info = open_engine(a.graph)
    g = eng.graph
    doc["gpuroute"].update(info, open_s=time.perf_counter() - t, nodes=g.n_nodes, arcs=g.n_arcs,
                           capabilities=[c for c in eng.capabilities if c.get("service") in ("table", "trip")])
    eng.limits["max_locations_trip"] = max(a.stops, eng.limits.get("max_locations_trip") or 0)
    rng = np.random.default_rng(a.seed)
    nodes = rng.choice(np.flatnonzero(largest_scc_mask(g)), a.stops, replace=False)
    coords = [(float(x), float(y)) for x, y in np.asarray(g.coords)[nodes]]
    probe = Probe()
    probe.install()
    t = time.perf_counter()
    tours.warm_up()
    eng.trip(coords, time_limit=min(0.2, a.time_limit))  # compilation and caches, untimed
    doc["gpuroute"]["first_call_s"] = time.perf_counter() - t
    runs = []
    for _ in range(a.reps):
        probe.reset()
        sync()
        t = time.perf_counter()
        res = eng.trip(coords, time_limit=a.time_limit)
        sync()
        wall = time.perf_counter() - t
        order = trip_order(res)
        r = {"wall_s": wall, "table_s": probe.table_s, "tour_s": probe.tour_s,
             "rest_s": wall - probe.table_s - probe.tour_s, "matrix_on_device": probe.on_device,
             "tour_device": probe.result.device, "tour_stats": probe.result.stats,
             "osrm_duration_s": res["trips"][0]["duration"], "order": order}
        runs.append(r)
        st = probe.result.stats
        print(f"| gpuroute trip | {wall:.3f} s | table {probe.table_s:.3f} s | tour {probe.tour_s:.3f} s "
              f"({probe.result.device}, matrix on device: {probe.on_device}, starts {st.get('starts')}, rounds "
              f"{st.get('rounds')}, complete {st.get('complete')}) | rest {r['rest_s']:.3f} s |", flush=True)
    probe.capture = True
    probe.reset()
    eng.trip(coords, time_limit=a.time_limit)  # the matrix tsp sees, for the peers (untimed)
    M = probe.matrix
    for r in runs:
        r["cost"] = closed_cost(M, r.pop("order"))
    doc["gpuroute"]["runs"] = runs
    doc["gpuroute"]["tsp_kwargs"] = probe.kw
    ours = float(np.median([r["cost"] for r in runs]))
    ours_tour_s = float(np.median([r["tour_s"] for r in runs]))
    ours_wall_s = float(np.median([r["wall_s"] for r in runs]))
    doc["summary"].update(ours_cost=ours, ours_tour_s=ours_tour_s, ours_wall_s=ours_wall_s,
                          matrix_on_device=runs[0]["matrix_on_device"] if runs else None,
                          ours_searches_complete=[bool(r["tour_stats"].get("complete")) for r in runs])
    save()
    # ---------------------------------------------------------------- LKH
    if a.no_lkh:
        doc["notes"]["lkh"] = "skipped (--no-lkh)"
    else:
        try:
            T = a.lkh_time_limit if a.lkh_time_limit is not None else 10 * a.time_limit
            doc["lkh"] = lkh(M, T, a.seed, timeout=max(30.0, left(a.budget_s) - 30))
            doc["lkh"]["time_limit_s"] = T
            doc["summary"].update(lkh_cost=doc["lkh"]["cost"], gap_vs_lkh=ours / doc["lkh"]["cost"] - 1,
                                  lkh_time_over_ours=doc["lkh"]["wall_s"] / ours_tour_s)
            print(f"| LKH-3 | {doc['lkh']['wall_s']:.3f} s | cost {doc['lkh']['cost']:.1f} | ours {ours:.1f} "
                  f"({100 * doc['summary']['gap_vs_lkh']:+.2f} %) |", flush=True)
        except Exception as e:  # elkai missing, a failed child
            doc["notes"]["lkh"] = f"skipped: {type(e).__name__}: {str(e)[-300:]}"
    save()
    # ---------------------------------------------------------------- OSRM
    if a.no_osrm:
        doc["notes"]["osrm"] = "skipped (--no-osrm)"
    else:
        crp = sibling("crp")
        bindir, prof, why = crp.osrm_bin(a.osrm_bin)
        if not bindir:
            doc["notes"]["osrm"] = f"skipped: {why}"
        else:
            doc["notes"]["osrm_binaries"] = why
            try:
                base = osrm_dataset(crp, a.graph, bindir, prof, a.budget_s, doc["notes"])
                if base is not None:
                    body, walls, url_len = osrm_trip(crp, bindir, base, coords, max(1, a.reps), a.budget_s)
                    wi = np.array([w["waypoint_index"] for w in body["waypoints"]])
                    order = np.argsort(wi)
                    cost = closed_cost(M, order)
                    doc["osrm"] = {"wall_s": walls, "trip_duration_s": body["trips"][0]["duration"],
                                   "order_cost_on_our_matrix": cost, "url_chars": url_len,
                                   "trips": len(body["trips"])}
                    doc["summary"].update(osrm_order_cost=cost, gap_vs_osrm_order=ours / cost - 1,
                                          osrm_wall_s=float(np.median(walls)))
                    print(f"| OSRM /trip | {np.median(walls):.3f} s | its order on our matrix {cost:.1f} | ours "
                          f"{ours:.1f} ({100 * (ours / cost - 1):+.2f} %) |", flush=True)
            except Exception as e:
                doc["notes"]["osrm"] = f"failed: {type(e).__name__}: {str(e)[-400:]}"
    save()
    print(json.dumps(doc["summary"], indent=1), flush=True)
    print(f"# wrote {path} ({time.perf_counter() - T0:.0f} s)", flush=True)
    return doc


if __name__ == "__main__":
    main()
