"""``gpuroute route``: snap two points and query one shortest path (:func:`gpuroute.geo.nearest_node` +
:func:`gpuroute.query.shortest_path`, or with ``--ch DIR`` a saved contraction hierarchy's
:meth:`~gpuroute.ch.ContractionHierarchy.route`, or with ``--overlay DIR`` a customized CRP overlay's
:meth:`~gpuroute.Overlay.route`, turn-aware); text or GeoJSON (:mod:`gpuroute.geo.geojson`).

With ``--alternatives N`` or ``--depart-at ISO8601`` the route is the engine's (:meth:`gpuroute.engine.Engine.route`
on ``--graph``, best a dataset directory: the HTTP API's ``/route`` with ``alternatives=N`` / ``depart_at``, its
checks, limits and error codes; ``--depart-at`` reads the value as the HTTP API does,
:func:`gpuroute.cli.common.depart_at_arg`, and needs a time profile: ``--time-profile FILE`` or the one stored in the
dataset directory, :mod:`gpuroute.cli.timeprofile`)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time

from .common import (
    DEFAULT_GRAPH,
    DEVICES,
    EXIT_NO_ROUTE,
    EXIT_OK,
    METRICS,
    CLIError,
    check_device,
    check_point,
    depart_at_arg,
    describe_node,
    external_id,
    fmt_int,
    graph_line,
    id_label,
    load,
    log,
    one_line,
    open_ch,
    open_engine,
    parse_point,
    pick_weight,
    print_rows,
    progress,
)

#: The default route without ``--from``/``--to``: two landmarks of the NY network (name, lon, lat).
LANDMARKS = (
    ("Times Square, Manhattan", -73.9855, 40.7580),
    ("Grand Army Plaza, Prospect Park, Brooklyn", -73.9701, 40.6743),
)

#: Node ids shown at each end of an abbreviated path.
PATH_HEAD = 5


def parse_radius(text):
    """``--radius``: a snap distance >= 0 (``inf``: unlimited).

    Raises
    ------
    argparse.ArgumentTypeError
        Not a number, NaN or negative (naming the value).
    """
    try:
        r = float(text)
    except ValueError:
        r = math.nan
    if not r >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"--radius {text}: expected a distance >= 0 (metres; planar units on planar "
                                         "graphs)")
    return r


def _bbox_hint(graph, x, y):
    """'; ... did you swap them?' when swapping the two would land inside a lon/lat graph's box."""
    if graph.coords is None or graph.n_nodes == 0 or graph.is_planar:
        return ""
    lo, hi = graph.coords.min(axis=0), graph.coords.max(axis=0)
    if lo[0] <= y <= hi[0] and lo[1] <= x <= hi[1]:
        return "; the order is LON,LAT - did you swap them?"
    return ""


