"""``gpuroute`` command line: ``route``, ``info`` and ``sssp``.

Each command parses its arguments, calls one library function and formats the answer:

``gpuroute route [--graph G] [--from LON,LAT --to LON,LAT] [--metric distance|time] [--method M]
[--device D] [--json]``
    Point-to-point route (:func:`gpuroute.paths.nearest_node` + :func:`gpuroute.paths.shortest_path`).
    Without ``--from``/``--to`` it routes between two fixed landmarks of the shipped NY network.
``gpuroute info [GRAPH]``
    Size, cleaning, degree, weight, bounding-box and connectivity statistics of a graph.
``gpuroute sssp [GRAPH] --source N | --source-id X [--algorithm A] [--device D] [--metric M] [--output F.npy]``
    One-to-all shortest distances (:func:`gpuroute.sssp`).

Exit codes: 0 success; 1 no route between the two points; 2 bad input (missing file, unknown graph name,
point outside the network's bounding box, malformed ``LON,LAT``, ``--device gpu`` without a GPU,
unreadable file). Bad input gets one line on stderr, never a traceback (``-v`` logs the traceback).
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import math
import os
import re
import sys
import tempfile
import threading
import time

import numpy as np

log = logging.getLogger("gpuroute.cli")

EXIT_OK = 0
EXIT_NO_ROUTE = 1
EXIT_BAD_INPUT = 2

#: Graph used when none is named.
DEFAULT_GRAPH = "ny"

#: ``--metric`` -> weight name.
METRICS = {"distance": "distance", "time": "travel_time"}

#: Shipped datasets that hold the other metric of the same network (the DIMACS distance and time graphs
#: are separate files): (dataset, wanted weight) -> dataset to load instead.
COMPANION_DATASETS = {
    ("ny", "travel_time"): "ny-time",
    ("ny-time", "distance"): "ny",
}

#: The default route of ``gpuroute route`` without ``--from``/``--to``: two landmarks of the NY network
#: (name, longitude, latitude in degrees WGS84).
LANDMARKS = (
    ("Times Square, Manhattan", -73.9855, 40.7580),
    ("Grand Army Plaza, Prospect Park, Brooklyn", -73.9701, 40.6743),
)

#: Node ids shown at each end of an abbreviated path.
PATH_HEAD = 5


class CLIError(Exception):
    """Bad input that the CLI reports in one line on stderr with exit code 2."""


class _UsageError(Exception):
    """An argparse error, reported in one line instead of argparse's usage block."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _UsageError(f"{self.prog}: error: {message} (see '{self.prog} --help')")


# ---------------------------------------------------------------------------------------------- helpers
def parse_lonlat(text):
    """Parse ``"LON,LAT"`` (degrees) into a ``(lon, lat)`` tuple of floats.

    Raises
    ------
    argparse.ArgumentTypeError
        Not two comma-separated finite numbers, or outside [-180, 180] x [-90, 90].
    """
    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        lon, lat = float(parts[0]), float(parts[1])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected LON,LAT in degrees (e.g. -73.9855,40.7580), got {text!r}") from None
    if not (math.isfinite(lon) and math.isfinite(lat)) or abs(lon) > 180 or abs(lat) > 90:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a position: longitude must be in [-180, 180] and latitude in [-90, 90]")
    return lon, lat


def _join_coordinate_args(argv):
    """Let ``--from -73.98,40.75`` work: argparse would take a value starting with '-' for an option."""
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--from", "--to") and i + 1 < len(argv) and re.match(r"^-[\d.]", argv[i + 1]):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _one_line(msg):
    return " ".join(str(msg).split())


def _fmt_int(x):
    return f"{int(x):,}"


def _fmt_num(x):
    x = float(x)
    return f"{int(x):,}" if x == int(x) else f"{x:,.1f}"


def _fmt_ms(seconds):
    return f"{seconds * 1e3:,.1f} ms"


