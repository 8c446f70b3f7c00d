"""``gpuroute trip``: the fastest order to visit a list of stops, routed (:meth:`gpuroute.engine.Engine.trip`,
OSRM's ``/trip`` service: a travelling salesman tour over the duration table of the stops snapped onto road
segments, by :func:`gpuroute.tours.tsp`).

The stops are a CSV file of ``LON,LAT`` lines (a header line is optional; blank lines and ``#`` comments
are skipped) or a ``.json`` file holding a list of ``[lon, lat]`` pairs (or an object with such a list
under ``"coordinates"``). The answer is the visiting order, the total duration and distance and one line
per leg; ``--json`` prints the OSRM-shaped response instead."""
from __future__ import annotations

import json
import os
import time

from .common import EXIT_NO_ROUTE, EXIT_OK, CLIError, depart_at_arg, fmt_ms, open_engine, print_rows, progress

#: The graph used without ``--graph`` (the shipped extract ``gpuroute serve`` serves by default).
DEFAULT_TRIP_GRAPH = "monaco"


def read_stops(path):
    """``[(lon, lat), ...]`` from a CSV file of ``LON,LAT`` lines or a ``.json`` list of pairs.

    Raises
    ------
    CLIError
        A missing file, JSON that is not a list of two-number pairs, fewer than two stops.
    ParseError
        A malformed CSV line (naming the file and line).
    """
    from .table import read_points

    if not os.path.exists(path):
        raise CLIError(f"--stops {path}: no such file")
    if path.lower().endswith(".json"):
        try:
            with open(path, encoding="utf-8") as f:
                obj = json.load(f)
        except (ValueError, UnicodeDecodeError) as e:
            raise CLIError(f"--stops {path}: not JSON ({e})") from None
        if isinstance(obj, dict):
            obj = obj.get("coordinates")
        if not isinstance(obj, list):
            raise CLIError(f"--stops {path}: expected a JSON list of [lon, lat] pairs")
        stops = []
        for i, p in enumerate(obj):
            ok = isinstance(p, (list, tuple)) and len(p) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in p)
            if not ok:
                raise CLIError(f"--stops {path}: entry {i} is {str(p)[:60]}, not a [lon, lat] pair")
            stops.append((float(p[0]), float(p[1])))
    else:
        x, y, _ = read_points(path)
        stops = list(zip(x.tolist(), y.tolist(), strict=True))
    if len(stops) < 2:
        raise CLIError(f"--stops {path}: a trip needs at least two stops, got {len(stops)}")
    return stops


def _duration(s):
    s = float(s)
    if s < 60:
        return f"{s:.1f} s"
    h, rest = divmod(int(round(s)), 3600)
    m, sec = divmod(rest, 60)
    return f"{h} h {m:02d} min {sec:02d} s" if h else f"{m} min {sec:02d} s"


def _distance(m):
    return f"{m / 1000:,.2f} km" if m >= 1000 else f"{m:,.0f} m"