def run(args):
    from ..geo import OutOfBoundsError, SnapError, nearest_node
    from ..query import shortest_path
    from ..query.p2p import compile_kernels

    if (args.from_ is None) != (args.to is None):
        raise CLIError("give both --from and --to, or neither (for the default route on the NY network)")
    default_route = args.from_ is None
    points = list(LANDMARKS) if default_route else [(None, *args.from_), (None, *args.to)]
    if args.alternatives is not None or args.depart_at is not None or args.time_profile is not None:
        return _run_engine(args, points)
    ch = overlay = None
    unit = None
    if args.ch is not None and args.overlay is not None:
        raise CLIError("give --ch or --overlay, not both")
    if args.overlay is not None:
        overlay, graph, weight, unit, t_load = _open_overlay(args)
    elif args.ch is not None:

        if args.method is not None:
            raise CLIError(f"--method {args.method} does not apply with --ch (the route is a CH query)")
        if args.device == "gpu":
            raise CLIError("--ch routes on the CPU (a bidirectional CH search); leave --device out")
        ch, graph, t_load = open_ch(args.ch, args.graph)
        weight = ch.weight
        if args.metric is not None and METRICS[args.metric] != weight:
            raise CLIError(f"--metric {args.metric} asks for weight {METRICS[args.metric]!r}, but the hierarchy in "
                           f"{args.ch} was built for {weight!r}")
    else:
        check_device(args.device)
        graph, t_load = load(args.graph or DEFAULT_GRAPH, METRICS.get(args.metric))
        weight = pick_weight(graph, args.metric)
    if graph.coords is None:
        raise CLIError(f"graph {graph.name!r} has no node coordinates: cannot snap points to it")

    t0 = time.perf_counter()
    snapped = []
    for (name, x, y), opt in zip(points, ("--from", "--to"), strict=True):
        check_point(graph, (x, y), opt)
        try:
            node, offset = nearest_node(graph, x, y, snapping=args.snapping, radius=args.radius)
        except OutOfBoundsError as e:
            what = f"landmark {name!r} ({x:g},{y:g})" if default_route else f"{opt} {x:g},{y:g}"
            x0, y0, x1, y1 = e.bbox
            axes = ("x", "y") if graph.is_planar else ("lon", "lat")
            msg = (f"{what} lies outside the bounding box of graph {graph.name!r} "
                   f"({axes[0]} {x0:.4f} .. {x1:.4f}, {axes[1]} {y0:.4f} .. {y1:.4f})")
            msg += (" (the default route is on the NY network; give --from and --to for this graph)"
                    if default_route else _bbox_hint(graph, x, y))
            raise CLIError(msg) from e
        except SnapError as e:
            raise CLIError(f"{opt} {x:g},{y:g}: {one_line(e)}") from e
        snapped.append({"name": name, "query": [x, y], "node": int(node), "offset": float(offset)})
    t_snap = time.perf_counter() - t0

    src, dst = snapped[0]["node"], snapped[1]["node"]
    if ch is not None or overlay is not None:
        index = ch if ch is not None else overlay
        t0 = time.perf_counter()
        index.route(src, dst)  # the first call compiles the query (numba), reported apart from the query
        t_compile = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = index.route(src, dst)
        if overlay is not None:  # the overlay answers in its metric's unit, recorded by gpuroute customize
            res = _overlay_result(res, weight, unit)
    else:
        t_compile = compile_kernels(args.method)  # numba's first-call compilation, reported apart from the query
        t0 = time.perf_counter()
        with progress(f"routing on {graph.name}"):
            res = shortest_path(graph, src, dst, weight=weight, method=args.method, device=args.device)
    t_query = time.perf_counter() - t0
    log.info("route %d -> %d: distance %s, %d arcs, %s settled", src, dst, res.distance, len(res.arcs), res.settled)
    times = {"load": t_load * 1e3, "snap": t_snap * 1e3, "compile": t_compile * 1e3, "query": t_query * 1e3}
    times["total"] = sum(times.values())
    if args.json:
        from ..geo.geojson import route_feature_collection

        fc = route_feature_collection(graph, res, snapped,
                                      properties={"time_ms": {k: round(v, 3) for k, v in times.items()}})
        json.dump(fc, sys.stdout)
        sys.stdout.write("\n")
    else:
        _print_text(graph, weight, snapped, res, times, unit=unit)
    if not res.reachable:
        print(f"gpuroute route: no route: {describe_node(graph, dst)} cannot be reached from "
              f"{describe_node(graph, src)} in {graph.name!r}", file=sys.stderr)
        return EXIT_NO_ROUTE
    return EXIT_OK


def parse_alternatives(text):
    """``--alternatives N``: an integer >= 0 (the HTTP API's ``alternatives=N``; its limit is the engine's).

    Raises
    ------
    argparse.ArgumentTypeError
        Not an integer >= 0 (naming the value).
    """
    t = text.strip()
    if not (t.isascii() and t.isdigit()):
        raise argparse.ArgumentTypeError(f"--alternatives {text}: expected a number of alternative routes >= 0")
    return int(t)