def _approx(value, unit):
    """A human reading of ``value`` in ``unit`` ("~12.35 km", "~4 min 10 s"), or "" when unknown."""
    u = unit.replace(" ", "")
    if "0.1m" in u or u == "dm":
        return f"~{value / 1e4:,.2f} km"
    if u == "m":
        return f"~{value / 1e3:,.2f} km"
    if u in ("ds", "s"):
        s = value / 10 if u == "ds" else float(value)
        if s < 60:
            return f"~{s:.1f} s"
        m, s = divmod(round(s), 60)
        h, m = divmod(m, 60)
        return f"~{h} h {m:02d} min" if h else f"~{m} min {s:02d} s"
    return ""


def _with_unit(value, unit):
    from ..graph.units import parse_unit

    return parse_unit(unit).format(value)


def _id_label(graph):
    fmt = str(graph.meta.get("format", "")).lower()
    if fmt.startswith("dimacs"):
        return "DIMACS id"
    if "osm" in fmt or "pbf" in fmt:
        return "OSM id"
    return "external id"


def _external_id(graph, node):
    return int(graph.node_ids[node]) if graph.node_ids is not None else int(node)


def _describe_node(graph, node):
    s = f"node {int(node)}"
    if graph.node_ids is not None:
        s += f" ({_id_label(graph)} {_external_id(graph, node)})"
    return s


def _stderr_is_tty():
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def _progress(desc, delay=2.0):
    """A tqdm spinner on stderr for a step that may take a while.

    Shown only when stderr is a terminal and only once the step has run ``delay`` seconds; it is cleared
    when the step ends, so stdout (``--json``) and captured stderr never see it.
    """
    if not _stderr_is_tty():
        yield
        return
    from tqdm import tqdm

    bar = tqdm(total=None, desc=desc, file=sys.stderr, delay=delay, leave=False,
               bar_format="{desc} [{elapsed}]")
    stop = threading.Event()
    shown = []

    def spin():
        t0 = time.monotonic()
        for ch in itertools.cycle("|/-\\"):
            if stop.wait(0.125):
                return
            if time.monotonic() - t0 >= delay:
                bar.set_description_str(f"{desc} {ch}", refresh=False)
                bar.refresh()
                shown.append(True)

    th = threading.Thread(target=spin, name="gpuroute-progress", daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()
        if shown:
            bar.clear()  # refresh() does not mark the bar as printed, so close() alone would leave it
        bar.close()


def _shipped_names():
    from .. import datasets

    return datasets.names()


def _spec_for_weight(spec, weight):
    """The graph to load so that it carries ``weight``: ``ny`` + time -> ``ny-time``; for a DIMACS
    ``USA-road-d.X.gr[.gz]`` file + time, the ``USA-road-t.X`` file beside it (and the reverse)."""
    if weight is None:
        return spec
    if (spec, weight) in COMPANION_DATASETS:
        other = COMPANION_DATASETS[spec, weight]
        log.info("metric %s: loading %r instead of %r", weight, other, spec)
        return other
    letter = {"distance": "d", "travel_time": "t"}.get(weight)
    d, base = os.path.split(os.fspath(spec))
    m = re.match(r"^USA-road-([dt])\.(.+\.gr(\.gz)?)$", base)
    if letter and m and m.group(1) != letter and os.path.isfile(spec):
        sibling = os.path.join(d, f"USA-road-{letter}.{m.group(2)}")
        if os.path.isfile(sibling):
            log.info("metric %s: loading %s instead of %s", weight, sibling, spec)
            return sibling
    return spec


def _load(spec, weight=None):
    """Load a graph by dataset name or path (``gpuroute.io.open_graph``); returns (graph, seconds)."""
    from ..io import open_graph

    spec = _spec_for_weight(spec, weight)
    looks_like_name = not any(c in spec for c in "/\\.")
    t0 = time.perf_counter()
    try:
        with _progress(f"loading {spec}"):
            graph = open_graph(spec)
    except KeyError as e:
        msg = _one_line(e.args[0] if e.args else e)
        names = _shipped_names()
        if not all(n in msg for n in names):
            msg += f"; shipped graphs: {', '.join(names)}"
        raise CLIError(msg) from e
    except FileNotFoundError as e:
        msg = f"{e.strerror}: {e.filename}" if e.filename and e.strerror else _one_line(e)
        names = _shipped_names()
        if looks_like_name and not all(n in msg for n in names):
            msg += f" (not a file; shipped graphs: {', '.join(names)})"
        raise CLIError(msg) from e
    dt = time.perf_counter() - t0
    log.info("loaded %r in %.3f s", graph, dt)
    return graph, dt


def _pick_weight(graph, metric):
    """Weight name for ``--metric`` (None: the graph's default weight)."""
    if metric is None:
        return graph.default_weight
    want = METRICS[metric]
    if want not in graph.weights:
        raise CLIError(f"graph {graph.name!r} has no {metric} weight ({want!r}); it has {graph.weight_names}")
    return want


def _check_device(device):
    """Fail fast (before loading) when ``--device gpu`` cannot be honoured."""
    if device == "gpu":
        from ..backend import resolve_device

        resolve_device("gpu")


def _resolved(device):
    from ..backend import resolve_device

    return resolve_device(device)


def _graph_line(graph, weight=None):
    s = f"{graph.name} ({_fmt_int(graph.n_nodes)} nodes, {_fmt_int(graph.n_arcs)} arcs"
    if weight is not None:
        unit = graph.units.get(weight, "")
        s += f"; weight {weight}" + (f" [{unit.symbol}]" if unit.symbol else "")
    return s + ")"


def _print_rows(rows, out=None):
    out = out or sys.stdout
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}", file=out)


