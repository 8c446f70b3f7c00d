"""``gpuroute warmup``: compile every kernel the server's services use, ahead of serving.

The engine's kernels are numba functions, compiled on their first call and kept in numba's on-disk cache;
a server compiles what the cache lacks before it listens (:mod:`gpuroute.server.warmup`), which with an
empty cache takes minutes (142 s on a 16-core host). ``gpuroute warmup [DIR|GRAPH]`` answers every service
once through the server's own warm-up (:func:`gpuroute.server.warm_up`) on a dataset directory (``gpuroute
build``; default the shipped Monaco extract), so that the cache is filled at install time; ``gpuroute build``
runs it at its end (``--no-warmup`` skips it) and ``make demo`` runs it after installing.

The cache is numba's: ``--cache-dir DIR`` (or the environment variable ``NUMBA_CACHE_DIR``, numba's own)
puts it in ``DIR``; a server started with the same setting loads it from there. Without either, numba keeps
it beside the sources (``__pycache__``) where that is writable, else under ``~/.cache/numba``. A folder that
cannot be written is refused (exit 2, naming it). The command prints, per service, what it compiled and
how long that took, and where the cache lives (``--json``: the whole report).
"""
from __future__ import annotations

import json
import os
import sys
import time

from .common import EXIT_OK, CLIError, one_line, print_rows, progress

PROG = "gpuroute warmup"

#: What ``gpuroute warmup`` warms up without an argument (``gpuroute serve``'s default dataset).
DEFAULT_DATASET = "monaco"

#: Kernels named per service in the printed summary (the ones that took longest to compile).
TOP_KERNELS = 3


def apply_cache_dir(path, prog=PROG):
    """``--cache-dir``: numba's cache in ``path`` for this process and its children
    (:func:`gpuroute.server.warmup.use_cache_dir`); None leaves numba's setting as it is.

    Raises
    ------
    CLIError
        A folder that cannot be created or written (naming it).
    """
    if path is None:
        return None
    from ..server.warmup import use_cache_dir

    try:
        return use_cache_dir(path)
    except ValueError as e:
        raise CLIError(f"--cache-dir: {e}") from None


def cache_line():
    """Where numba's cache is, for the summary: ``NUMBA_CACHE_DIR``, else the folders the loaded kernels use."""
    from ..server.warmup import CACHE_ENV, cache_state

    env = os.environ.get(CACHE_ENV)
    if env:
        return f"{env} ({CACHE_ENV})"
    folders = cache_state()["folders"]
    if not folders:
        return "numba's default (no kernel loaded)"
    common = os.path.commonpath(folders) if len(folders) > 1 else folders[0]
    where = "__pycache__ beside each source under " if len(folders) > 1 else ""
    return f"{where}{common} (numba's default; --cache-dir or {CACHE_ENV} chooses)"


def default_jobs():
    """Processes compiling at once by default: the cores this process may use."""
    from ..server.workers import available_cores

    return max(1, int(available_cores()))