def _run_engine(args, points):
    """``--alternatives`` / ``--depart-at``: the route through :meth:`gpuroute.engine.Engine.route` (the Python
    API and the HTTP API's ``/route``: the same checks, limits and errors), on ``--graph`` (a dataset directory,
    a graph file or a shipped name)."""
    from ..engine import EngineError

    for opt, bad in (("--ch", args.ch), ("--overlay", args.overlay), ("--method", args.method)):
        if bad is not None:
            raise CLIError(f"{opt} does not apply with --alternatives/--depart-at (the route is the engine's: give "
                           "a dataset directory as --graph)")
    if args.device == "gpu":
        raise CLIError("--alternatives/--depart-at route with the engine on the CPU; leave --device out")
    if args.snapping != "default":
        raise CLIError(f"--snapping {args.snapping} does not apply with --alternatives/--depart-at (the engine snaps "
                       "onto road segments, as OSRM)")
    spec = args.graph or DEFAULT_GRAPH
    coords = [(x, y) for _, x, y in points]
    for (x, y), opt in zip(coords, ("--from", "--to"), strict=True):
        if abs(x) > 180 or abs(y) > 90:
            raise CLIError(f"{opt} {x:g},{y:g} is not a position: longitude must be in [-180, 180] and latitude "
                           "in [-90, 90]")
    engine, t_open = open_engine(spec, time_profile=args.time_profile, depart_at=args.depart_at,
                                 weight=METRICS.get(args.metric))
    kw = {"alternatives": 0 if args.alternatives is None else args.alternatives, "depart_at": args.depart_at,
          "geometries": "geojson", "overview": "full"}
    if args.radius is not None:
        kw["radiuses"] = [None if math.isinf(args.radius) else args.radius] * 2
    t0 = time.perf_counter()
    try:
        with progress(f"routing on {engine.graph.name}"):
            res = engine.route(coords, **kw)
    except EngineError as e:
        if e.code == "NoRoute":
            print(f"gpuroute route: no route: {e.message}", file=sys.stderr)
            return EXIT_NO_ROUTE
        raise CLIError(f"{e.code}: {e.message}") from None
    t_query = time.perf_counter() - t0
    names = [name for name, _, _ in points]
    if args.json:
        json.dump(_engine_feature_collection(engine, res, names, coords, args), sys.stdout)
        sys.stdout.write("\n")
        return EXIT_OK
    _print_engine_text(engine, res, names, coords, args, t_open, t_query)
    return EXIT_OK


def _engine_feature_collection(engine, res, names, coords, args):
    """GeoJSON of an engine route: one LineString per route (the shortest first, ``alternative`` false; then
    each alternative) with OSRM's ``duration`` (s), ``distance`` (m), ``weight``, ``weight_name``, and one
    Point per waypoint (the snapped location, ``query``, ``name``, ``snap_distance_m``)."""
    features = []
    for i, r in enumerate(res["routes"]):
        features.append({"type": "Feature", "geometry": r["geometry"],
                         "properties": {"route": i, "alternative": i > 0, "duration": r["duration"],
                                        "distance": r["distance"], "weight": r["weight"],
                                        "weight_name": r["weight_name"]}})
    for role, w, name, q in zip(("source", "target"), res["waypoints"], names, coords, strict=True):
        props = {"role": role, "query": list(q), "street": w.get("name"), "snap_distance_m": w.get("distance")}
        if name:
            props["name"] = name
        features.append({"type": "Feature", "geometry": {"type": "Point", "coordinates": list(w["location"])},
                         "properties": props})
    return {"type": "FeatureCollection", "features": features,
            "properties": {"graph": engine.graph.name, "weight": engine.weight, "reachable": True,
                           "alternatives_asked": 0 if args.alternatives is None else args.alternatives,
                           "depart_at": None if args.depart_at is None else args.depart_at.isoformat()}}


