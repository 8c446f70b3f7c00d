"""``gpuroute accessibility``: pandana-style accessibility of every node (:func:`gpuroute.accessibility.aggregate`,
and with ``--k`` the nearest POIs, :func:`gpuroute.accessibility.nearest_pois`), optionally saved
(``.npy``, ``.csv``, ``.parquet``) and drawn (``--plot``: the network coloured by the aggregate).

POIs are a ``.npy`` of internal node ids or a CSV of ``LON,LAT`` lines snapped to their nearest nodes
(as ``gpuroute table`` reads them); ``--values`` gives one number per POI (``.npy`` or one number a line;
default 1: counts). The radius is in the weight's unit, or with a suffix (``2000m``, ``2km``, ``600s``,
``10min``) converted by the weight's scale."""
from __future__ import annotations

import math
import os
import time

import numpy as np

from ..graph.units import split_quantity, to_weight_units
from .common import (
    DEFAULT_GRAPH,
    DEVICES,
    EXIT_OK,
    METRICS,
    CLIError,
    check_device,
    fmt_int,
    fmt_ms,
    graph_line,
    load,
    open_ch,
    pick_weight,
    print_rows,
    progress,
)


def parse_radius(text, unit):
    """The radius in the weight's unit from ``"20000"`` (the unit itself) or ``"2000m"``, ``"2km"``, ``"600s"``,
    ``"10min"``, ``"1h"`` (converted by the unit's scale).

    Raises
    ------
    CLIError
        Not a number >= 0 with an optional suffix; a suffix of the other quantity or a unit of unknown scale.
    """
    try:
        number, symbol = split_quantity(str(text), unit, "--radius")
        if symbol:
            return to_weight_units(str(text), unit, what="--radius")
        return to_weight_units(number, unit, unit="native", what="--radius")
    except ValueError as e:
        raise CLIError(f"{e} (a bare number is in the weight's unit)") from None


def _read_values(path, k):
    if not os.path.exists(path):
        raise CLIError(f"--values {path}: no such file")
    try:
        v = np.load(path, allow_pickle=False) if path.lower().endswith(".npy") else np.loadtxt(path, ndmin=1)
    except (ValueError, OSError, EOFError) as e:
        raise CLIError(f"--values {path}: not a readable .npy array or list of numbers ({e})") from None
    v = np.asarray(v).ravel()
    if v.size != k:
        raise CLIError(f"--values {path}: {v.size} values for {k} POIs (one value per POI, in order)")
    return v


def run(args):
    from ..accessibility import EMPTY, aggregate, nearest_pois
    from ..accessibility.plot import accessibility_map
    from .table import read_nodes

    check_device(args.device)
    if args.k is not None and args.k < 1:
        raise CLIError(f"--k must be >= 1, got {args.k}")
    out = os.path.abspath(args.output) if args.output else None
    if out is not None and not out.lower().endswith((".npy", ".csv", ".parquet")):
        raise CLIError(f"--output {args.output}: give a .npy, .csv or .parquet file")
    for p in (out, args.plot):
        if p and not os.path.isdir(os.path.dirname(os.path.abspath(p))):
            raise CLIError(f"cannot write {p}: its directory does not exist")
    if args.ch:
        ch, graph, t_load = open_ch(args.ch, args.graph)
        index, weight = ch, ch.weight
    else:
        graph, t_load = load(args.graph, METRICS.get(args.metric))
        weight = pick_weight(graph, args.metric)
        index = graph
    unit = graph.units[weight]
    radius = parse_radius(args.radius, unit)
    pois, how = read_nodes(graph, args.pois, "--pois", args.snapping)
    values = _read_values(args.values, pois.size) if args.values else None

    t0 = time.perf_counter()
    with progress(f"accessibility on {graph.name}"):
        agg = aggregate(index, pois, values, radius, type=args.type, decay=args.decay, weight=weight,
                        device=args.device, strategy=args.strategy, unit="native")
        t_agg = time.perf_counter() - t0
        near = None
        if args.k:
            t1 = time.perf_counter()
            near = nearest_pois(index, pois, radius, args.k, weight=weight, device=args.device,
                                strategy=args.strategy, unit="native")
            t_near = time.perf_counter() - t1

    n = graph.n_nodes
    empty = EMPTY[args.type]
    rows = [("graph", graph_line(graph, weight)),
            ("pois", how + ("" if values is None else f", values from {args.values}")),
            ("radius", unit.format(radius) if radius == math.floor(radius) else f"{radius:,.2f} {unit.symbol}"),
            ("aggregate", f"{args.type} with {args.decay} decay ({args.device} device requested)")]
    filled = agg != empty
    if filled.any():
        v = agg[filled]
        rows.append(("values", f"min {v.min():,.6g}, median {np.median(v):,.6g}, max {v.max():,.6g} over "
                               f"{fmt_int(filled.sum())} of {fmt_int(n)} nodes ({empty:g} elsewhere: nothing in range)"))
    else:
        rows.append(("values", f"no node has a POI within the radius (all {empty:g})"))
    times = f"aggregate {fmt_ms(t_agg)}"
    if near is not None:
        dist, ids = near
        have = ids[:, 0] >= 0
        rows.append((f"nearest {args.k}", f"{fmt_int(have.sum())} of {fmt_int(n)} nodes have a POI in range; "
                                          + (f"median distance to the nearest {unit.format(np.median(dist[have, 0]))}"
                                             if have.any() else "none")))
        times += f", nearest {fmt_ms(t_near)}"
    rows.append(("time", f"{times} (load {fmt_ms(t_load)}; the first call in a process includes compilation)"))
    if out:
        _save(out, graph, args, agg, near)
        rows.append(("saved", out))
    if args.plot:
        label = f"{args.type} within {args.radius}" + ("" if args.decay == "flat" else f" ({args.decay} decay)")
        accessibility_map(graph, agg, args.plot, title=f"{graph.name}: {label}", label=label,
                          missing=empty if args.type in ("min", "max") else None)
        rows.append(("plot", os.path.abspath(args.plot)))
    print_rows(rows)
    return EXIT_OK


