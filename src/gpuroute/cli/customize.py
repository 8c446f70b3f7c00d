"""``gpuroute customize``: the second stage of Customizable Route Planning -- customize the overlay of a
directory made by ``gpuroute partition`` for a metric, optionally apply traffic (a CSV of ``arc_id,cost``
rows), and save it for ``gpuroute route --overlay`` (:func:`gpuroute.pipeline.overlay_dir.run_customize`); a
summary with the customization time per level on stdout (or ``--json``); one stderr line per stage (load,
customize) start and end with its time.

``gpuroute customize DIR --reset`` on a dataset directory (``gpuroute build``) deletes the traffic a served
engine saved there (``DIR/traffic.npz``, :func:`gpuroute.engine.dataset.drop_traffic`): the next ``gpuroute
serve DIR`` starts from the built metric."""
from __future__ import annotations

import json
import os
import sys

from .common import (
    DEVICES,
    EXIT_OK,
    CLIError,
    check_device,
    fmt_int,
    fmt_ms,
    load,
    log,
    print_rows,
    progress,
    stage,
)

PROG = "gpuroute customize"


def reset(args):
    """``--reset``: delete a dataset directory's saved traffic."""
    from ..engine.dataset import TRAFFIC, drop_traffic, is_dataset

    if args.metric is not None or args.traffic is not None:
        raise CLIError(f"{PROG}: --reset takes no --metric or --traffic (it only deletes the saved traffic)")
    if not is_dataset(args.directory):
        raise CLIError(f"{args.directory}: not a dataset directory (gpuroute build GRAPH -o DIR); --reset deletes "
                       f"the {TRAFFIC} a served dataset directory keeps")
    path = os.path.join(os.path.abspath(args.directory), TRAFFIC)
    if drop_traffic(args.directory):
        print(f"deleted {path}: the next gpuroute serve {args.directory} starts from the built metric (a server "
              "running now keeps its traffic and saves it again on its next customization)")
    else:
        print(f"no saved traffic in {args.directory} ({path} does not exist)")
    return EXIT_OK


def run(args):
    from .. import datasets
    from ..pipeline.customize import metric_weight, read_traffic, resolve_metric_spec
    from ..pipeline.overlay_dir import graph_spec, read_manifest, run_customize

    if args.reset:
        return reset(args)
    if args.metric is None:
        raise CLIError(f"{PROG}: --metric is required (or --reset on a dataset directory)")
    check_device(args.device)
    read_manifest(args.directory)  # before any work: an overlay directory
    resolve_metric_spec(args.metric)  # a bad name or profile is reported before the graph is loaded
    if args.traffic is not None:
        read_traffic(args.traffic)  # a bad row is reported before the graph is loaded
    spec = datasets.for_weight(graph_spec(args.directory), metric_weight(args.metric))
    with stage(PROG, f"loading {spec}"):
        graph, t_load = load(spec)
    with stage(PROG, f"customizing {graph.name} for {args.metric} and saving {args.directory}"), \
            progress(f"customizing {graph.name}"):
        s = run_customize(args.directory, args.metric, graph=graph, spec=spec, traffic=args.traffic, device=args.device)
    log.info("customize: %s saved to %s", s["metric"], s["directory"])
    if args.json:
        s["load_seconds"] = t_load
        json.dump(s, sys.stdout)
        sys.stdout.write("\n")
        return EXIT_OK
    m = s["metric"]
    rows = [("graph", f"{graph.name} ({fmt_int(graph.n_nodes)} nodes, {fmt_int(graph.n_arcs)} arcs)"),
            ("metric", f"{m['name']}" + (f" [{m['unit']}]" if m["unit"] else "")
             + (f" from {m['spec']}" if m["spec"] and m["spec"] != m["name"] else "")),
            ("cells", " / ".join(fmt_int(n) for n in s["n_cells"]) + " (per level, finest first)"),
            ("customize", f"{fmt_ms(s['seconds'])}: " + ", ".join(f"level {i} {fmt_ms(t)}"
                                                                  for i, t in enumerate(s["level_seconds"])))]
    t = s["traffic"]
    if t is not None:
        rows.append(("traffic", f"{fmt_int(t['rows'])} rows, {fmt_int(t['arcs'])} arcs from {t['file']}"))
        rows.append(("", f"{fmt_ms(t['seconds'])}: " + ", ".join(
            f"level {i} {fmt_int(c)} cells {fmt_ms(x)}" for i, (c, x) in enumerate(zip(t["cells"], t["level_seconds"],
                                                                                     strict=True)))))
    rows.append(("time", f"load {fmt_ms(t_load)}, topology {fmt_ms(s['build_seconds'])}, "
                         f"save {fmt_ms(s['save_seconds'])}"))
    rows.append(("saved", s["directory"]))
    print_rows(rows)
    return EXIT_OK


def add_parser(sub, common):
    c = sub.add_parser("customize", parents=[common], help="customize a partitioned overlay for a metric (CRP)",
                       description="Customizable Route Planning, stage 2: customize the overlay of a directory made "
                                   "by gpuroute partition for a metric, apply traffic if given, and save it for "
                                   "gpuroute route --overlay (the previous customization is replaced only on "
                                   "success). With --reset on a dataset directory (gpuroute build): delete the "
                                   "traffic gpuroute serve saved there, so that the next start uses the built "
                                   "metric.")
    c.add_argument("directory", metavar="DIR", help="overlay directory (gpuroute partition GRAPH -o DIR), or a "
                                                    "dataset directory with --reset")
    c.add_argument("--metric", default=None, metavar="distance|time|time-uturn|PROFILE",
                   help="required (but with --reset): a metric name (time-uturn: time plus 100 s per U-turn) or a "
                        "profile JSON file (speeds_kmh per road class, turn_penalties_s per turn type)")
    c.add_argument("--traffic", metavar="CSV", default=None,
                   help="new arc costs: arc_id,cost rows (header optional; arc ids are the graph's arc positions, "
                        "costs in the metric's unit, or the word closed: the arc is closed, as a speed of 0)")
    c.add_argument("--device", choices=DEVICES, default="auto", help="the customization runs on the CPU")
    c.add_argument("--json", action="store_true", help="print the summary as a JSON object")
    c.add_argument("--reset", action="store_true",
                   help="dataset directory: delete its saved traffic (DIR/traffic.npz, what POST /customize "
                        "saved); the next gpuroute serve DIR starts from the built metric")
    c.set_defaults(func=run)
    return c