def _print_engine_text(engine, res, names, coords, args, t_open, t_query):
    g = engine.graph
    rows = [("graph", f"{g.name} ({fmt_int(g.n_nodes)} nodes, {fmt_int(g.n_arcs)} arcs; weight {engine.weight})")]
    for label, w, name, (x, y) in zip(("from", "to"), res["waypoints"], names, coords, strict=True):
        rows.append((label, f"{name} ({x:.5f}, {y:.5f})" if name else f"{x:.5f}, {y:.5f}"))
        lon, lat = w["location"]
        street = f" on {w['name']}" if w.get("name") else ""
        rows.append(("", f"-> {lon:.5f}, {lat:.5f}{street}, snapped {w['distance']:,.1f} m away"))
    if args.depart_at is not None:
        tp = engine.info.get("time_profile") or {}
        rows.append(("depart", f"{args.depart_at.isoformat()} (time profile {tp.get('file')}, {tp.get('timezone')}; "
                               "the slot at departure for the whole route)"))
    routes = res["routes"]
    w0 = routes[0]["weight"]
    for i, r in enumerate(routes):
        what = f"{_duration(r['duration'])}, {_distance(r['distance'])} (weight {r['weight']:g} {r['weight_name']}"
        what += ")" if i == 0 or not w0 else f", x{r['weight'] / w0:.3f} the route's)"
        rows.append(("route" if i == 0 else f"alternative {i}", what))
    if args.alternatives:
        rows.append(("", f"{len(routes) - 1} of up to {args.alternatives} alternatives found"))
    rows.append(("time", f"{(t_open + t_query) * 1e3:,.1f} ms (open {t_open * 1e3:,.1f}, query {t_query * 1e3:,.1f})"))
    print_rows(rows)


def _duration(s):
    return "no duration" if s is None else f"{s:,.1f} s"


def _distance(m):
    return f"{m / 1000:,.2f} km" if m >= 1000 else f"{m:,.0f} m"


def _open_overlay(args):
    """``(Overlay, graph, metric name, Unit, load seconds)`` for ``--overlay DIR`` (refusing options that
    do not apply and a customization of another partition)."""
    from ..pipeline.overlay_dir import check_overlay, open_overlay

    if args.method is not None:
        raise CLIError(f"--method {args.method} does not apply with --overlay (the route is a CRP query)")
    if args.device == "gpu":
        raise CLIError("--overlay routes on the CPU (a bidirectional overlay search); leave --device out")
    t0 = time.perf_counter()
    info = check_overlay(args.overlay)  # before loading anything: a stale customization is refused
    metric = info["metric"] or "metric"
    if args.metric is not None and args.metric != metric:
        raise CLIError(f"--metric {args.metric}: the overlay in {args.overlay} was customized for {metric!r} "
                       f"(gpuroute customize {args.overlay} --metric {args.metric})")
    spec = args.graph or info["graph_spec"]
    if spec is None:
        raise CLIError(f"{args.overlay}: cannot reopen the graph the overlay was customized for (--graph PATH)")
    graph, _ = load(spec)
    with progress(f"loading the overlay {args.overlay}"):
        overlay, _ = open_overlay(args.overlay, graph)
    dt = time.perf_counter() - t0
    log.info("loaded %r with %r in %.3f s", overlay, graph, dt)
    return overlay, graph, metric, info["unit"], dt


def _overlay_result(res, metric, unit):
    """The overlay's PathResult with the metric's name and :class:`~gpuroute.Unit` (it carries the unit's
    symbol)."""
    return dataclasses.replace(res, weight=metric, unit=unit)


def _print_text(graph, weight, snapped, res, times, unit=None):
    if unit is None:
        unit = graph.units[weight]
        rows = [("graph", graph_line(graph, weight))]
    else:  # a metric that is not a weight of the graph (--overlay)
        rows = [("graph", f"{graph.name} ({fmt_int(graph.n_nodes)} nodes, {fmt_int(graph.n_arcs)} arcs; metric "
                          f"{weight}" + (f" [{unit.symbol}]" if unit.symbol else "") + ")")]
    dunit = "units" if graph.is_planar else "m"
    for label, e in zip(("from", "to"), snapped, strict=True):
        x, y = e["query"]
        where = f"{e['name']} ({x:.5f}, {y:.5f})" if e["name"] else f"{x:.5f}, {y:.5f}"
        rows.append((label, where))
        nx, ny = graph.coords[e["node"]]
        rows.append(("", f"-> {describe_node(graph, e['node'])} at {nx:.5f}, {ny:.5f}, snapped "
                         f"{e['offset']:,.1f} {dunit} away"))
    if res.reachable:
        label = "duration" if unit.is_duration else ("distance" if unit.is_distance else "cost")
        rows.append((label, unit.format(int(res.distance))))
        rows.append(("arcs", fmt_int(len(res.arcs))))
    else:
        rows.append(("distance", "unreachable (no route)"))
    what = "arc states settled" if res.method == "crp" else (
        "nodes reached" if res.method == "gpu-sssp" else "nodes settled")
    rows.append(("search", f"{res.method} on {res.device}, {fmt_int(res.settled)} {what}"))
    rows.append(("time", f"{times['total']:,.1f} ms (load {times['load']:,.1f}, snap {times['snap']:,.1f}, "
                         f"compile {times['compile']:,.1f}, query {times['query']:,.1f})"))
    if res.reachable:
        ids = [external_id(graph, v) for v in res.nodes]
        label = f"{id_label(graph)}s" if graph.node_ids is not None else "node ids"
        if len(ids) > 2 * PATH_HEAD + 2:
            shown = " ".join(map(str, ids[:PATH_HEAD])) + " ... " + " ".join(map(str, ids[-PATH_HEAD:]))
        else:
            shown = " ".join(map(str, ids))
        rows.append(("path", f"{fmt_int(len(ids))} nodes ({label}): {shown}"))
    print_rows(rows)


