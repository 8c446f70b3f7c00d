"""``gpuroute info``: sizes, cleaning, degrees, weights with units, arc attributes, turn restrictions,
bounding box and connectivity of a graph (:func:`gpuroute.graph.stats.graph_stats`)."""
from __future__ import annotations

import json
import time

from .common import DEFAULT_GRAPH, EXIT_OK, fmt_int, fmt_ms, fmt_num, load, print_rows, progress


def run(args):
    from ..graph.stats import graph_stats

    graph, t_load = load(args.graph)
    t0 = time.perf_counter()
    with progress("computing statistics"):
        st = graph_stats(graph)
    t_stats = time.perf_counter() - t0
    if args.json:
        print(json.dumps(st))
        return EXIT_OK
    n = st["nodes"]
    rows = [("graph", st["name"] + (f" ({st['source']})" if st["source"] else "")),
            ("nodes", fmt_int(n)),
            ("arcs", fmt_int(st["arcs"]))]
    if st["self_loops_dropped"] is not None or st["parallel_arcs_dropped"] is not None:
        rows.append(("dropped at load", f"{fmt_int(st['self_loops_dropped'] or 0)} self-loops, "
                                        f"{fmt_int(st['parallel_arcs_dropped'] or 0)} parallel arcs"))
    d = st["out_degree"]
    rows.append(("out-degree", f"min {d['min']}, mean {d['mean']:.2f}, max {d['max']}"))
    labels = ["0", "1", "2", "3", "4", "5+"]
    rows.append(("", "  ".join(f"{lab}: {fmt_int(h)}" for lab, h in zip(labels, d["histogram"], strict=True))))
    for name, w in st["weights"].items():
        unit = graph.units[name]
        sym = f" [{unit.symbol}]" if unit.symbol else ""
        if "min" in w:
            reading = unit.describe(w["median"])
            rows.append((f"weight {name}", f"{unit.quantity}{sym}: min {fmt_int(w['min'])}, median {fmt_num(w['median'])}"
                                           f"{' (' + reading + ')' if reading else ''}, mean {w['mean']:,.1f}, "
                                           f"max {fmt_int(w['max'])}"))
        else:
            rows.append((f"weight {name}", f"{unit.quantity}{sym}: (no arcs)"))
        if unit.note:
            rows.append(("", unit.note))
    if st["arc_attributes"]:
        rows.append(("arc attributes", ", ".join(f"{k} ({v['dtype']}{', ' + v['unit'] if v['unit'] else ''})"
                                                 for k, v in st["arc_attributes"].items())))
    t = st["turns"]
    if t is not None:
        more = ", ".join(f"{k.replace('_', ' ')} {fmt_int(v)}" for k, v in t.items() if k not in ("no", "only", "total"))
        rows.append(("turn restrictions", f"{fmt_int(t['total'])} ({fmt_int(t['no'])} no, {fmt_int(t['only'])} only)"
                                          + (f"; {more}" if more else "")))
    else:
        rows.append(("turn restrictions", "none (this format has no turn information)"))
    if st["bbox"] is not None:
        x0, y0, x1, y1 = st["bbox"]
        axes = ("lon", "lat") if not graph.is_planar else ("x", "y")
        rows.append(("bbox", f"{axes[0]} {x0:.6f} .. {x1:.6f}, {axes[1]} {y0:.6f} .. {y1:.6f}"
                             + (" (planar)" if graph.is_planar else "")))
    else:
        rows.append(("bbox", "no coordinates"))
    for kind, label in (("strong", "strongly connected"), ("weak", "weakly connected")):
        c = st[kind]
        share = f" = {100 * c['largest'] / n:.1f}%" if n else ""
        plural = "" if c["count"] == 1 else "s"
        rows.append((label, f"{fmt_int(c['count'])} component{plural}, largest {fmt_int(c['largest'])} nodes{share}"))
    rows.append(("time", f"load {fmt_ms(t_load)}, statistics {fmt_ms(t_stats)}"))
    print_rows(rows)
    return EXIT_OK


def add_parser(sub, common):
    i = sub.add_parser("info", parents=[common], help="statistics of a graph",
                       description="Nodes, arcs, cleaning, degrees, weights and their units, arc attributes, turn "
                                   "restrictions, bounding box and connectivity.")
    i.add_argument("graph", nargs="?", default=DEFAULT_GRAPH, metavar="GRAPH",
                   help=f"graph name or path (default {DEFAULT_GRAPH})")
    i.add_argument("--json", action="store_true", help="print the statistics as JSON")
    i.set_defaults(func=run)
    return i