# ---------------------------------------------------------------------------------------------- route
def _bbox_hint(graph, lon, lat):
    """' (did you mean LAT,LON?)' when swapping the two would land inside the graph's bounding box."""
    if graph.coords is None or graph.n_nodes == 0:
        return ""
    lo, hi = graph.coords.min(axis=0), graph.coords.max(axis=0)
    if lo[0] <= lat <= hi[0] and lo[1] <= lon <= hi[1]:
        return "; the order is LON,LAT - did you swap them?"
    return ""


def cmd_route(args):
    from ..paths import OutOfBoundsError, nearest_node, shortest_path

    if (args.from_ is None) != (args.to is None):
        raise CLIError("give both --from and --to, or neither (for the default route on the NY network)")
    default_route = args.from_ is None
    if default_route:
        points = list(LANDMARKS)
    else:
        points = [(None, *args.from_), (None, *args.to)]
    spec = args.graph or DEFAULT_GRAPH
    _check_device(args.device)

    graph, t_load = _load(spec, METRICS.get(args.metric))
    weight = _pick_weight(graph, args.metric)
    unit = graph.units.get(weight, "")

    t0 = time.perf_counter()
    snapped = []
    for (name, lon, lat), opt in zip(points, ("--from", "--to"), strict=True):
        try:
            node, offset = nearest_node(graph, lon, lat)
        except OutOfBoundsError as e:
            what = f"landmark {name!r} ({lon:g},{lat:g})" if default_route else f"{opt} {lon:g},{lat:g}"
            bbox = getattr(e, "bbox", None)
            if bbox is not None and len(bbox) == 4:
                x0, y0, x1, y1 = bbox
                msg = (f"{what} lies outside the bounding box of graph {graph.name!r} "
                       f"(lon {x0:.4f} .. {x1:.4f}, lat {y0:.4f} .. {y1:.4f})")
            else:
                msg = f"{what}: {_one_line(e)}"
            if default_route:
                msg += " (the default route is on the NY network; give --from and --to for this graph)"
            else:
                msg += _bbox_hint(graph, lon, lat)
            raise CLIError(msg) from e
        snapped.append((name, lon, lat, int(node), float(offset)))
    t_snap = time.perf_counter() - t0

    src, dst = snapped[0][3], snapped[1][3]
    t0 = time.perf_counter()
    with _progress(f"routing on {graph.name}"):
        res = shortest_path(graph, src, dst, weight=weight, method=args.method, device=args.device)
    t_query = time.perf_counter() - t0
    log.info("route %d -> %d: distance %s, %d arcs, %s settled", src, dst, res.distance, len(res.arcs),
             getattr(res, "settled", "?"))

    from ..graph import INF

    reachable = int(res.distance) < INF
    times = {"load": t_load * 1e3, "snap": t_snap * 1e3, "query": t_query * 1e3}
    times["total"] = sum(times.values())
    unit = getattr(res, "unit", None) or unit

    if args.json:
        _print_route_geojson(graph, weight, unit, snapped, res, reachable, times, args)
    else:
        _print_route_text(graph, weight, unit, snapped, res, reachable, times, args)
    if not reachable:
        print(f"gpuroute route: no route: {_describe_node(graph, dst)} cannot be reached from "
              f"{_describe_node(graph, src)} in {graph.name!r}", file=sys.stderr)
        return EXIT_NO_ROUTE
    return EXIT_OK


