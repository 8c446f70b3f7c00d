"""``gpuroute build``: every stage of the routing engine into one dataset directory -- import (the graph
with names, attributes and turn restrictions), contract (the hierarchy for the routing weight), partition
and customize (the overlay for the same weight, no turn penalties) -- written atomically with a manifest
(:mod:`gpuroute.pipeline`: one stage per step, :func:`gpuroute.pipeline.build_dataset`), for ``gpuroute serve DIR`` and
:meth:`gpuroute.engine.Engine.open`. One stderr line per stage start and end with its time (as OSRM logs
its stages) and one naming the routing weight; a summary on stdout (or ``--json``).

``--profile`` reads an OSM extract with OSRM's ``car`` (default), ``bicycle`` or ``foot`` Lua profile, any
OSRM ``.lua`` profile file, or gpuroute's native ``car-basic`` (:func:`gpuroute.io.load_osm`). A profile
that does not parse or raises is reported with its file and line, an unsupported profile API by name,
and nothing is written.

The routing weight is ``--weight``, else the profile's weight for a Lua profile (car.lua's
``routability``: the overlay is customized with its arc and turn weights, routes report OSRM's
``weight``, ``weight_name`` and ``duration`` with turn durations), else ``travel_time`` when the graph has
it, else its first weight (``distance`` on ``ny``: routes then report no duration; ``ny-time`` has the
travel times). A source with nothing to route on (an OSM extract without a way the profile may use) is
refused with exit code 2 and nothing written.

At its end it compiles every kernel the server's services use into numba's cache (``gpuroute warmup DIR``,
:mod:`gpuroute.cli.warmup`), so that ``gpuroute serve DIR`` starts without compiling; ``--no-warmup`` skips
that, as does the environment variable ``GPUROUTE_BUILD_WARMUP=0`` (for CI and test suites that build
datasets), and ``--cache-dir DIR`` chooses the cache (numba's ``NUMBA_CACHE_DIR``)."""
from __future__ import annotations

import json
import os
import sys
import time

from .common import (
    DEFAULT_GRAPH,
    EXIT_OK,
    CLIError,
    fmt_int,
    fmt_ms,
    fmt_seconds,
    log,
    print_rows,
    weight_line,
)
from .partition import parse_cell_sizes

PROG = "gpuroute build"

#: The environment variable that turns the warm-up at the end of a build off (``0``) or on (``1``, the default).
WARMUP_ENV = "GPUROUTE_BUILD_WARMUP"


def warmup_wanted(args):
    """Whether the build ends with the warm-up: not with ``--no-warmup``, nor with ``GPUROUTE_BUILD_WARMUP=0``.

    Raises
    ------
    CLIError
        ``GPUROUTE_BUILD_WARMUP`` set to something other than ``0`` or ``1``.
    """
    env = os.environ.get(WARMUP_ENV, "1").strip()
    if env not in ("0", "1", ""):
        raise CLIError(f"{WARMUP_ENV}={env!r}: expected 0 (no warm-up) or 1 (warm up, the default)")
    return bool(getattr(args, "warmup", True)) and env != "0"


def _stage_printer():
    """``progress(stage, seconds)`` for :func:`build_dataset`: one stderr line per start and end."""
    starts = {}

    def say(stage, seconds):
        if seconds is None:
            starts[stage] = time.perf_counter()
            print(f"{PROG}: {stage} ...", file=sys.stderr, flush=True)
        else:
            print(f"{PROG}: {stage} done in {fmt_seconds(seconds)}", file=sys.stderr, flush=True)
        log.info("build: %s%s", stage, "" if seconds is None else f" done in {seconds:.3f} s")

    return say


