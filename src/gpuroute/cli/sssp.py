"""``gpuroute sssp``: one-to-all shortest distances from one node (:func:`gpuroute.sssp.sssp_full`),
optionally saved as ``.npy``."""
from __future__ import annotations

import time

import numpy as np

from .common import (
    DEFAULT_GRAPH,
    DEVICES,
    EXIT_OK,
    METRICS,
    CLIError,
    check_device,
    describe_node,
    fmt_int,
    fmt_ms,
    fmt_num,
    graph_line,
    id_label,
    load,
    output_path,
    pick_weight,
    print_rows,
    progress,
)


def run(args):
    from ..backend import to_numpy
    from ..graph import INF
    from ..sssp import sssp_full

    check_device(args.device)
    out = output_path(args.output) if args.output else None
    graph, t_load = load(args.graph, METRICS.get(args.metric))
    weight = pick_weight(graph, args.metric)
    unit = graph.units[weight]
    n = graph.n_nodes
    if args.source_id is not None:
        if graph.node_ids is None:
            raise CLIError(f"graph {graph.name!r} has no external node ids; use --source with an internal id")
        hits = np.flatnonzero(graph.node_ids == args.source_id)
        if hits.size == 0:
            raise CLIError(f"no node has {id_label(graph)} {args.source_id} in graph {graph.name!r}")
        source = int(hits[0])
    else:
        source = args.source
        if not 0 <= source < n:
            raise CLIError(f"--source {source} is outside the internal node range [0, {n}) of {graph.name!r} "
                           "(use --source-id for an external id)")

    t0 = time.perf_counter()
    with progress(f"sssp ({args.algorithm}) on {graph.name}"):
        res = sssp_full(graph, [source], weight=weight, algorithm=args.algorithm, device=args.device)
        dist = np.asarray(to_numpy(res.dist)[0], dtype=np.int64)
    t_sssp = time.perf_counter() - t0

    reached = dist < INF
    n_reached = int(reached.sum())
    others = dist[reached & (np.arange(n) != source)]
    rows = [("graph", graph_line(graph, weight)),
            ("source", describe_node(graph, source)),
            ("algorithm", f"{res.stats['algorithm']} on {res.stats['device']}"),
            ("time", f"sssp {fmt_ms(t_sssp)} (load {fmt_ms(t_load)}; the first call in a process includes "
                     "kernel compilation)"),
            ("reached", f"{fmt_int(n_reached)} of {fmt_int(n)} nodes ({100 * n_reached / n:.1f}%)")]
    if others.size:
        rows.append(("distance", f"min {fmt_int(others.min())}, median {fmt_num(np.median(others))}, "
                                 f"max {fmt_int(others.max())} {unit.symbol} (reached nodes other than the source)"))
        far = int(np.flatnonzero(reached)[np.argmax(dist[reached])])
        rows.append(("eccentricity", f"{unit.format(int(dist[far]))}, farthest {describe_node(graph, far)}"))
    else:
        rows.append(("distance", "no node other than the source is reachable"))
        rows.append(("eccentricity", "0"))
    if out:
        from ..store.atomic import write_npy_atomic

        write_npy_atomic(out, dist)
        rows.append(("saved", f"{out} (int64, {fmt_int(n)} values; INF = {INF} where unreachable)"))
    print_rows(rows)
    return EXIT_OK


def add_parser(sub, common):
    from ..sssp import ALGORITHMS

    s = sub.add_parser("sssp", parents=[common], help="shortest distances from one node to all",
                       description="One-to-all shortest distances from one node.")
    s.add_argument("graph", nargs="?", default=DEFAULT_GRAPH, metavar="GRAPH",
                   help=f"graph name or path (default {DEFAULT_GRAPH})")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--source", type=int, metavar="N", help="internal 0-based node id")
    src.add_argument("--source-id", type=int, metavar="ID", help="external node id (graph.node_ids, e.g. DIMACS 1-based)")
    s.add_argument("--algorithm", choices=("auto", *sorted(ALGORITHMS)), default="auto")
    s.add_argument("--device", choices=DEVICES, default="auto")
    s.add_argument("--metric", choices=tuple(METRICS), default=None)
    s.add_argument("--output", metavar="FILE.npy", help="save the int64 distance vector (INF where unreachable)")
    s.set_defaults(func=run)
    return s