def _print_route_text(graph, weight, unit, snapped, res, reachable, times, args):
    rows = [("graph", _graph_line(graph, weight))]
    for label, (name, lon, lat, node, off) in zip(("from", "to"), snapped, strict=True):
        where = f"{name} ({lon:.5f}, {lat:.5f})" if name else f"{lon:.5f}, {lat:.5f}"
        rows.append((label, where))
        nlon, nlat = graph.coords[node]
        rows.append(("", f"-> {_describe_node(graph, node)} at {nlon:.5f}, {nlat:.5f}, snapped {off:,.1f} m away"))
    if reachable:
        rows.append(("distance", _with_unit(int(res.distance), unit)))
        rows.append(("arcs", _fmt_int(len(res.arcs))))
    else:
        rows.append(("distance", "unreachable (no route)"))
    settled = getattr(res, "settled", None)
    rows.append(("search", f"{getattr(res, 'method', '') or args.method} on {_resolved(args.device)}"
                 + (f", {_fmt_int(settled)} nodes settled" if settled is not None else "")))
    rows.append(("time", f"{times['total']:,.1f} ms (load {times['load']:,.1f}, snap {times['snap']:,.1f}, "
                         f"query {times['query']:,.1f})"))
    if reachable:
        ids = [_external_id(graph, v) for v in res.nodes]
        label = f"{_id_label(graph)}s" if graph.node_ids is not None else "node ids"
        if len(ids) > 2 * PATH_HEAD + 2:
            shown = " ".join(map(str, ids[:PATH_HEAD])) + " ... " + " ".join(map(str, ids[-PATH_HEAD:]))
        else:
            shown = " ".join(map(str, ids))
        rows.append(("path", f"{_fmt_int(len(ids))} nodes ({label}): {shown}"))
    _print_rows(rows)


def _round(x):
    return round(float(x), 7)


def _print_route_geojson(graph, weight, unit, snapped, res, reachable, times, args):
    (_, _, _, src, src_off), (_, _, _, dst, dst_off) = snapped
    features = []
    if reachable:
        line = [[_round(x), _round(y)] for x, y in graph.coords[np.asarray(res.nodes)]]
        if len(line) == 1:  # source == target: a LineString needs two positions
            line = line * 2
        props = {
            "graph": graph.name,
            "weight": weight,
            "unit": str(unit),
            "distance": int(res.distance),
            "arcs": int(len(res.arcs)),
            "nodes": int(len(res.nodes)),
            "source": src,
            "target": dst,
            "source_id": _external_id(graph, src),
            "target_id": _external_id(graph, dst),
            "method": getattr(res, "method", "") or args.method,
            "device": _resolved(args.device),
            "time_ms": {k: round(v, 3) for k, v in times.items()},
        }
        from ..graph.units import parse_unit

        approx = parse_unit(unit).describe(int(res.distance))
        if approx:
            props["approx"] = approx.lstrip("~")
        settled = getattr(res, "settled", None)
        if settled is not None:
            props["settled"] = int(settled)
        features.append({"type": "Feature", "geometry": {"type": "LineString", "coordinates": line},
                         "properties": props})
    for role, (name, lon, lat, node, off) in zip(("source", "target"), snapped, strict=True):
        nlon, nlat = graph.coords[node]
        props = {"role": role, "node": node, "id": _external_id(graph, node),
                 "query": [lon, lat], "snap_offset_m": round(off, 2)}
        if name:
            props["name"] = name
        features.append({"type": "Feature", "geometry": {"type": "Point", "coordinates": [_round(nlon), _round(nlat)]},
                         "properties": props})
    fc = {"type": "FeatureCollection", "features": features,
          "properties": {"graph": graph.name, "reachable": reachable}}
    json.dump(fc, sys.stdout)
    sys.stdout.write("\n")


