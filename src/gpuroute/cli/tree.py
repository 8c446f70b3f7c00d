"""``gpuroute tree``: one-to-all shortest distances from one node with a saved contraction hierarchy
(:meth:`gpuroute.ch.ContractionHierarchy.tree`, PHAST), optionally saved as ``.npy``."""
from __future__ import annotations

import time

import numpy as np

from .common import (
    DEVICES,
    EXIT_OK,
    CLIError,
    check_device,
    describe_node,
    fmt_int,
    fmt_ms,
    fmt_num,
    graph_line,
    id_label,
    open_ch,
    output_path,
    print_rows,
    progress,
)


def pick_source(graph, source, source_id):
    """The internal node id of ``--source N`` or ``--source-id ID``.

    Raises
    ------
    CLIError
        An id outside the graph, or ``--source-id`` on a graph without external ids.
    """
    n = graph.n_nodes
    if source_id is not None:
        if graph.node_ids is None:
            raise CLIError(f"graph {graph.name!r} has no external node ids; use --source with an internal id")
        hits = np.flatnonzero(graph.node_ids == source_id)
        if hits.size == 0:
            raise CLIError(f"no node has {id_label(graph)} {source_id} in graph {graph.name!r}")
        return int(hits[0])
    if not 0 <= source < n:
        raise CLIError(f"--source {source} is outside the internal node range [0, {n}) of {graph.name!r} "
                       "(use --source-id for an external id)")
    return int(source)


def run(args):
    from ..backend import resolve_device
    from ..graph import INF

    check_device(args.device)
    out = output_path(args.output) if args.output else None
    ch, graph, t_load = open_ch(args.ch, args.graph)
    weight = ch.weight
    unit = graph.units[weight]
    n = graph.n_nodes
    source = pick_source(graph, args.source, args.source_id)
    device = resolve_device(args.device)

    t0 = time.perf_counter()
    with progress(f"PHAST tree on {graph.name}"):
        dist = np.asarray(ch.tree(source, device=device), dtype=np.int64)
    t_tree = time.perf_counter() - t0

    reached = dist < INF
    n_reached = int(reached.sum())
    others = dist[reached & (np.arange(n) != source)]
    rows = [("graph", graph_line(graph, weight)),
            ("hierarchy", f"{args.ch} ({ch.method}, {fmt_int(ch.h.n_levels)} levels, core {fmt_int(ch.h.core.size)})"),
            ("source", describe_node(graph, source)),
            ("algorithm", f"phast on {device}"),
            ("time", f"tree {fmt_ms(t_tree)} (load {fmt_ms(t_load)}; the first call in a process includes "
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
    t = sub.add_parser("tree", parents=[common], help="shortest distances from one node to all, with a hierarchy",
                       description="One-to-all shortest distances from one node by PHAST over a saved contraction "
                                   "hierarchy (gpuroute contract).")
    t.add_argument("--ch", required=True, metavar="DIR", help="a saved contraction hierarchy")
    t.add_argument("--graph", metavar="PATH|NAME", default=None,
                   help="its graph (default: reopened from the hierarchy's manifest)")
    src = t.add_mutually_exclusive_group(required=True)
    src.add_argument("--source", type=int, metavar="N", help="internal 0-based node id")
    src.add_argument("--source-id", type=int, metavar="ID", help="external node id (graph.node_ids, e.g. DIMACS 1-based)")
    t.add_argument("--device", choices=DEVICES, default="auto")
    t.add_argument("--output", metavar="FILE.npy", help="save the int64 distance vector (INF where unreachable)")
    t.set_defaults(func=run)
    return t