def _save(out, graph, args, agg, near):
    from ..store.atomic import atomic_file, write_npy_atomic

    if out.lower().endswith(".npy"):
        write_npy_atomic(out, agg)
        return
    from ..extras import require

    pd = require("pandas", "gpuroute accessibility --output .csv/.parquet")
    cols = {"node": np.arange(graph.n_nodes)}
    if graph.node_ids is not None:
        cols["node_id"] = graph.node_ids
    cols[args.type] = agg
    if near is not None:
        dist, ids = near
        for q in range(dist.shape[1]):
            cols[f"dist{q + 1}"] = dist[:, q]
        for q in range(ids.shape[1]):
            cols[f"poi{q + 1}"] = ids[:, q]
    df = pd.DataFrame(cols)
    if out.lower().endswith(".csv"):
        with atomic_file(out, "w", encoding="utf-8") as f:
            df.to_csv(f, index=False)
    else:
        with atomic_file(out, "wb") as f:
            df.to_parquet(f, index=False)


def add_parser(sub, common):
    from ..accessibility import DECAY_NAMES, STRATEGIES, TYPES
    from ..geo import SNAPPING

    a = sub.add_parser("accessibility", parents=[common], help="pandana-style accessibility of every node",
                       description="For every node, aggregate the POIs' values within a network radius (sum, mean, "
                                   "count, std, min, max; flat, linear or exponential decay) and, with --k, the k "
                                   "nearest POIs. FILE: a .npy of internal node ids, or a CSV of LON,LAT lines snapped "
                                   "to the nearest nodes.")
    a.add_argument("graph", nargs="?", default=DEFAULT_GRAPH, metavar="GRAPH",
                   help=f"graph name or path (default {DEFAULT_GRAPH}); with --ch, the hierarchy's graph")
    a.add_argument("--pois", required=True, metavar="FILE", help="POIs: .npy of node ids or CSV of LON,LAT")
    a.add_argument("--values", metavar="FILE", help="one value per POI (.npy or one number a line); default 1")
    a.add_argument("--radius", required=True, metavar="R",
                   help="in the weight's unit, or with a suffix m, km, s, min, h (e.g. 2000m)")
    a.add_argument("--type", choices=TYPES, default="sum")
    a.add_argument("--decay", choices=DECAY_NAMES, default="flat")
    a.add_argument("--k", type=int, default=None, metavar="K", help="also the K nearest POIs of every node")
    a.add_argument("--metric", choices=tuple(METRICS), default=None)
    a.add_argument("--ch", metavar="DIR", default=None, help="a saved contraction hierarchy (used on the GPU)")
    a.add_argument("--device", choices=DEVICES, default="auto")
    a.add_argument("--strategy", choices=STRATEGIES, default="auto",
                   help="search from the POIs (reverse graph) or from every node (CPU); same result")
    a.add_argument("--snapping", choices=SNAPPING, default="default")
    a.add_argument("--output", metavar="FILE", help=".npy (the aggregate), .csv or .parquet (node, node_id, "
                                                    "aggregate, dist1.., poi1..)")
    a.add_argument("--plot", metavar="PNG", help="draw the network coloured by the aggregate")
    a.set_defaults(func=run)
    return a
