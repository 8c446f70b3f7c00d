"""Benchmark suite: what ``exclude=`` costs per request (issue 22, :mod:`gpuroute.engine.exclude`).

The dataset is what users run: ``gpuroute build monaco.osm.pbf --profile <OSRM's car.lua> -o DIR`` (built
into ``out/exclude/`` once; car.lua from the osrm-bindings wheel, ``make osrm-bin``). For each combination
car.lua declares (toll, motorway, ferry), on a fresh engine:

* ``first``: the first ``/route`` with that exclude (its segment index and one whole customization of the
  overlay into a state of its own), and its parts: ``segments`` (the masked segment index) and
  ``customize`` (the state: :meth:`gpuroute.crp.Overlay.customized_state`);
* ``later``: the median of the next ``--routes`` routes with the same exclude (cache hits), beside
  ``plain``: the median of the same routes without exclude;
* ``after_customize``: the first route with that exclude after a ``/customize`` of one arc (the cached
  state is stale: one whole customization again, the segment index kept).

Times are wall-clock seconds (``time.perf_counter``) in this process, after one warm-up route (numba's
compiled kernels loaded); the device is what ``/customize`` uses (the GPU where one is usable).

Usage (from the repo root):
    .venv/bin/python benchmarks/exclude.py [--routes 200] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

OUT = ROOT / "out" / "exclude"
MONACO = ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"


def car_lua():
    found = sorted((ROOT / ".venv" / "osrm").glob("**/profiles/car.lua"))
    if found:
        return found[0]
    r = subprocess.run(["bash", str(ROOT / ".ci" / "fetch_osrm.sh")], capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"OSRM's car.lua is needed (make osrm-bin): {r.stderr.strip()[-500:]}")
    return (ROOT / r.stdout.strip().splitlines()[-1] / ".." / "share" / "profiles" / "car.lua").resolve()


def dataset():
    from gpuroute.engine.dataset import drop_traffic, is_dataset
    from gpuroute.pipeline import build_dataset

    d = OUT / "monaco-car"
    if not is_dataset(d):
        OUT.mkdir(parents=True, exist_ok=True)
        build_dataset(MONACO, d, profile=car_lua(), cell_sizes=(64, 1024))
    drop_traffic(d)
    return d


def points(e, k, seed=22):
    import numpy as np

    s = e.segments
    rng = np.random.default_rng(seed)
    pick = rng.choice(s.n_segments, 2 * k)
    f = rng.uniform(0.3, 0.7, 2 * k)
    lon = s.lon_u[pick] + f * (s.lon_v[pick] - s.lon_u[pick])
    lat = s.lat_u[pick] + f * (s.lat_v[pick] - s.lat_u[pick])
    return [[(float(lon[2 * i]), float(lat[2 * i])), (float(lon[2 * i + 1]), float(lat[2 * i + 1]))] for i in range(k)]


def timed(e, c, **kw):
    """Seconds of one ``e.route(c, overview="false", **kw)`` (NoRoute counts as an answer)."""
    t0 = time.perf_counter()
    try:
        e.route(c, overview="false", **kw)
    except Exception as err:  # noqa: BLE001 - NoRoute counts as an answer
        if getattr(err, "code", None) not in ("NoRoute", "NoSegment"):
            raise
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--routes", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from gpuroute.backend import resolve_device
    from gpuroute.engine import Engine
    from gpuroute.engine.dataset import drop_traffic
    from gpuroute.engine.exclude import excluded_metric, excluder

    d = dataset()
    out = {"dataset": str(d), "device": resolve_device("auto"), "cpu": platform.processor() or platform.machine(),
           "routes": args.routes, "date": time.strftime("%Y-%m-%d"), "cases": {}}
    try:
        out["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                       cwd=ROOT).stdout.strip()
    except OSError:
        out["commit"] = None
    for name in ("toll", "motorway", "ferry"):
        e = Engine.open(d)
        pairs = points(e, args.routes + 1)
        e.route(pairs[0], overview="false")  # warm-up: kernels loaded
        xr = excluder(e)
        ex = xr.resolve(name)
        t0 = time.perf_counter()
        ex.segments()
        seg_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        st = e.overlay.customized_state(excluded_metric(e.overlay.metric, e.overlay.turns, ex.excluded))
        cust_s = time.perf_counter() - t0
        del st
        e2 = Engine.open(d)  # the first request end to end, on an engine that has done nothing for it
        e2.route(pairs[0], overview="false")
        first = timed(e2, pairs[0], exclude=name)
        later = [timed(e2, c, exclude=name) for c in pairs[1:]]
        plain = [timed(e2, c) for c in pairs[1:]]
        arc = int(len(e2.overlay.arc_cost) // 3)
        e2.customize([{"arc": arc, "cost": int(e2.overlay.arc_cost[arc]) + 1}])
        after = timed(e2, pairs[0], exclude=name)
        out["cases"][name] = {"first_s": first, "segments_s": seg_s, "customize_s": cust_s,
                              "later_median_s": statistics.median(later), "plain_median_s": statistics.median(plain),
                              "after_customize_s": after, "stats": dict(excluder(e2).stats)}
        print(f"exclude={name:9s} first {first * 1e3:7.1f} ms (segment index {seg_s * 1e3:.1f} ms, customization "
              f"{cust_s * 1e3:.1f} ms); later {statistics.median(later) * 1e3:.2f} ms per route (without exclude "
              f"{statistics.median(plain) * 1e3:.2f} ms); after a /customize {after * 1e3:.1f} ms; {excluder(e2).stats}")
        drop_traffic(d)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
