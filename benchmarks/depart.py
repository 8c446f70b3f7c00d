"""Benchmark suite: what ``depart_at=`` costs (issue 22, deliverable 2; :mod:`gpuroute.engine.timeslots`).

The dataset: ``gpuroute build monaco -o out/depart/monaco --cell-sizes 64,1024`` (built once), with a time
profile of 96 slots a day (rush hours on primary/secondary/tertiary roads on weekdays, a weekend speed on
primary roads; written to ``out/depart/profile.csv``). On one engine:

* ``plain`` and ``depart``: the medians of ``--routes`` routes between the same random pairs without and
  with ``depart_at`` in a rush slot whose metric is customized already (the two interleaved, pair by pair,
  so that load on the machine hits both alike); ``ratio`` = depart / plain (issue 22's target: <= 1.2);
* ``first``: the first route of each of ``--slots`` other slots (one whole customization each, cache
  empty for that slot), and its parts: ``slot_metric`` (the slot's arc costs from the profile and the
  current metric) and ``customize`` (:meth:`gpuroute.crp.Overlay.customized_state` of that metric);
* ``table``: a ``--table`` x ``--table`` table without and with ``depart_at`` (cached slot), medians of 20;
* ``bytes_per_metric``: the memory of one cached slot metric;
* ``td`` (``--td N``): what the slot-at-departure model misses, on N routes leaving between 07:40 and 08:10
  (across the profile's 08:00 boundary): each route's arcs re-timed along the way (each arc at the cost of
  the slot in which it is entered: ``td_eta``), against the time-dependent optimum from a time-dependent
  Dijkstra on the turn graph with the same entry-time costs (``td_opt``; exact where the costs are FIFO).
  ``eta_error`` = |slot-at-departure duration - td_eta| / td_eta, ``route_gap`` = (td_eta - td_opt) / td_opt.

Times are wall-clock seconds (``time.perf_counter``) in this process after warm-up requests (numba's
kernels loaded); the customization runs on the device ``/customize`` uses (the GPU where one is usable).

Usage (from the repo root):
    .venv/bin/python benchmarks/depart.py [--routes 300] [--slots 5] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

OUT = ROOT / "out" / "depart"

PROFILE = """\
# benchmarks/depart.py: rush hours in Monaco, 96 slots a day
# timezone: Europe/Monaco
# slot_minutes: 15
day,start,end,road_class,speed_kmh,factor
weekday,07:00,08:00,primary,18,
weekday,08:00,09:00,primary,12,
weekday,09:00,09:30,primary,20,
weekday,07:00,09:30,secondary,,2.2
weekday,07:00,09:30,tertiary,,1.6
weekday,16:30,17:30,primary,20,
weekday,17:30,18:30,primary,14,
weekday,16:30,18:30,secondary,,1.9
weekday,12:00,13:00,residential,,1.3
weekend,10:00,19:00,primary,25,
"""


def dataset():
    from gpuroute.cli.main import main
    from gpuroute.engine.dataset import drop_traffic, is_dataset

    d = OUT / "monaco"
    if not is_dataset(d):
        OUT.mkdir(parents=True, exist_ok=True)
        assert main(["build", "monaco", "-o", str(d), "--cell-sizes", "64,1024"]) == 0
    drop_traffic(d)
    p = OUT / "profile.csv"
    p.write_text(PROFILE)
    return d, p


def points(e, k, seed=22):
    import numpy as np

    s = e.segments
    rng = np.random.default_rng(seed)
    pick = rng.choice(s.n_segments, 2 * k)
    f = rng.uniform(0.3, 0.7, 2 * k)
    lon = s.lon_u[pick] + f * (s.lon_v[pick] - s.lon_u[pick])
    lat = s.lat_u[pick] + f * (s.lat_v[pick] - s.lat_u[pick])
    return [[(float(lon[2 * i]), float(lat[2 * i])), (float(lon[2 * i + 1]), float(lat[2 * i + 1]))] for i in range(k)]


def timed(fn, *a, **kw):
    t0 = time.perf_counter()
    try:
        fn(*a, **kw)
    except Exception as err:  # noqa: BLE001 - NoRoute counts as an answer
        if getattr(err, "code", None) not in ("NoRoute", "NoSegment"):
            raise
    return time.perf_counter() - t0


def td_compare(e, pairs):
    """The time-dependent comparison of the module notes (a plain-Python label-setting search: seconds per
    route on Monaco)."""
    import heapq
    import math

    import numpy as np

    s = e._time_slots
    prof = s.profile
    ov = e.overlay
    tr = ov.turns
    first = np.asarray(tr.first, dtype=np.int64)
    out_arc = np.asarray(tr.out_arc, dtype=np.int64)
    cur = np.asarray(ov.arc_cost, dtype=np.float64)
    pen = np.asarray(ov.turn_cost, dtype=np.float64) - cur[out_arc]  # turn penalty (time independent)
    allowed = np.asarray(ov.turn_cost) >= 0
    scale = e._traffic.snapshot().scale  # seconds per metric unit
    costs = {}

    def cost_at(t):  # arc costs (metric units) of the slot containing t seconds after Thursday 00:00
        k = int(t // (prof.slot_minutes * 60))
        d, sl = 3 + k // prof.n_slots, k % prof.n_slots
        v = int(prof.variant[d % 7, sl])
        if v not in costs:
            met, _ = s.slot_metric(v, ov._need_state())
            costs[v] = cur if met is None else np.asarray(met.arc_cost, dtype=np.float64)
        return costs[v]

    ids = np.asarray(e.graph.node_ids, dtype=np.int64)
    pair = {(int(u), int(v)): k for k, (u, v) in enumerate(zip(ids[e.graph.tail], ids[e.graph.head], strict=True))}
    rows = []
    rng = np.random.default_rng(5)
    for c in pairs:
        t0 = float(rng.uniform(7 * 3600 + 40 * 60, 8 * 3600 + 10 * 60))
        hh, mm, ss = int(t0 // 3600), int(t0 % 3600 // 60), t0 % 60
        iso = f"2026-11-26T{hh:02d}:{mm:02d}:{ss:06.3f}"
        try:
            r = e.route(c, depart_at=iso, annotations=["nodes"], overview="false")["routes"][0]
        except Exception as err:  # noqa: BLE001
            if getattr(err, "code", None) in ("NoRoute", "NoSegment"):
                continue
            raise
        nodes = r["legs"][0]["annotation"]["nodes"]
        arcs = [pair[(u, v)] for u, v in zip(nodes[:-1], nodes[1:], strict=True)]
        ph = e._snap(c)
        (a, fa), (b, fb) = _phantom_arcs(ph, arcs)
        # the route's own arcs re-timed: each at the slot in which it is entered
        t = t0 + (1.0 - fa) * cost_at(t0)[a] * scale
        for i, (x, y) in enumerate(zip(arcs[:-1], arcs[1:], strict=True)):
            j = first[x] + int(np.flatnonzero(out_arc[first[x]:first[x + 1]] == y)[0])
            frac = fb if i == len(arcs) - 2 else 1.0
            t += pen[j] * scale + frac * cost_at(t)[y] * scale
        eta = t - t0 if len(arcs) > 1 else (fb - fa) * cost_at(t0)[a] * scale
        # time-dependent Dijkstra from the source phantom (labels: time at the head of an arc)
        best = {}
        heap = []
        for aa, ff in zip(*ph.options(0), strict=True):
            aa = int(aa)
            heapq.heappush(heap, (t0 + (1.0 - ff) * cost_at(t0)[aa] * scale, aa))
        targets = {int(x): float(f) for x, f in zip(*ph.options(1), strict=True)}
        opt = math.inf
        for aa, ff in zip(*ph.options(0), strict=True):
            if int(aa) in targets and ff <= targets[int(aa)]:
                opt = min(opt, (targets[int(aa)] - ff) * cost_at(t0)[int(aa)] * scale)
        while heap:
            tt, x = heapq.heappop(heap)
            if x in best or tt - t0 >= opt:
                continue
            best[x] = tt
            for j in range(first[x], first[x + 1]):
                if not allowed[j]:
                    continue
                y = int(out_arc[j])
                enter = tt + pen[j] * scale
                cy = cost_at(enter)[y] * scale
                if y in targets:
                    opt = min(opt, enter + targets[y] * cy - t0)
                if y not in best:
                    heapq.heappush(heap, (enter + cy, y))
        rows.append({"depart_at": iso, "slot_duration_s": r["duration"], "td_eta_s": eta, "td_opt_s": opt})
    eta_err = [abs(x["slot_duration_s"] - x["td_eta_s"]) / x["td_eta_s"] for x in rows if x["td_eta_s"] > 0]
    gap = [(x["td_eta_s"] - x["td_opt_s"]) / x["td_opt_s"] for x in rows if x["td_opt_s"] > 0]
    res = {"routes": len(rows), "eta_error_median": float(np.median(eta_err)), "eta_error_max": float(max(eta_err)),
           "route_gap_median": float(np.median(gap)), "route_gap_max": float(max(gap)),
           "route_gap_min": float(min(gap)), "rows": rows}
    print(f"time-dependent comparison over {len(rows)} routes leaving 07:40-08:10: slot-at-departure duration vs the "
          f"same arcs re-timed: median {res['eta_error_median']:.1%}, max {res['eta_error_max']:.1%}; that route vs "
          f"the time-dependent optimum: median {res['route_gap_median']:.2%}, max {res['route_gap_max']:.2%}")
    return res


def _phantom_arcs(ph, arcs):
    """The (arc, fraction) options of the route's first and last arcs at its two waypoints."""
    a_opts = dict(zip(ph.options(0)[0].tolist(), ph.options(0)[1].tolist(), strict=True))
    b_opts = dict(zip(ph.options(1)[0].tolist(), ph.options(1)[1].tolist(), strict=True))
    return (arcs[0], a_opts[arcs[0]]), (arcs[-1], b_opts[arcs[-1]])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--routes", type=int, default=300)
    ap.add_argument("--slots", type=int, default=5)
    ap.add_argument("--table", type=int, default=25)
    ap.add_argument("--td", type=int, default=60, metavar="N",
                    help="routes for the time-dependent comparison (0: none)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from gpuroute.backend import resolve_device
    from gpuroute.engine import Engine
    from gpuroute.engine.timeslots import parse_depart_at

    d, prof = dataset()
    out = {"dataset": str(d), "profile": PROFILE, "device": resolve_device("auto"),
           "cpu": platform.processor() or platform.machine(), "routes": args.routes,
           "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
           "numba_threads": os.environ.get("NUMBA_NUM_THREADS"),
           "loadavg_before": os.getloadavg() if hasattr(os, "getloadavg") else None}
    try:
        out["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                       cwd=ROOT).stdout.strip()
    except OSError:
        out["commit"] = None
    e = Engine.open(d, time_profile=prof)
    s = e._time_slots
    pairs = points(e, args.routes + 1)
    rush = "2026-11-26T08:10"  # Thursday, the 08:00-09:00 primary row
    for _ in range(3):  # warm-up: kernels loaded, the rush slot customized
        e.route(pairs[0], overview="false")
        e.route(pairs[0], overview="false", depart_at=rush)
    plain, depart = [], []
    for c in pairs[1:]:
        plain.append(timed(e.route, c, overview="false"))
        depart.append(timed(e.route, c, overview="false", depart_at=rush))
    out["plain_median_s"] = statistics.median(plain)
    out["depart_median_s"] = statistics.median(depart)
    out["ratio"] = out["depart_median_s"] / out["plain_median_s"]
    print(f"route: plain {out['plain_median_s'] * 1e3:.3f} ms, depart_at (slot cached) "
          f"{out['depart_median_s'] * 1e3:.3f} ms: {out['ratio']:.3f}x (median of {args.routes})")
    # first request of a slot: a slot metric and one customization
    times = ["2026-11-26T07:10", "2026-11-26T09:10", "2026-11-26T16:40", "2026-11-26T17:40", "2026-11-26T12:10",
             "2026-11-28T12:00"][:args.slots]
    firsts = []
    for t in times:
        v = s.resolve(parse_depart_at(t))[0]
        base = e.overlay._need_state()
        t0 = time.perf_counter()
        met, _ = s.slot_metric(v, base)
        t_metric = time.perf_counter() - t0
        t0 = time.perf_counter()
        e.overlay.customized_state(met)
        t_cust = time.perf_counter() - t0
        n0 = s.stats["customizations"]
        first = timed(e.route, pairs[1], overview="false", depart_at=t)
        assert s.stats["customizations"] == n0 + 1
        firsts.append({"depart_at": t, "first_s": first, "slot_metric_s": t_metric, "customize_s": t_cust})
        print(f"first route of slot {t}: {first * 1e3:.1f} ms (slot metric {t_metric * 1e3:.2f} ms, customization "
              f"{t_cust * 1e3:.2f} ms)")
    out["first"] = firsts
    out["first_median_s"] = statistics.median(f["first_s"] for f in firsts)
    out["customize_median_s"] = statistics.median(f["customize_s"] for f in firsts)
    out["slot_metric_median_s"] = statistics.median(f["slot_metric_s"] for f in firsts)
    # a table
    pts = [p for c in pairs[: (args.table + 1) // 2] for p in c][:args.table]
    e.table(pts)
    e.table(pts, depart_at=rush)
    tp, td = [], []
    for _ in range(20):
        tp.append(timed(e.table, pts))
        td.append(timed(e.table, pts, depart_at=rush))
    out["table"] = {"n": len(pts), "plain_median_s": statistics.median(tp), "depart_median_s": statistics.median(td)}
    print(f"table {len(pts)}x{len(pts)}: plain {statistics.median(tp) * 1e3:.2f} ms, depart_at "
          f"{statistics.median(td) * 1e3:.2f} ms")
    info = s.info()
    out["bytes_per_metric"] = info["bytes_per_metric"]
    out["stats"] = info["stats"]
    out["variants"] = info["variants"]
    print(f"one cached slot metric: {info['bytes_per_metric'] / 2**20:.2f} MiB; {info['variants']} distinct slot "
          f"metrics in the profile; {info['stats']}")
    if args.td:
        out["td"] = td_compare(e, points(e, args.td, seed=7))
    out["loadavg_after"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
