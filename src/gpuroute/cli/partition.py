"""``gpuroute partition``: the first stage of Customizable Route Planning -- a nested multi-level
partition of a graph saved as an overlay directory (:func:`gpuroute.pipeline.overlay_dir.run_partition`), for
``gpuroute customize`` and ``gpuroute route --overlay``; one stderr line per stage (load, partition)
start and end with its time, a summary on stdout (or ``--json``)."""
from __future__ import annotations

import argparse
import json
import sys

from .common import (
    DEFAULT_GRAPH,
    EXIT_OK,
    fmt_int,
    fmt_ms,
    graph_line,
    load,
    log,
    print_rows,
    progress,
    stage,
)

PROG = "gpuroute partition"


def parse_cell_sizes(text):
    """``"256,4096,65536"`` -> ``(256, 4096, 65536)`` (the checks on the values are the partitioner's).

    Raises
    ------
    argparse.ArgumentTypeError
        Not comma-separated integers.
    """
    try:
        sizes = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated cell sizes, finest level first (e.g. "
                                         f"256,4096,65536), got {text!r}") from None
    return sizes


def run(args):
    from ..pipeline.overlay_dir import check_replaceable, run_partition

    out = check_replaceable(args.output)  # before any work: never write over something else
    with stage(PROG, f"loading {args.graph}"):
        graph, t_load = load(args.graph)
    with stage(PROG, f"partitioning {graph.name} and saving {out}"), progress(f"partitioning {graph.name}"):
        s = run_partition(graph, out, spec=args.graph, cell_sizes=args.cell_sizes, method=args.method,
                          seed=args.seed)
    log.info("partition: %s saved to %s", s["n_cells"], out)
    if args.json:
        s["load_seconds"] = t_load
        json.dump(s, sys.stdout)
        sys.stdout.write("\n")
        return EXIT_OK
    rows = [("graph", graph_line(graph)),
            ("method", f"{s['method']} (seed {s['seed']})")]
    for lvl, (size, n, b) in enumerate(zip(s["cell_sizes"], s["n_cells"], s["boundary_arcs"], strict=True)):
        rows.append((f"level {lvl}", f"{fmt_int(n)} cells of at most {fmt_int(size)} nodes, {fmt_int(b)} boundary arcs"))
    rows.append(("time", f"partition {fmt_ms(s['seconds'])} (load {fmt_ms(t_load)}, save {fmt_ms(s['save_seconds'])})"))
    rows.append(("saved", out))
    print_rows(rows)
    return EXIT_OK


def add_parser(sub, common):
    from .. import config
    from ..partition.multilevel import METHODS

    c = sub.add_parser("partition", parents=[common], help="partition a graph for CRP (first stage)",
                       description="Customizable Route Planning, stage 1: partition a graph into nested cells "
                                   "(metric-independent) and start an overlay directory for gpuroute customize "
                                   "and gpuroute route --overlay.")
    c.add_argument("graph", nargs="?", default=DEFAULT_GRAPH, metavar="GRAPH",
                   help=f"graph name or path (default {DEFAULT_GRAPH})")
    c.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="overlay directory to write (an existing one gets the new partition; anything else "
                        "is refused)")
    c.add_argument("--cell-sizes", type=parse_cell_sizes, default=None, metavar="U0,U1,...",
                   help="most nodes per cell of each level, finest first (default "
                        f"{','.join(map(str, config.CRP_CELL_SIZES))})")
    c.add_argument("--method", choices=METHODS, default=None,
                   help=f"kahip (KaHIP's kaffpa) or inertial (inertial flow on the coordinates); default "
                        f"{config.CRP_PARTITION_METHOD}")
    c.add_argument("--seed", type=int, default=0, metavar="N", help="kaffpa's seed (default 0)")
    c.add_argument("--json", action="store_true", help="print the summary as a JSON object")
    c.set_defaults(func=run)
    return c
