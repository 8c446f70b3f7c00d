"""``gpuroute table``: the many-to-many distance table between two sets of nodes with a saved contraction
hierarchy (:meth:`gpuroute.ch.ContractionHierarchy.table`), optionally saved as an (|S|, |T|) ``.npy``, run
over a Dask cluster with ``--scheduler`` (:func:`gpuroute.distributed.table`), its distances drawn as a
histogram with ``--plot``.

Each set is a ``.npy`` file of internal node ids, or a CSV text file of ``LON,LAT`` lines (``X,Y`` on a
planar graph; a header line is optional) snapped with :func:`gpuroute.geo.nearest_nodes`."""
from __future__ import annotations

import math
import os
import re
import time

import numpy as np

from .common import (
    DEVICES,
    EXIT_OK,
    CLIError,
    check_device,
    fmt_int,
    fmt_ms,
    fmt_num,
    graph_line,
    open_ch,
    output_path,
    print_rows,
    progress,
)


def read_points(path):
    """``(x float64 (k,), y float64 (k,), lines int (k,))`` from a CSV file of ``X,Y`` lines.

    Blank lines and lines starting with ``#`` are skipped; the first other line may be a header (it is
    skipped when it does not hold two numbers).

    Raises
    ------
    ParseError
        Naming the file and line: not two comma-separated finite numbers, or no point at all.
    """
    from ..graph.errors import ParseError

    xs, ys, lines = [], [], []
    first = True
    try:
        f = open(path, encoding="utf-8")
    except IsADirectoryError:
        raise CLIError(f"{path} is a directory, not a .npy or CSV file") from None
    with f:
        try:
            for i, raw in enumerate(f, start=1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                parts = [p.strip() for p in line.split(",")]
                try:
                    if len(parts) != 2:
                        raise ValueError
                    x, y = float(parts[0]), float(parts[1])
                except ValueError:
                    if first:
                        first = False
                        continue  # a header
                    raise ParseError(path, i, f"expected LON,LAT (two comma-separated numbers), got {line[:60]!r}") from None
                first = False
                if not (math.isfinite(x) and math.isfinite(y)):
                    raise ParseError(path, i, f"{line[:60]!r} is not a position: both numbers must be finite")
                xs.append(x)
                ys.append(y)
                lines.append(i)
        except UnicodeDecodeError:
            raise ParseError(path, None, "not UTF-8 text (expected a .npy file of node ids or a CSV of LON,LAT)") from None
    if not xs:
        raise ParseError(path, None, "holds no LON,LAT point")
    return np.asarray(xs), np.asarray(ys), np.asarray(lines)


def read_nodes(graph, path, opt, snapping="default"):
    """Internal node ids from ``path``: a ``.npy`` of ids, or a CSV of points snapped to nodes.

    Returns
    -------
    nodes : ndarray int64 (k,)
    how : str
        A phrase for the summary (``"node ids"``, or the points and their largest snap distance).

    Raises
    ------
    CLIError
        Missing file, a ``.npy`` that is not a 1-D integer array or holds an id outside the graph, a point
        outside the graph's range or bounding box (naming the file and line).
    ParseError
        A malformed CSV line.
    """
    from ..geo import OutOfBoundsError, SnapError, nearest_nodes

    if not os.path.exists(path):
        raise CLIError(f"{opt} {path}: no such file")
    n = graph.n_nodes
    if path.lower().endswith(".npy"):
        try:
            a = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise CLIError(f"{opt} {path}: not a readable .npy array ({e})") from None
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise CLIError(f"{opt} {path}: expected a 1-D array of integer node ids, got {a.dtype}{list(a.shape)}")
        a = a.astype(np.int64)
        bad = np.flatnonzero((a < 0) | (a >= n))
        if bad.size:
            i = int(bad[0])
            raise CLIError(f"{opt} {path}: entry {i} is node {int(a[i])}, outside the internal node range [0, {n}) "
                           f"of {graph.name!r}")
        if not a.size:
            raise CLIError(f"{opt} {path}: holds no node id")
        return a, f"{fmt_int(a.size)} node ids from {path}"
    if graph.coords is None:
        raise CLIError(f"graph {graph.name!r} has no node coordinates: {opt} must be a .npy of node ids")
    x, y, lines = read_points(path)
    if not graph.is_planar:
        bad = np.flatnonzero((np.abs(x) > 180) | (np.abs(y) > 90))
        if bad.size:
            i = int(bad[0])
            raise CLIError(f"{opt} {path}:{int(lines[i])}: {x[i]:g},{y[i]:g} is not a position: longitude must be in "
                           f"[-180, 180] and latitude in [-90, 90] (graph {graph.name!r} is lon/lat)")
    try:
        nodes, offsets = nearest_nodes(graph, x, y, snapping=snapping)
    except (OutOfBoundsError, SnapError) as e:
        m = re.match(r"point (\d+)", str(e))
        where = f"{path}:{int(lines[int(m.group(1))])}" if m else path
        raise CLIError(f"{opt} {where}: {e}") from e
    unit = "units" if graph.is_planar else "m"
    return nodes.astype(np.int64), (f"{fmt_int(nodes.size)} points from {path}, snapped at most "
                                    f"{float(offsets.max()):,.1f} {unit} away")


def run(args):
    from ..backend import resolve_device
    from ..graph import INF

    if not args.scheduler:
        check_device(args.device)
    elif args.block is not None and args.block < 1:
        raise CLIError(f"--block must be >= 1, got {args.block}")
    out = output_path(args.output) if args.output else None
    if args.plot:
        output_path(args.plot)
    ch, graph, t_load = open_ch(args.ch, args.graph)
    weight = ch.weight
    unit = graph.units[weight]
    t0 = time.perf_counter()
    sources, s_how = read_nodes(graph, args.sources, "--sources", args.snapping)
    targets, t_how = read_nodes(graph, args.targets, "--targets", args.snapping)
    t_read = time.perf_counter() - t0
    device = resolve_device(args.device) if not args.scheduler else args.device

    t0 = time.perf_counter()
    where = device
    with progress(f"table {sources.size} x {targets.size} on {graph.name}"):
        if args.scheduler:
            from ..distributed import connect
            from ..distributed import table as dist_table

            with connect(args.scheduler, n_workers=args.workers) as client:
                t0 = time.perf_counter()
                d = np.asarray(dist_table(client, ch, sources, targets, block=args.block, device=args.device),
                               dtype=np.int64)
                n_workers = len(client.scheduler_info().get("workers", {}))
            where = f"{fmt_int(n_workers)} Dask worker(s) at {args.scheduler} ({args.device} device requested)"
        else:
            d = np.asarray(ch.table(sources, targets, device=device), dtype=np.int64)
    t_table = time.perf_counter() - t0
    d = d.reshape(sources.size, targets.size)

    reach = d < INF
    n_reach = int(reach.sum())
    rows = [("graph", graph_line(graph, weight)),
            ("hierarchy", f"{args.ch} ({ch.method}, {fmt_int(ch.h.n_levels)} levels, core {fmt_int(ch.h.core.size)})"),
            ("sources", s_how),
            ("targets", t_how),
            ("table", f"{fmt_int(d.shape[0])} x {fmt_int(d.shape[1])} on {where}"),
            ("reachable", f"{fmt_int(n_reach)} of {fmt_int(d.size)} pairs ({100 * n_reach / max(d.size, 1):.1f}%)")]
    if n_reach:
        v = d[reach]
        rows.append(("distance", f"min {fmt_int(v.min())}, median {fmt_num(np.median(v))}, max {fmt_int(v.max())} "
                                 f"{unit.symbol} (reachable pairs)"))
    rows.append(("time", f"table {fmt_ms(t_table)} (load {fmt_ms(t_load)}, read and snap {fmt_ms(t_read)}; the "
                         "first call in a process includes kernel compilation)"))
    if out:
        from ..store.atomic import write_npy_atomic

        write_npy_atomic(out, d)
        rows.append(("saved", f"{out} (int64 ({d.shape[0]}, {d.shape[1]}); INF = {INF} where unreachable)"))
    if args.plot:
        from ..accessibility.plot import travel_time_histogram

        v = np.where(reach, d, 0).astype(np.float64)
        v[~reach] = np.nan
        travel_time_histogram(v, args.plot, unit=unit.symbol, title=f"{graph.name}: {d.shape[0]:,} x {d.shape[1]:,}")
        rows.append(("plot", os.path.abspath(args.plot)))
    print_rows(rows)
    return EXIT_OK


def add_parser(sub, common):
    from ..geo import SNAPPING

    t = sub.add_parser("table", parents=[common], help="many-to-many distance table, with a hierarchy",
                       description="Distances from every source to every target over a saved contraction hierarchy "
                                   "(gpuroute contract). FILE: a .npy of internal node ids, or a CSV of LON,LAT "
                                   "lines (X,Y on a planar graph; header optional) snapped to the nearest nodes.")
    t.add_argument("--ch", required=True, metavar="DIR", help="a saved contraction hierarchy")
    t.add_argument("--graph", metavar="PATH|NAME", default=None,
                   help="its graph (default: reopened from the hierarchy's manifest)")
    t.add_argument("--sources", required=True, metavar="FILE", help="sources: .npy of node ids or CSV of LON,LAT")
    t.add_argument("--targets", required=True, metavar="FILE", help="targets: .npy of node ids or CSV of LON,LAT")
    t.add_argument("--device", choices=DEVICES, default="auto")
    t.add_argument("--snapping", choices=SNAPPING, default="default",
                   help="default: only nodes of the largest strongly connected component; any: every node")
    t.add_argument("--output", metavar="FILE.npy",
                   help="save the int64 (|S|, |T|) distance matrix (INF where unreachable)")
    t.add_argument("--scheduler", metavar="ADDRESS|local|local-cuda", default=None,
                   help="run over a Dask cluster (gpuroute.distributed): a scheduler address, 'local' (CPU worker "
                        "processes) or 'local-cuda' (one worker per GPU, dask-cuda)")
    t.add_argument("--block", type=int, default=None, metavar="B", help="with --scheduler: sources per task")
    t.add_argument("--workers", type=int, default=None, metavar="N",
                   help="with --scheduler local or local-cuda: how many workers")
    t.add_argument("--plot", metavar="PNG", help="draw a histogram of the reachable distances")
    t.set_defaults(func=run)
    return t
