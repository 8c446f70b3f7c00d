"""``gpuroute contract``: build a contraction hierarchy of a graph and save it
(:meth:`gpuroute.ch.ContractionHierarchy.build` + :func:`gpuroute.ch.store.save_hierarchy`); one stderr
line per stage (load, contract, save) start and end with its time, a summary on stdout, the
per-iteration statistics logged at INFO (``-v``)."""
from __future__ import annotations

import contextlib
import re
import time

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
    log,
    pick_weight,
    print_rows,
    progress,
    stage,
    stderr_is_tty,
)

PROG = "gpuroute contract"

_STEP_TIME = re.compile(r"^time_(.+)_s$")


def step_times(stats):
    """``[(step, seconds)]`` from a build's statistics: ``phase_time_s`` (a mapping), ``totals``'
    ``time_<step>_s`` entries (sums over iterations) and scalar ``time_<step>_s`` entries, in that order,
    each step once."""
    out = {}
    phases = stats.get("phase_time_s")
    if isinstance(phases, dict):
        out.update({str(k): float(v) for k, v in phases.items() if isinstance(v, (int, float))})
    for src in (stats.get("totals"), stats):
        if not isinstance(src, dict):
            continue
        for k, v in src.items():
            m = _STEP_TIME.match(str(k))
            if m and isinstance(v, (int, float)) and not isinstance(v, bool):
                out.setdefault(m.group(1), float(v))
    return list(out.items())


def log_iterations(stats):
    """Log (INFO) one line per iteration from the per-iteration lists of ``stats`` (those of the most
    common length)."""
    lists = {k: v for k, v in stats.items() if isinstance(v, list) and v}
    if not lists:
        return 0
    lengths = [len(v) for v in lists.values()]
    n_it = max(set(lengths), key=lengths.count)
    cols = {k: v for k, v in lists.items() if len(v) == n_it}
    for i in range(n_it):
        parts = []
        for k, v in cols.items():
            x = v[i]
            parts.append(f"{k}={x * 1e3:.1f}ms" if _STEP_TIME.match(k) and isinstance(x, float) else f"{k}={x}")
        log.info("iteration %d: %s", i, ", ".join(parts))
    return n_it


def run(args):
    from ..backend import resolve_device
    from ..ch import ContractionHierarchy
    from ..ch.store import check_replaceable

    if args.method == "sequential" and (args.K is not None or args.C is not None):
        raise CLIError("-K and -C are options of --method cu-ch (the sequential CH has none)")
    if args.method == "sequential" and args.device == "gpu":
        raise CLIError("--method sequential runs on the CPU; use --method cu-ch on the GPU")
    check_device(args.device)
    out = check_replaceable(args.output)  # before any work: never write over something else
    with stage(PROG, f"loading {args.graph}"):
        graph, t_load = load(args.graph, METRICS.get(args.metric))
    if args.weight is not None:
        if args.weight not in graph.weights:
            raise CLIError(f"graph {graph.name!r} has no weight {args.weight!r}; it has {', '.join(graph.weights)}")
        weight = args.weight
    else:
        weight = pick_weight(graph, args.metric)
    options = {k: v for k, v in (("K", args.K), ("C", args.C)) if v is not None}
    # the CPU builders draw their own progress bar; the GPU build gets a spinner
    gpu = resolve_device(args.device, args.method == "cu-ch") == "gpu"
    t0 = time.perf_counter()
    with stage(PROG, f"contracting {graph.name} for {weight} ({args.method} on {'gpu' if gpu else 'cpu'})"), \
            progress(f"contracting {graph.name} ({args.method} on the GPU)") if gpu else contextlib.nullcontext():
        ch = ContractionHierarchy.build(graph, weight, method=args.method, device=args.device,
                                        progress=stderr_is_tty(), **options)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    with stage(PROG, f"saving {out}"):
        ch.save(out)
    t_save = time.perf_counter() - t0
    st = ch.stats
    n_it = log_iterations(st)
    h = ch.h
    rows = [("graph", graph_line(graph, weight)),
            ("method", f"{ch.method} on {st.get('device', '?')}"
                       + (f" ({', '.join(f'{k}={v}' for k, v in ch.params.items())})" if ch.params else "")),
            ("nodes", fmt_int(h.n_nodes)),
            ("hierarchy arcs", f"{fmt_int(h.n_up + h.n_down)} ({fmt_int(h.n_up)} up, {fmt_int(h.n_down)} down)"),
            ("shortcuts", f"{fmt_int(h.n_shortcuts)} (hierarchy arcs that are not arcs of the graph)"),
            ("levels", fmt_int(h.n_levels)),
            ("core", f"{fmt_int(h.core.size)} nodes" + (f" (level {h.core_level})" if h.core.size else ""))]
    if n_it:
        rows.append(("iterations", f"{fmt_int(n_it)} (each logged with -v)"))
    steps = step_times(st)
    build_s = float(st.get("time_s", t_build))
    rows.append(("time", f"build {fmt_ms(build_s)} (load {fmt_ms(t_load)}, save {fmt_ms(t_save)})"))
    if steps:
        rows.append(("", ", ".join(f"{k} {fmt_ms(v)}" for k, v in steps)))
    rows.append(("saved", out))
    print_rows(rows)
    log.info("contract: %r saved to %s", ch, out)
    return EXIT_OK


def add_parser(sub, common):
    from ..ch import METHODS

    c = sub.add_parser("contract", parents=[common], help="build a contraction hierarchy and save it",
                       description="Contract a graph into a hierarchy (CU-CH on the GPU or its CPU twin, or the "
                                   "sequential CH) and save it as a directory for route/tree/table --ch.")
    c.add_argument("graph", nargs="?", default=DEFAULT_GRAPH, metavar="GRAPH",
                   help=f"graph name or path (default {DEFAULT_GRAPH})")
    c.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="directory to write (replaced only if it holds a saved hierarchy)")
    w = c.add_mutually_exclusive_group()
    w.add_argument("--weight", metavar="NAME", default=None, help="weight to contract for (default: the first)")
    w.add_argument("--metric", choices=tuple(METRICS), default=None,
                   help="distance or time (for ny, time loads ny-time)")
    c.add_argument("--method", choices=METHODS, default="cu-ch",
                   help="cu-ch (Karimi et al. 2019; GPU or CPU) or sequential (Geisberger et al. 2008; CPU)")
    c.add_argument("--device", choices=DEVICES, default="auto")
    c.add_argument("-K", type=int, default=None, metavar="N",
                   help="cu-ch: stop contracting when fewer than N nodes remain (the core)")
    c.add_argument("-C", type=float, default=None, metavar="F",
                   help="cu-ch: fraction of the remaining nodes considered per iteration")
    c.set_defaults(func=run)
    return c

