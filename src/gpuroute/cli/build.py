"""``gpuroute build``: every stage of the routing engine into one dataset directory -- import (the graph
with names, attributes and turn restrictions), contract (the hierarchy for ``travel_time``), partition
and customize (the overlay for the metric ``"time"``: the same travel times, no turn penalties) --
written atomically with a manifest (:func:`gpuroute.engine.dataset.build_dataset`), for ``gpuroute serve
DIR`` and :meth:`gpuroute.engine.Engine.open`; a summary on stdout (or ``--json``)."""
from __future__ import annotations

import json
import sys

from .common import DEFAULT_GRAPH, EXIT_OK, fmt_int, fmt_ms, log, print_rows, progress
from .partition import parse_cell_sizes


def run(args):
    from ..engine.dataset import build_dataset

    spec = args.graph
    with progress(f"building {spec}"):
        s = build_dataset(spec, args.output, profile=args.profile, cell_sizes=args.cell_sizes,
                          progress=lambda stage: log.info("build: %s", stage))
    if args.json:
        json.dump(s, sys.stdout)
        sys.stdout.write("\n")
        return EXIT_OK
    g = s["graph"]
    sec = s["seconds"]
    print_rows([("graph", f"{g['name']} ({fmt_int(g['nodes'])} nodes, {fmt_int(g['arcs'])} arcs)"),
                ("cells", " / ".join(fmt_int(n) for n in s["n_cells"]) + " (per level, finest first; sizes "
                 + ",".join(str(c) for c in s["cell_sizes"]) + ")"),
                ("time", ", ".join(f"{k} {fmt_ms(v)}" for k, v in sec.items())
                 + f"; total {fmt_ms(s['total_seconds'])}"),
                ("saved", s["directory"]),
                ("serve", f"gpuroute serve {s['directory']}")])
    return EXIT_OK


def add_parser(sub, common):
    c = sub.add_parser("build", parents=[common], help="build a dataset directory: every stage, for gpuroute serve",
                       description="Run every stage (import, contract, partition, customize) into one dataset "
                                   "directory with a manifest, written atomically; gpuroute serve DIR loads it "
                                   "without building. The hierarchy and the overlay use the profile's travel time "
                                   "(no turn penalties), so they agree until traffic is applied (POST /customize).")
    c.add_argument("graph", nargs="?", default=DEFAULT_GRAPH, metavar="GRAPH",
                   help=f"a shipped name, an OSM extract or another graph file (default {DEFAULT_GRAPH})")
    c.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="dataset directory (new, empty, or a dataset directory to replace)")
    c.add_argument("--profile", default="car", help="routing profile of an OSM extract (default car)")
    c.add_argument("--cell-sizes", type=parse_cell_sizes, default=None, metavar="U0,U1,...",
                   help="largest cell size per partition level, finest first (default 256,4096,65536, the "
                        "levels smaller than the graph)")
    c.add_argument("--json", action="store_true", help="print the summary as a JSON object")
    c.set_defaults(func=run)
    return c
