"""Benchmark suite: map-matching quality, ``/match`` against the truth and against osrm-routed (issue 22: "matched
route length within 2 % of the true route for >= 95 % of traces, and at least as close as OSRM's on the same
traces", GPS noise sigma = 5, 10, 20 m, 1-10 s sampling).

The grid: sigma in ``--sigmas`` (m) x sampling step in ``--steps`` (s), ``--traces`` traces per cell, on each
extract of ``--extracts`` (the shipped Monaco; Andorra and Helsinki from ``../shared/data/osm`` where present,
skipped otherwise), built with OSRM's car.lua for both engines (gpuroute: ``build_dataset(..., profile=car.lua)``
in ``out/match/<name>-car``; OSRM: ``osrm-extract -p car.lua``, ``osrm-partition``, ``osrm-customize``,
``osrm-routed --algorithm mld``). Traces: :func:`tests/match_traces.make_trace_truth` (a real route between two
random points of the snapping component, ``--min-m`` to ``--max-m`` long -- default 2-4 km, the generator's
default -- sampled every dt seconds, Gaussian noise of sigma per axis, integer timestamps), seeded per
(extract, sigma, dt). Both engines get the same coordinates (6 decimals), the timestamps and ``radiuses`` =
sigma (``tidy`` off unless ``--tidy``), ``overview=full&geometries=geojson``.

Per trace, against the truth (the route's length ``L``, its geometry, the samples' true positions):

* ``err`` = |matched length / L - 1| (matched length: the sum of the matchings' distances);
* ``oracle`` = the error of a perfect matcher that drives the true route and snaps the noisy first and last
  points onto it (their nearest point on the true route within 3 sigma + 30 m, along it, of the true
  positions): the error no matcher that starts and ends at the snapped noisy endpoints avoids;
* a miss (err > 2 %) gets one cause, the first that holds: ``no_match`` (an error code), ``split`` (more than one
  matching), ``wrong_path`` (the matched geometry leaves the true route -- a vertex more than 15 m from it --
  or runs up and down it: its length exceeds the along-route span between its endpoints by more than 1 % of
  ``L``), ``dropped_end`` (the first or last point unmatched and the span short of ``L`` by more than 2 %),
  ``endpoint`` (the path is the true route's and the error is where its ends sit: ``endpoint_physics`` where
  the oracle misses too, ``endpoint_snap`` where it does not).

Per cell and engine: ``within_2pct``, mean and p95 error, the misses by cause; the oracle's share beside them.
Also the short-trace batch of benchmarks/match.py (Monaco, sigma 10 m, dt 5 s, routes >= 200 m, <= 40 points),
so its number is reported beside the grid's.

Usage (repo root): ``.venv/bin/python benchmarks/match_quality.py [--quick] [--traces 60] [--json OUT]``;
writes ``benchmarks/results/match_quality_<date>_cpu-2core.json`` by default.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

OUT = ROOT / "out" / "match"
EXTRACTS = {
    "monaco": ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf",
    "andorra": ROOT.parent / "shared" / "data" / "osm" / "andorra.osm.pbf",
    "helsinki": ROOT.parent / "shared" / "data" / "osm" / "Helsinki.osm.pbf",
}
#: A miss's thresholds (see the module notes).
OFF_ROUTE_M = 15.0
BACKTRACK_FRAC = 0.01
WITHIN = 0.02


def analyse(ans, tr, sigma):
    """One answer against the truth ``tr`` (:func:`make_trace_truth`'s dict): a dict of ``err``, ``oracle``,
    ``cause`` (None within 2 %), ``matchings``, ``dropped`` (points without a tracepoint), ``off_route_m``,
    ``excess_m`` (matched length less the along-route span of its ends) and ``span_err`` (that span against the
    true length, relative)."""
    from match_traces import oracle_error, project_on_route

    L = tr["length"]
    ta = tr["true_along"]
    w = 3.0 * sigma + 30.0
    oracle = oracle_error(tr, sigma)
    out = {"oracle": oracle, "matchings": 0, "dropped": len(tr["coords"]), "off_route_m": None, "excess_m": None,
           "span_err": None}
    if ans.get("code") != "Ok":
        out.update(err=1.0, cause="no_match")
        return out
    ms = ans["matchings"]
    length = float(sum(m["distance"] for m in ms))
    err = abs(length / L - 1.0)
    tps = ans["tracepoints"]
    idx = [i for i, t in enumerate(tps) if t is not None]
    out.update(err=float(err), matchings=len(ms), dropped=len(tps) - len(idx))
    if idx:
        ends = np.asarray([tps[idx[0]]["location"], tps[idx[-1]]["location"]])
        s_m, _ = project_on_route(tr, ends, lo=[ta[idx[0]] - w, ta[idx[-1]] - w], hi=[ta[idx[0]] + w, ta[idx[-1]] + w])
        out["excess_m"] = float(length - (s_m[1] - s_m[0]))
        out["span_err"] = float((s_m[1] - s_m[0]) / L - 1.0)
    geo = [np.asarray(m["geometry"]["coordinates"]) for m in ms if "geometry" in m]
    if geo:
        _, dg = project_on_route(tr, np.concatenate(geo))
        out["off_route_m"] = float(dg.max())
    if err <= WITHIN:
        out["cause"] = None
    elif len(ms) > 1:
        out["cause"] = "split"
    elif (out["off_route_m"] is not None and out["off_route_m"] > OFF_ROUTE_M) or (
        out["excess_m"] is not None and out["excess_m"] > BACKTRACK_FRAC * L
    ):
        out["cause"] = "wrong_path"
    elif (tps[0] is None or tps[-1] is None) and out["span_err"] is not None and out["span_err"] < -WITHIN:
        out["cause"] = "dropped_end"
    else:
        out["cause"] = "endpoint_physics" if oracle > WITHIN else "endpoint_snap"
    return out


def summarise(rows):
    """Per cell and engine: share within 2 %, mean and p95 error, misses by cause."""
    err = np.asarray([r["err"] for r in rows])
    causes = {}
    for r in rows:
        if r["cause"]:
            causes[r["cause"]] = causes.get(r["cause"], 0) + 1
    return {"within_2pct": float((err <= WITHIN).mean()), "mean_error": float(err.mean()),
            "p95_error": float(np.quantile(err, 0.95)), "misses": causes}


# ------------------------------------------------------------------------------------------ engines
def osrm_bin():
    found = sorted((ROOT / ".venv" / "osrm").glob("**/bin/osrm-routed"))
    return found[0].parent if found else None


def car_lua(bindir):
    env = os.environ.get("GPUROUTE_OSRM_PROFILES")
    for d in ([Path(env)] if env else []) + ([bindir / ".." / "share" / "profiles"] if bindir else []):
        if (d / "car.lua").is_file():
            return (d / "car.lua").resolve()
    return "car"


def gpuroute_dataset(name, pbf, lua):
    from gpuroute.engine.dataset import drop_traffic, is_dataset
    from gpuroute.pipeline import build_dataset

    d = OUT / f"{name}-car"
    if not is_dataset(d):
        OUT.mkdir(parents=True, exist_ok=True)
        build_dataset(pbf, d, profile=lua, cell_sizes=(64, 1024))
    drop_traffic(d)
    return d


def osrm_server(name, pbf, lua, bindir, max_points):
    from osrm_peer import OSRMRouted, build_mld

    work = OUT / f"osrm-{name}"
    stem = Path(pbf).name.split(".")[0]
    base = work / f"{stem}.osrm"
    if not (work / "done").exists():
        build_mld(bindir, pbf, lua, work)
        (work / "done").write_text("ok\n")
    return OSRMRouted(bindir, base, algorithm="mld", extra=["--max-matching-size", str(max_points + 10)])


def _query(coords, ts, sigma, tidy):
    return ("/match/v1/driving/" + ";".join(f"{x:.6f},{y:.6f}" for x, y in coords) + "?timestamps="
            + ";".join(map(str, ts)) + "&radiuses=" + ";".join(f"{sigma:g}" for _ in coords)
            + f"&overview=full&geometries=geojson&tidy={'true' if tidy else 'false'}")


def run_cell(eng, srv, rng, sigma, dt, n, a, *, min_m, max_m, max_points):
    from match_traces import make_trace_truth

    from gpuroute.engine import EngineError

    rows = {"gpuroute": [], "osrm": []}
    lengths = []
    for _ in range(n):
        tr = make_trace_truth(eng, rng, sigma, dt, min_m=min_m, max_m=max_m, max_points=max_points)
        tr["coords"] = [(round(x, 6), round(y, 6)) for x, y in tr["coords"]]
        lengths.append(tr["length"])
        c, ts = tr["coords"], tr["timestamps"]
        try:
            g = eng.match(c, timestamps=ts, radiuses=[sigma] * len(c), tidy=a.tidy, overview="full",
                          geometries="geojson")
        except EngineError as e:
            g = {"code": e.code}
        rows["gpuroute"].append(analyse(g, tr, sigma))
        if srv is not None:
            rows["osrm"].append(analyse(srv.get(_query(c, ts, sigma, a.tidy)), tr, sigma))
    cell = {"sigma_m": sigma, "dt_s": dt, "traces": n, "route_m": [float(min(lengths)), float(max(lengths))],
            "oracle_within_2pct": float(np.mean([r["oracle"] <= WITHIN
                                                                     for r in rows["gpuroute"]])),
            "oracle_mean_error": float(np.mean([r["oracle"] for r in rows["gpuroute"]]))}
    for k, v in rows.items():
        if v:
            cell[k] = summarise(v)
    if a.per_trace:
        cell["per_trace"] = rows
    return cell


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              timeout=10).stdout.strip() or None
    except OSError:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extracts", default="monaco,andorra,helsinki")
    ap.add_argument("--sigmas", default="5,10,20")
    ap.add_argument("--steps", default="1,5,10")
    ap.add_argument("--traces", type=int, default=60, help="traces per cell (default 60)")
    ap.add_argument("--quick", action="store_true", help="12 traces per cell, Monaco only")
    ap.add_argument("--min-m", type=float, default=2000.0)
    ap.add_argument("--max-m", type=float, default=4000.0)
    ap.add_argument("--max-points", type=int, default=1000)
    ap.add_argument("--short-traces", type=int, default=None,
                    help="traces of benchmarks/match.py's short batch (default: --traces x 3; 0: skip)")
    ap.add_argument("--tidy", action="store_true")
    ap.add_argument("--noise-sigmas", type=float, default=None,
                    help="gpuroute's engine.services.match.NOISE_SIGMAS for this run (0: every point matched, as "
                         "before the dense-trace groups; default: the module's)")
    ap.add_argument("--no-osrm", action="store_true")
    ap.add_argument("--per-trace", action="store_true", help="keep every trace's analysis in the JSON")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.quick:
        a.traces = 12
        a.extracts = "monaco"
    sigmas = [float(x) for x in a.sigmas.split(",")]
    steps = [float(x) for x in a.steps.split(",")]
    n_short = a.traces * 3 if a.short_traces is None else a.short_traces

    from gpuroute.engine import Engine
    from gpuroute.engine.services import match as match_service

    if a.noise_sigmas is not None:
        match_service.NOISE_SIGMAS = a.noise_sigmas
    bindir = None if a.no_osrm else osrm_bin()
    lua = car_lua(bindir)
    date = datetime.date.today().isoformat()
    out = {"suite": "match_quality", "device": f"cpu ({platform.processor() or platform.machine()}, "
           f"{os.cpu_count()} cores)", "commit": commit(), "date": date, "tidy": a.tidy,
           "noise_sigmas": match_service.NOISE_SIGMAS, "dense_step": match_service.DENSE_STEP,
           "route_m": [a.min_m, a.max_m], "max_points": a.max_points, "osrm": bindir is not None,
           "extracts": {}, "skipped": {}}
    t_start = time.perf_counter()
    for name in a.extracts.split(","):
        pbf = EXTRACTS[name]
        if not pbf.is_file():
            out["skipped"][name] = f"{pbf} not found"
            continue
        eng = Engine.open(gpuroute_dataset(name, pbf, lua))
        eng.limits["max_locations_map_matching"] = a.max_points + 10
        srv = osrm_server(name, pbf, lua, bindir, a.max_points) if bindir is not None else None
        try:
            cells = []
            for sigma in sigmas:
                for dt in steps:
                    rng = np.random.default_rng([22, list(EXTRACTS).index(name), int(sigma), int(dt)])
                    cells.append(run_cell(eng, srv, rng, sigma, dt, a.traces, a, min_m=a.min_m, max_m=a.max_m,
                                          max_points=a.max_points))
                    print(json.dumps({k: cells[-1][k] for k in ("sigma_m", "dt_s", "oracle_within_2pct")}
                                     | {k: cells[-1][k]["within_2pct"] for k in ("gpuroute", "osrm")
                                        if k in cells[-1]}), file=sys.stderr, flush=True)
            res = {"cells": cells}
            if name == "monaco" and n_short:
                rng = np.random.default_rng([22, 99])
                res["short_batch"] = run_cell(eng, srv, rng, 10.0, 5.0, n_short, a, min_m=200.0, max_m=1e9,
                                              max_points=40)
            out["extracts"][name] = res
        finally:
            if srv is not None:
                srv.close()
    out["wall_s"] = time.perf_counter() - t_start
    text = json.dumps(out, indent=1)
    path = Path(a.json) if a.json else ROOT / "benchmarks" / "results" / f"match_quality_{date}_cpu-2core.json"
    path.write_text(text + "\n")
    print(table(out))
    print(f"written {path}")
    return 0


def table(out):
    """A Markdown table of a result."""
    lines = ["| extract | sigma m | dt s | traces | oracle within 2 % | gpuroute within / mean / p95 | misses | "
             "osrm within / mean / p95 | osrm misses |", "|---|---|---|---|---|---|---|---|---|"]
    for name, res in out["extracts"].items():
        cells = list(res["cells"]) + ([dict(res["short_batch"], short=True)] if "short_batch" in res else [])
        for c in cells:
            row = [name + (" (short batch)" if c.get("short") else ""), f"{c['sigma_m']:g}", f"{c['dt_s']:g}",
                   str(c["traces"]), f"{100 * c['oracle_within_2pct']:.0f} %"]
            for k in ("gpuroute", "osrm"):
                if k in c:
                    s = c[k]
                    row += [f"{100 * s['within_2pct']:.0f} % / {100 * s['mean_error']:.2f} % / "
                            f"{100 * s['p95_error']:.1f} %", ", ".join(f"{x} {v}" for x, v in sorted(s["misses"].items()))]
                else:
                    row += ["-", "-"]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