def add_parser(sub, common):
    from ..geo import SNAPPING
    from ..query import METHODS

    r = sub.add_parser("route", parents=[common], help="shortest route between two points",
                       description="Shortest route between two points (LON,LAT in degrees, or X,Y on a planar "
                                   "graph), snapped to the nearest nodes of the largest strongly connected "
                                   "component. Without --from/--to: from Times Square to Prospect Park on NY.")
    r.add_argument("--graph", metavar="PATH|NAME", default=None,
                   help=f"graph to route on (default {DEFAULT_GRAPH}; with --ch or --overlay, the one it was built "
                        "for)")
    r.add_argument("--ch", metavar="DIR", default=None,
                   help="route with a saved contraction hierarchy (gpuroute contract); its graph is reopened from "
                        "the hierarchy's manifest unless --graph is given")
    r.add_argument("--overlay", metavar="DIR", default=None,
                   help="route with a customized CRP overlay directory (gpuroute partition, then gpuroute "
                        "customize): turn-aware, in the customized metric; refused if customized from another "
                        "partition")
    r.add_argument("--from", dest="from_", metavar="LON,LAT", type=parse_point, help="start point (X,Y if planar)")
    r.add_argument("--to", metavar="LON,LAT", type=parse_point, help="end point (X,Y if planar)")
    r.add_argument("--metric", choices=tuple(METRICS), default=None,
                   help="distance or time (default: the graph's first weight; for ny, time loads ny-time)")
    r.add_argument("--method", choices=METHODS, default=None,
                   help="default: bidirectional on the CPU, gpu-sssp on the GPU")
    r.add_argument("--device", choices=DEVICES, default="auto",
                   help="auto: the GPU when usable and the method runs there (the same rule everywhere)")
    r.add_argument("--snapping", choices=SNAPPING, default="default",
                   help="default: only nodes of the largest strongly connected component; any: every node")
    r.add_argument("--radius", type=parse_radius, default=None, metavar="R",
                   help="largest snap distance, >= 0 (metres; planar units on planar graphs)")
    r.add_argument("--alternatives", type=parse_alternatives, default=None, metavar="N",
                   help="up to N alternative routes besides the shortest (the HTTP API's alternatives=N: at most the "
                        "engine's max_alternatives, config.SERVE_MAX_ALTERNATIVES; a route through the engine: give "
                        "a dataset directory, graph file or shipped name as --graph)")
    r.add_argument("--depart-at", dest="depart_at", type=depart_at_arg, default=None, metavar="ISO8601",
                   help="departure time, e.g. 2026-11-26T08:00 (local time in the profile's zone) or "
                        "2026-11-26T08:00+01:00: the route on that time slot's metric (the HTTP API's depart_at; "
                        "needs a time profile: --time-profile, or the one stored in the dataset directory)")
    r.add_argument("--time-profile", dest="time_profile", metavar="FILE", default=None,
                   help="a time profile (CSV or Parquet) for --depart-at, overriding the one stored in the dataset "
                        "directory (gpuroute timeprofile DIR FILE)")
    r.add_argument("--json", action="store_true", help="print a GeoJSON FeatureCollection (with --alternatives: one "
                                                       "LineString per route)")
    r.set_defaults(func=run)
    return r