def warm_dataset(spec, *, services=None, jobs=1, prog=PROG):
    """Open ``spec`` and answer every service once (:func:`gpuroute.server.warm_up`), compiling what numba's
    cache lacks; one stderr line when it starts and one when it ends. Where the cache lacks kernels and
    ``jobs`` > 1, the services are first compiled side by side in child processes
    (:func:`gpuroute.server.warmup.prefill_cache`), then loaded here.

    Parameters
    ----------
    spec : str
        A dataset directory, a graph file or a shipped name.
    services : list of str, optional
        Only these services (default every one the engine offers, and the customization path).
    jobs : int
        Processes compiling at once where the cache lacks kernels (1: this process alone).

    Returns
    -------
    dict
        The warm-up's report (``seconds``, ``services``, ``failed``, ``compiled``) with ``dataset``,
        ``open_seconds``, ``children`` (``{service: seconds}`` of the child processes, empty where none ran)
        and ``compiled_here`` (``{service: functions this process compiled}``) added; ``compiled`` holds what
        the children compiled and what this process did, ``seconds`` the whole time (children included).

    Raises
    ------
    CLIError
        A dataset that cannot be opened, or a service it does not offer.
    """
    from ..server import create_app, warm_up
    from .common import open_engine

    engine, opened = open_engine(spec)
    app = create_app(engine, warm_up=True, allow_customize=True)  # never served: the customization path warms too
    offered = list(app.state.adapter.services) + (["customize"] if app.state.can_customize else [])
    if services is not None:
        unknown = [s for s in services if s not in offered]
        if unknown:
            raise CLIError(f"--services {','.join(unknown)}: not a service of {spec} (its services: "
                           f"{', '.join(offered)})")
    wanted = list(services or offered)
    print(f"{prog}: compiling {', '.join(wanted)} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    children = {}
    if jobs > 1 and len(wanted) > 1:
        from ..server.warmup import cache_state, import_kernel_modules, prefill_cache

        import_kernel_modules()
        state = cache_state()
        if state["missing"]:
            n = min(int(jobs), len(wanted))
            print(f"{prog}: numba's cache lacks {state['missing']} of the {state['kernels']} kernels loaded: "
                  f"compiling the services in {n} processes at once ...", file=sys.stderr, flush=True)
            with progress("compiling"):
                children = prefill_cache(spec, wanted, n)
    with progress("warming up"):
        report = warm_up(app, services=services)
    report["compiled_here"] = {k: len(v) for k, v in report["compiled"].items()}
    for service, child in children.items():
        if child:
            mine = report["compiled"].get(service, [])
            report["compiled"][service] = [(e["function"], e["types"], e["seconds"], e["own_seconds"])
                                           for e in child.get("compiled", {}).get(service, [])] + mine
    report["children"] = {k: v["seconds"] for k, v in children.items() if v}
    report["seconds"] = time.perf_counter() - t0
    print(f"{prog}: compiling done in {report['seconds']:.1f} s", file=sys.stderr, flush=True)
    report["dataset"] = spec
    report["open_seconds"] = opened
    return report


def summary_rows(report):
    """``(label, text)`` rows of a warm-up report: per service its time, how many functions numba compiled
    and the longest ones, then the total and where the cache is."""
    rows = []
    children = report.get("children") or {}
    for service, seconds in report["services"].items():
        done = report["compiled"].get(service, [])
        seconds = seconds + children.get(service, 0.0)  # compiled in a child, then loaded here
        if done:
            own = sum(e[3] for e in done)
            top = sorted(done, key=lambda e: -e[3])[:TOP_KERNELS]
            text = (f"{seconds:.2f} s: {len(done)} functions compiled ({own:.1f} s; longest "
                    + ", ".join(f"{e[0].rsplit('.', 1)[-1]} {e[3]:.1f} s" for e in top) + ")")
        else:
            text = f"{seconds:.2f} s: nothing compiled (from the cache or compiled for an earlier service)"
        rows.append((service, text))
    rows.append(("total", f"{report['seconds']:.1f} s"))
    if report["failed"]:
        rows.append(("failed", "; ".join(report["failed"])))
    rows.append(("cache", cache_line()))
    return rows


def run(args):
    apply_cache_dir(args.cache_dir)
    services = None
    if args.services is not None:
        services = [s.strip() for s in args.services.split(",") if s.strip()]
        if not services:
            raise CLIError(f"--services {args.services!r}: expected service names separated by commas")
    jobs = default_jobs() if args.jobs is None else args.jobs
    if jobs < 1:
        raise CLIError(f"--jobs {args.jobs}: expected at least 1 (1: compile in this process only)")
    report = warm_dataset(args.dataset or DEFAULT_DATASET, services=services, jobs=jobs)
    if args.json:
        out = dict(report, cache=cache_line(),
                   compiled={k: [{"function": e[0], "types": e[1], "seconds": e[2], "own_seconds": e[3]} for e in v]
                             for k, v in report["compiled"].items()})
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
    else:
        print_rows([("dataset", f"{report['dataset']} (opened in {report['open_seconds']:.1f} s)"),
                    *summary_rows(report)])
    if report["failed"]:
        raise CLIError(f"{len(report['failed'])} warm-up requests failed: {one_line(report['failed'][0])}")
    return EXIT_OK


def add_parser(sub, common):
    c = sub.add_parser("warmup", parents=[common], help="compile every service's kernels ahead of serving",
                       description="Answer every service once on a dataset so that numba compiles the kernels the "
                                   "server uses into its on-disk cache now, not when gpuroute serve starts (minutes "
                                   "with an empty cache). Prints per service what was compiled and how long it "
                                   "took, and where the cache is.")
    c.add_argument("dataset", nargs="?", default=None, metavar="DIR|GRAPH",
                   help=f"a dataset directory (gpuroute build), a graph file or a shipped graph name (default "
                        f"{DEFAULT_DATASET}); warm up the dataset you serve: another may use other kernels (turn costs, "
                        "an overlay)")
    c.add_argument("--cache-dir", dest="cache_dir", default=None, metavar="DIR",
                   help="numba's cache directory (sets NUMBA_CACHE_DIR; default: NUMBA_CACHE_DIR if set, else numba's "
                        "default, __pycache__ beside the sources or ~/.cache/numba). gpuroute serve loads from "
                        "the same setting")
    c.add_argument("--services", default=None, metavar="S1,S2",
                   help="only these services (route, table, nearest, trip, isochrone, match, customize; default all)")
    c.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="processes compiling at once where the cache lacks kernels, one service each (default: the "
                        "cores this process may use; 1: this process alone)")
    c.add_argument("--json", action="store_true", help="print the report as a JSON object")
    c.set_defaults(func=run)
    return c
