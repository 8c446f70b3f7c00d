"""``gpuroute match``: map matching of a GPS trace (:meth:`gpuroute.engine.Engine.match`, OSRM's ``/match``
service: a hidden Markov model over the road segments near each point).

The trace is a CSV file of ``LON,LAT[,TIMESTAMP[,RADIUS]]`` lines (TIMESTAMP: integer seconds, RADIUS: the
point's GPS standard deviation in metres; either on every line or on none; a header line is optional, blank
lines and ``#`` comments are skipped). The answer is one line per matching (its length, duration and
confidence) and the count of points matched; ``--json`` prints the OSRM-shaped response instead."""
from __future__ import annotations

import json
import os
import time

from .common import EXIT_NO_ROUTE, EXIT_OK, CLIError, fmt_ms, print_rows, progress

#: The graph used without ``--graph``.
DEFAULT_MATCH_GRAPH = "monaco"


def read_trace(path):
    """``(coords [(lon, lat)], timestamps [int] or None, radiuses [float] or None)`` of a trace CSV.

    Raises
    ------
    CLIError
        A missing file; a line that is not 2 to 4 numbers, or whose column count differs from the first
        line's (naming the file and line); fewer than two points.
    """
    if not os.path.exists(path):
        raise CLIError(f"--trace {path}: no such file")
    rows, width = [], None
    with open(path, encoding="utf-8") as f:
        for i, raw in enumerate(f, start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(",")]
            try:
                vals = [float(p) for p in parts]
                if not 2 <= len(vals) <= 4:
                    raise ValueError
            except ValueError:
                if not rows and width is None:  # a header
                    width = -1
                    continue
                raise CLIError(f"{path}:{i}: expected LON,LAT[,TIMESTAMP[,RADIUS]] numbers, got {line[:60]!r}") \
                    from None
            if rows and len(vals) != len(rows[0]):
                raise CLIError(f"{path}:{i}: {len(vals)} columns, the first point has {len(rows[0])}")
            if len(vals) >= 3 and vals[2] != int(vals[2]):
                raise CLIError(f"{path}:{i}: the timestamp {parts[2]!r} is not an integer number of seconds")
            rows.append(vals)
    if len(rows) < 2:
        raise CLIError(f"--trace {path}: a trace needs at least two points, got {len(rows)}")
    coords = [(r[0], r[1]) for r in rows]
    ts = [int(r[2]) for r in rows] if len(rows[0]) >= 3 else None
    rad = [r[3] for r in rows] if len(rows[0]) >= 4 else None
    return coords, ts, rad


def run(args):
    from ..engine import Engine, EngineError

    coords, ts, rad = read_trace(args.trace)
    spec = args.graph or DEFAULT_MATCH_GRAPH
    t0 = time.perf_counter()
    with progress(f"opening {spec}"):
        engine = Engine.open(spec)
    t_open = time.perf_counter() - t0
    if args.max_points is not None:
        engine.limits["max_locations_map_matching"] = int(args.max_points)
    t0 = time.perf_counter()
    try:
        with progress(f"matching {len(coords)} points"):
            res = engine.match(coords, timestamps=ts, radiuses=rad, gaps=args.gaps, tidy=args.tidy,
                               steps=args.json and args.steps, geometries=args.geometries,
                               overview="full" if args.json else "false")
    except EngineError as e:
        if e.code in ("NoMatch", "NoSegment"):
            print(f"gpuroute match: no match: {e.message}")
            return EXIT_NO_ROUTE
        raise CLIError(f"{e.code}: {e.message}") from None
    t_match = time.perf_counter() - t0
    if args.json:
        print(json.dumps(res))
        return EXIT_OK
    matched = sum(tp is not None for tp in res["tracepoints"])
    rows = [("graph", f"{engine.graph.name} ({engine.graph.n_nodes:,} nodes, weight {engine.weight})"),
            ("trace", f"{len(coords)} points from {args.trace}" + (", timestamps" if ts else "")
             + (", radiuses" if rad else "")),
            ("matched", f"{matched} of {len(coords)} points in {len(res['matchings'])} matching(s)"),
            ("time", f"match {fmt_ms(t_match)} (open {fmt_ms(t_open)})")]
    print_rows(rows)
    for k, m in enumerate(res["matchings"]):
        dur = "" if m["duration"] is None else f", {m['duration']:.1f} s"
        print(f"  matching {k}: {m['distance']:.1f} m{dur}, {len(m['legs'])} legs, confidence {m['confidence']:.3f}")
    return EXIT_OK


def add_parser(sub, common):
    t = sub.add_parser("match", parents=[common], help="map matching of a GPS trace (OSRM's match service)",
                       description="Match a GPS trace onto the roads it most likely followed (a hidden Markov "
                                   "model, Newson and Krumm 2009, as OSRM's /match). FILE: a CSV of "
                                   "LON,LAT[,TIMESTAMP[,RADIUS]] lines. Exit code 1 when nothing matches.")
    t.add_argument("--graph", metavar="DIR|GRAPH", default=None,
                   help=f"a dataset directory (gpuroute build), a graph file or a shipped graph name "
                        f"(default {DEFAULT_MATCH_GRAPH})")
    t.add_argument("--trace", required=True, metavar="FILE", help="the trace: CSV of LON,LAT[,TIMESTAMP[,RADIUS]]")
    t.add_argument("--gaps", choices=("split", "ignore"), default="split",
                   help="split the trace at large timestamp gaps (default) or not")
    t.add_argument("--tidy", action="store_true", help="drop points closer than 15 m / 5 s to the last one kept")
    t.add_argument("--max-points", type=int, default=None, metavar="N",
                   help="the most points of one trace (default config.SERVE_MAX_LOCATIONS_MAP_MATCHING)")
    t.add_argument("--json", action="store_true", help="print the OSRM-shaped /match response (JSON)")
    t.add_argument("--steps", action="store_true", help="with --json: turn-by-turn steps per leg")
    t.add_argument("--geometries", choices=("polyline", "polyline6", "geojson"), default="geojson",
                   help="with --json: the geometry encoding (default geojson)")
    t.set_defaults(func=run)
    return t