def run(args):
    from ..pipeline.build import build_dataset
    from .warmup import apply_cache_dir

    apply_cache_dir(getattr(args, "cache_dir", None), PROG)  # before anything compiles: the build's kernels too
    warm_after = warmup_wanted(args)
    spec = args.graph
    s = build_dataset(spec, args.output, profile=args.profile, weight=args.weight, cell_sizes=args.cell_sizes,
                      progress=_stage_printer(), time_profile=args.time_profile)
    g = s["graph"]
    missing = g.get("ways_missing_nodes", 0)
    if missing:
        print(f"{PROG}: warning: {fmt_int(missing)} routable ways of {spec} have nodes missing from the file "
              f"({fmt_int(g.get('segments_missing_location', 0))} segments dropped; an extract cut without "
              "complete ways?)", file=sys.stderr)
    _print_weight(s, spec)
    warm = None
    if warm_after:
        from .warmup import default_jobs, warm_dataset

        warm = warm_dataset(s["directory"], jobs=default_jobs(), prog=PROG)
        s["warmup"] = {"seconds": warm["seconds"], "services": warm["services"], "failed": warm["failed"],
                       "compiled": {k: len(v) for k, v in warm["compiled"].items()},
                       "children": warm.get("children"), "cpu_paths": warm.get("cpu_paths")}
        if warm["failed"]:
            print(f"{PROG}: warning: {len(warm['failed'])} warm-up requests failed (gpuroute serve compiles what "
                  f"they needed on their first call): {warm['failed'][0]}", file=sys.stderr)
    if args.json:
        json.dump(s, sys.stdout)
        sys.stdout.write("\n")
        return EXIT_OK
    sec = s["seconds"]
    rows = [("graph", f"{g['name']} ({fmt_int(g['nodes'])} nodes, {fmt_int(g['arcs'])} arcs)"),
            ("weight", f"{s['weight']}" + (f" [{s['unit']['symbol']}]" if (s.get("unit") or {}).get("symbol") else "")
             + f" (overlay metric {s['metric']!r})")]
    if missing:
        rows.append(("incomplete", f"{fmt_int(missing)} ways with nodes missing from the file "
                                   f"({fmt_int(g.get('segments_missing_location', 0))} segments dropped)"))
    rows += [("cells", " / ".join(fmt_int(n) for n in s["n_cells"]) + " (per level, finest first; sizes "
              + ",".join(str(c) for c in s["cell_sizes"]) + ")"),
             ("time", ", ".join(f"{k} {fmt_ms(v)}" for k, v in sec.items())
              + f"; total {fmt_ms(s['total_seconds'])}"),
             ("saved", s["directory"]),
             *([("warm-up", f"{warm['seconds']:.1f} s, {sum(len(v) for v in warm['compiled'].values())} functions "
                            "compiled (gpuroute warmup DIR lists them)")] if warm is not None else []),
             *([("depart", f"time profile {s['time_profile']['file']} ({s['time_profile']['rows']} rows, "
                         f"{s['time_profile']['timezone']}; depart_at reads it)")] if s.get("time_profile") else []),
             ("serve", f"gpuroute serve {s['directory']}")]
    print_rows(rows)
    return EXIT_OK


def _print_weight(summary, spec):
    """The stderr line naming the routing weight (units from the summary)."""
    from ..graph.units import Unit

    units = {w: Unit.from_json(u) for w, u in summary["weights"].items()}
    print(f"{PROG}: {weight_line(units, summary['weight'], spec)}", file=sys.stderr)


def add_parser(sub, common):
    c = sub.add_parser("build", parents=[common], help="build a dataset directory: every stage, for gpuroute serve",
                       description="Run every stage (import, contract, partition, customize) into one dataset "
                                   "directory with a manifest, written atomically; gpuroute serve DIR loads it "
                                   "without building. The hierarchy and the overlay use one routing weight; a "
                                   "Lua profile's turn costs go into the overlay (routes pay them).")
    c.add_argument("graph", nargs="?", default=DEFAULT_GRAPH, metavar="GRAPH",
                   help=f"a shipped name, an OSM extract or another graph file (default {DEFAULT_GRAPH})")
    c.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="dataset directory (new, empty, or a dataset directory to replace)")
    c.add_argument("--profile", default=None, metavar="car|bicycle|foot|car-basic|FILE.lua",
                   help="routing profile of an OSM extract: OSRM's car (default), bicycle or foot Lua profile, an "
                        "OSRM .lua profile file, or gpuroute's native car-basic; a shipped name (monaco) with a "
                        "profile reads its OSM file with it")
    c.add_argument("--weight", metavar="NAME", default=None,
                   help="the routing weight (default: the profile's weight for a Lua profile, else travel_time "
                        "when the graph has it, else its first weight, e.g. distance on ny; ny-time has travel "
                        "times)")
    c.add_argument("--cell-sizes", type=parse_cell_sizes, default=None, metavar="U0,U1,...",
                   help="largest cell size per partition level, finest first (default 256,4096,65536, the "
                        "levels smaller than the graph)")
    c.add_argument("--time-profile", dest="time_profile", metavar="FILE", default=None,
                   help="a time profile (CSV or Parquet) to store in the directory as time_profile.csv, checked "
                        "against the built dataset first: serve DIR, route and trip read it for depart_at (gpuroute "
                        "timeprofile DIR FILE stores one later)")
    c.add_argument("--no-warmup", dest="warmup", action="store_false",
                   help="do not compile the server's kernels at the end (gpuroute serve then compiles what numba's "
                        f"cache lacks before it listens; gpuroute warmup DIR does it later); {WARMUP_ENV}=0 does "
                        "the same")
    c.add_argument("--cache-dir", dest="cache_dir", default=None, metavar="DIR",
                   help="numba's cache directory for the build and the warm-up (sets NUMBA_CACHE_DIR; serve with the "
                        "same setting)")
    c.add_argument("--json", action="store_true", help="print the summary as a JSON object")
    c.set_defaults(func=run)
    return c