# ---------------------------------------------------------------------------------------------- info
def graph_stats(graph):
    """Statistics printed by ``gpuroute info`` as a dict (see :func:`cmd_info`)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    n, m = graph.n_nodes, graph.n_arcs
    deg = graph.out_degree()
    hist = np.bincount(np.minimum(deg, 5), minlength=6) if n else np.zeros(6, np.int64)
    stats = {
        "name": graph.name,
        "source": graph.meta.get("source"),
        "nodes": n,
        "arcs": m,
        "self_loops_dropped": graph.meta.get("self_loops_dropped"),
        "parallel_arcs_dropped": graph.meta.get("parallel_arcs_dropped"),
        "out_degree": {"min": int(deg.min()) if n else 0, "mean": float(deg.mean()) if n else 0.0,
                       "max": int(deg.max()) if n else 0, "histogram": [int(h) for h in hist]},
        "weights": {},
        "bbox": None,
    }
    for name, w in graph.weights.items():
        entry = {"unit": graph.units[name].symbol}
        if m:
            entry.update(min=int(w.min()), median=float(np.median(w)), mean=float(w.mean()), max=int(w.max()))
        stats["weights"][name] = entry
    if graph.coords is not None and n:
        lo, hi = graph.coords.min(axis=0), graph.coords.max(axis=0)
        stats["bbox"] = [float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])]
    if n:
        a = sp.csr_matrix((np.ones(m, dtype=np.int8), graph.head, graph.first_out), shape=(n, n))
        for kind in ("strong", "weak"):
            k, labels = connected_components(a, directed=True, connection=kind)
            stats[kind] = {"count": int(k), "largest": int(np.bincount(labels).max())}
    else:
        stats["strong"] = stats["weak"] = {"count": 0, "largest": 0}
    return stats


def cmd_info(args):
    graph, t_load = _load(args.graph)
    t0 = time.perf_counter()
    with _progress("computing statistics"):
        st = graph_stats(graph)
    t_stats = time.perf_counter() - t0
    n = st["nodes"]
    rows = [("graph", st["name"] + (f" ({st['source']})" if st["source"] else "")),
            ("nodes", _fmt_int(n)),
            ("arcs", _fmt_int(st["arcs"]))]
    if st["self_loops_dropped"] is not None or st["parallel_arcs_dropped"] is not None:
        rows.append(("dropped at load", f"{_fmt_int(st['self_loops_dropped'] or 0)} self-loops, "
                                        f"{_fmt_int(st['parallel_arcs_dropped'] or 0)} parallel arcs"))
    d = st["out_degree"]
    rows.append(("out-degree", f"min {d['min']}, mean {d['mean']:.2f}, max {d['max']}"))
    labels = ["0", "1", "2", "3", "4", "5+"]
    rows.append(("", "  ".join(f"{lab}: {_fmt_int(h)}" for lab, h in zip(labels, d["histogram"], strict=True))))
    for name, w in st["weights"].items():
        unit = f" [{w['unit']}]" if w["unit"] else ""
        if "min" in w:
            rows.append((f"weight {name}", f"min {_fmt_int(w['min'])}, median {_fmt_num(w['median'])}, "
                                           f"mean {w['mean']:,.1f}, max {_fmt_int(w['max'])}{unit}"))
        else:
            rows.append((f"weight {name}", f"(no arcs){unit}"))
    if st["bbox"] is not None:
        x0, y0, x1, y1 = st["bbox"]
        axes = ("lon", "lat") if graph.coord_system == "lonlat" else ("x", "y")
        rows.append(("bbox", f"{axes[0]} {x0:.6f} .. {x1:.6f}, {axes[1]} {y0:.6f} .. {y1:.6f}"))
    else:
        rows.append(("bbox", "no coordinates"))
    for kind, label in (("strong", "strongly connected"), ("weak", "weakly connected")):
        c = st[kind]
        share = f" = {100 * c['largest'] / n:.1f}%" if n else ""
        plural = "" if c["count"] == 1 else "s"
        rows.append((label, f"{_fmt_int(c['count'])} component{plural}, largest {_fmt_int(c['largest'])} nodes{share}"))
    rows.append(("time", f"load {_fmt_ms(t_load)}, statistics {_fmt_ms(t_stats)}"))
    _print_rows(rows)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------- sssp
def _save_npy_atomic(path, array):
    """Write ``array`` to ``path`` (exactly that name) via a temporary file and a rename."""
    path = os.path.abspath(path)
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        raise CLIError(f"cannot write {path}: directory {d} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".gpuroute-", suffix=".npy.tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def cmd_sssp(args):
    from ..backend import to_numpy
    from ..graph import INF
    from ..sssp import sssp_full

    _check_device(args.device)
    graph, t_load = _load(args.graph, METRICS.get(args.metric))
    weight = _pick_weight(graph, args.metric)
    unit = graph.units.get(weight, "")
    n = graph.n_nodes
    if args.source_id is not None:
        if graph.node_ids is None:
            raise CLIError(f"graph {graph.name!r} has no external node ids; use --source with an internal id")
        hits = np.flatnonzero(graph.node_ids == args.source_id)
        if hits.size == 0:
            raise CLIError(f"no node has {_id_label(graph)} {args.source_id} in graph {graph.name!r}")
        source = int(hits[0])
    else:
        source = args.source
        if not 0 <= source < n:
            raise CLIError(f"--source {source} is outside the internal node range [0, {n}) of {graph.name!r} "
                           "(use --source-id for an external id)")

    t0 = time.perf_counter()
    with _progress(f"sssp ({args.algorithm}) on {graph.name}"):
        res = sssp_full(graph, [source], weight=weight, algorithm=args.algorithm, device=args.device)
        dist = np.asarray(to_numpy(res.dist)[0], dtype=np.int64)
    t_sssp = time.perf_counter() - t0

    reached = dist < INF
    n_reached = int(reached.sum())
    others = dist[reached & (np.arange(n) != source)]
    rows = [("graph", _graph_line(graph, weight)),
            ("source", _describe_node(graph, source)),
            ("algorithm", f"{res.stats.get('algorithm', args.algorithm)} on {res.stats.get('device', args.device)}"),
            ("time", f"sssp {_fmt_ms(t_sssp)} (load {_fmt_ms(t_load)})"),
            ("reached", f"{_fmt_int(n_reached)} of {_fmt_int(n)} nodes ({100 * n_reached / n:.1f}%)")]
    if others.size:
        rows.append(("distance", f"min {_fmt_int(others.min())}, median {_fmt_num(np.median(others))}, "
                                 f"max {_fmt_int(others.max())} {unit} (reached nodes other than the source)"))
        far = int(np.flatnonzero(reached)[np.argmax(dist[reached])])
        rows.append(("eccentricity", f"{_with_unit(int(dist[far]), unit)}, farthest {_describe_node(graph, far)}"))
    else:
        rows.append(("distance", "no node other than the source is reachable"))
        rows.append(("eccentricity", "0"))
    if args.output:
        _save_npy_atomic(args.output, dist)
        rows.append(("saved", f"{args.output} (int64, {_fmt_int(n)} values; INF = {INF} where unreachable)"))
    _print_rows(rows)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------- parser
def build_parser():
    """The ``gpuroute`` argument parser (subcommands ``route``, ``info``, ``sssp``)."""
    from .. import __version__
    from ..sssp import ALGORITHMS

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="log debug information to stderr")

    p = _Parser(prog="gpuroute", description="Exact route planning on road networks (GPU + CPU).",
                epilog="Graphs: a shipped name (ny, ny-time, monaco) or a file (.gr, .gr.gz, .graph, "
                       ".osm.pbf, .csv) or a saved-graph directory.")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log debug information to stderr")
    p.add_argument("--version", action="version", version=f"gpuroute {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    devices = ("auto", "cpu", "gpu")
    r = sub.add_parser("route", parents=[common], help="shortest route between two points",
                       description="Shortest route between two LON,LAT points (snapped to the nearest nodes). "
                                   "Without --from/--to: from Times Square to Prospect Park on the NY network.")
    r.add_argument("--graph", metavar="PATH|NAME", default=None, help=f"graph to route on (default {DEFAULT_GRAPH})")
    r.add_argument("--from", dest="from_", metavar="LON,LAT", type=parse_lonlat, help="start point in degrees")
    r.add_argument("--to", metavar="LON,LAT", type=parse_lonlat, help="end point in degrees")
    r.add_argument("--metric", choices=tuple(METRICS), default=None,
                   help="distance or time (default: the graph's first weight; for ny, time loads ny-time)")
    r.add_argument("--method", choices=("bidirectional", "dijkstra", "astar"), default="bidirectional")
    r.add_argument("--device", choices=devices, default="auto")
    r.add_argument("--json", action="store_true", help="print a GeoJSON FeatureCollection")
    r.set_defaults(func=cmd_route)

    i = sub.add_parser("info", parents=[common], help="statistics of a graph",
                       description="Nodes, arcs, cleaning, degrees, weights, bounding box and connectivity.")
    i.add_argument("graph", nargs="?", default=DEFAULT_GRAPH, metavar="GRAPH",
                   help=f"graph name or path (default {DEFAULT_GRAPH})")
    i.set_defaults(func=cmd_info)

    s = sub.add_parser("sssp", parents=[common], help="shortest distances from one node to all",
                       description="One-to-all shortest distances from one node.")
    s.add_argument("graph", nargs="?", default=DEFAULT_GRAPH, metavar="GRAPH",
                   help=f"graph name or path (default {DEFAULT_GRAPH})")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--source", type=int, metavar="N", help="internal 0-based node id")
    src.add_argument("--source-id", type=int, metavar="ID", help="external node id (graph.node_ids, e.g. DIMACS 1-based)")
    s.add_argument("--algorithm", choices=("auto", *sorted(ALGORITHMS)), default="auto")
    s.add_argument("--device", choices=devices, default="auto")
    s.add_argument("--metric", choices=tuple(METRICS), default=None)
    s.add_argument("--output", metavar="FILE.npy", help="save the int64 distance vector (INF where unreachable)")
    s.set_defaults(func=cmd_sssp)
    return p


@contextlib.contextmanager
def _logging_to_stderr(verbose):
    logger = logging.getLogger("gpuroute")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def main(argv=None) -> int:
    """Run ``gpuroute`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(_join_coordinate_args(argv))
    except _UsageError as e:
        print(e, file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as e:  # --help, --version
        return e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_BAD_INPUT)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT

    from ..backend import GPUUnavailableError

    prog = f"gpuroute {args.command}"
    with _logging_to_stderr(args.verbose):
        try:
            return args.func(args)
        except BrokenPipeError:  # e.g. `gpuroute route | head`: stop quietly, as other command-line tools do
            with contextlib.suppress(OSError, ValueError, AttributeError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            return 128 + 13  # SIGPIPE
        except (CLIError, GPUUnavailableError, FileNotFoundError, KeyError, ValueError, OSError, ImportError) as e:
            log.debug("%s failed", prog, exc_info=True)
            if isinstance(e, FileNotFoundError) and e.filename and e.strerror:
                msg = f"{e.strerror}: {e.filename}"
            elif isinstance(e, KeyError) and e.args:
                msg = str(e.args[0])
            else:
                msg = str(e) or type(e).__name__
            print(f"{prog}: error: {_one_line(msg)}", file=sys.stderr)
            return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