def run(args):
    from ..engine import EngineError

    stops = read_stops(args.stops)
    spec = args.graph or DEFAULT_TRIP_GRAPH
    engine, t_open = open_engine(spec, time_profile=args.time_profile, depart_at=args.depart_at)
    source = "first" if args.source is None and not args.roundtrip else (args.source or "any")
    destination = "last" if args.destination is None and not args.roundtrip else (args.destination or "any")
    t0 = time.perf_counter()
    try:
        with progress(f"trip through {len(stops)} stops"):
            res = engine.trip(stops, roundtrip=args.roundtrip, source=source, destination=destination,
                              steps=args.json and args.steps, geometries=args.geometries,
                              overview="full" if args.json else "false", time_limit=args.time_limit,
                              depart_at=args.depart_at)
    except EngineError as e:
        if e.code in ("NoTrips", "NoRoute"):
            print(f"gpuroute trip: no trip: {e.message}")
            return EXIT_NO_ROUTE
        raise CLIError(f"{e.code}: {e.message}") from None
    t_trip = time.perf_counter() - t0
    if args.json:
        print(json.dumps(res))
        return EXIT_OK
    trip = res["trips"][0]
    wps = res["waypoints"]
    order = sorted(range(len(stops)), key=lambda i: wps[i]["waypoint_index"])
    visit = order + ([order[0]] if args.roundtrip else [])
    rows = [("graph", f"{engine.graph.name} ({engine.graph.n_nodes:,} nodes, weight {engine.weight})"),
            ("stops", f"{len(stops)} from {args.stops}"),
            ("trip", ("roundtrip" if args.roundtrip else "open")
             + f", source {source}, destination {destination}"),
            ("order", " -> ".join(str(i) for i in visit) + "  (stop numbers from 0, in file order)"),
            ("duration", f"{_duration(trip['duration'])} ({trip['duration']:.1f} s)"),
            ("distance", f"{_distance(trip['distance'])} ({trip['distance']:.1f} m)"),
            ("time", f"trip {fmt_ms(t_trip)} (open {fmt_ms(t_open)})")]
    print_rows(rows)
    for k, leg in enumerate(trip["legs"]):
        a, b = visit[k], visit[k + 1]
        name_a = wps[a]["name"] or "(unnamed)"
        name_b = wps[b]["name"] or "(unnamed)"
        print(f"  leg {k + 1:>3}: {a:>3} {name_a} -> {b:>3} {name_b}: {_duration(leg['duration'])}, "
              f"{_distance(leg['distance'])}")
    return EXIT_OK


def add_parser(sub, common):
    t = sub.add_parser("trip", parents=[common], help="fastest order to visit stops (OSRM's trip service)",
                       description="Visit every stop once in the fastest order (a travelling salesman tour "
                                   "over the duration table of the stops snapped onto road segments), then "
                                   "route it. FILE: a CSV of LON,LAT lines (header optional) or a .json list "
                                   "of [lon, lat] pairs. Exit code 1 when no trip reaches every stop.")
    t.add_argument("--graph", metavar="DIR|GRAPH", default=None,
                   help=f"a dataset directory (gpuroute build), a graph file or a shipped graph name "
                        f"(default {DEFAULT_TRIP_GRAPH})")
    t.add_argument("--stops", required=True, metavar="FILE", help="the stops: CSV of LON,LAT or .json list")
    t.add_argument("--roundtrip", dest="roundtrip", action="store_true", default=True,
                   help="return to the first stop (the default)")
    t.add_argument("--no-roundtrip", dest="roundtrip", action="store_false",
                   help="an open trip from the first stop to the last one (OSRM: source=first, "
                        "destination=last)")
    t.add_argument("--source", choices=("any", "first"), default=None,
                   help="first: start at the file's first stop (default any; first with --no-roundtrip)")
    t.add_argument("--destination", choices=("any", "last"), default=None,
                   help="last: visit the file's last stop last (default any; last with --no-roundtrip)")
    t.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="seconds the tour search may take past config.TOUR_EXACT_MAX_N stops (up to it the "
                        "order is exact and no search runs; default: the service's, "
                        "config.SERVE_TRIP_TIME_PER_STOP_S x stops within SERVE_TRIP_TIME_MIN_S.._MAX_S)")
    t.add_argument("--time-profile", dest="time_profile", metavar="FILE", default=None,
                   help="a time profile (CSV or Parquet) for --depart-at (needs a dataset directory as --graph; "
                        "overrides the one stored in it by gpuroute timeprofile)")
    t.add_argument("--depart-at", dest="depart_at", metavar="ISO8601", default=None, type=depart_at_arg,
                   help="departure time, e.g. 2026-11-26T08:00 (local time in the profile's zone) or "
                        "2026-11-26T08:00+01:00: the trip on that time slot's metric (slot-at-departure)")
    t.add_argument("--json", action="store_true", help="print the OSRM-shaped /trip response (JSON)")
    t.add_argument("--steps", action="store_true", help="with --json: turn-by-turn steps per leg")
    t.add_argument("--geometries", choices=("polyline", "polyline6", "geojson"), default="geojson",
                   help="with --json: the geometry encoding (default geojson)")
    t.set_defaults(func=run)
    return t
