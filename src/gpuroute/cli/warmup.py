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

#: The service a warm-up with several ``--jobs`` runs first in its own process where numba's cache looks filled
#: (:func:`gpuroute.server.warmup.cache_state`): if it compiles anything, the cache holds other kernels only and
#: the other services compile in child processes. Snapping (every service's first step), a few functions.
PROBE_SERVICE = "nearest"

#: Environment variable naming a file that ``gpuroute serve`` appends its start's phases to
#: (:func:`start_stamp`; ``benchmarks/serve_start.py`` reads it). Unset: nothing is written.
START_TRACE_ENV = "GPUROUTE_START_TRACE"


def start_stamp(phase, **fields):
    """Where ``GPUROUTE_START_TRACE`` names a file, append one JSON line to it: ``{"phase": phase, "pid": this
    process, "monotonic": time.monotonic() in seconds (the system-wide clock, comparable across processes),
    "cpu": time.process_time() in seconds (this process's CPU since it started), **fields}``. One ``write``
    of a line opened for appending, so that processes may share the file. Unset: nothing (one lookup).

    Raises
    ------
    CLIError
        The file cannot be written (naming it and the variable).
    """
    path = os.environ.get(START_TRACE_ENV)
    if not path:
        return
    line = json.dumps({"phase": phase, "pid": os.getpid(), "monotonic": time.monotonic(),
                       "cpu": time.process_time(), **fields}) + "\n"
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
    except OSError as e:
        raise CLIError(f"{START_TRACE_ENV}={path}: cannot append to it ({e.strerror or e})") from None


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


def gpu_served():
    """Whether this process probed a usable GPU (:func:`gpuroute.backend.probe_gpu`, asked by the services that
    run on one): its warm-up then took the GPU paths. Never probes itself (no CuPy import)."""
    from ..backend import probe_gpu

    return bool(probe_gpu.cache_info().currsize) and bool(probe_gpu()[0])


def warm_dataset(spec, *, services=None, jobs=1, prog=PROG):
    """Open ``spec`` and answer every service once (:func:`gpuroute.server.warm_up`), compiling what numba's
    cache lacks; one stderr line when it starts and one when it ends. Where the cache lacks kernels and
    ``jobs`` > 1, the services are first compiled side by side in child processes
    (:func:`gpuroute.server.warmup.prefill_cache`), then loaded here: where it is empty or stale before the
    dataset is opened (:func:`gpuroute.server.warmup.cache_state`), or else where :data:`PROBE_SERVICE`, warmed
    up here first, compiled anything (a cache with other kernels only). Where the warm-up ran on a GPU
    (:func:`gpu_served`), the CPU paths are warmed up too, in child processes with ``GPUROUTE_DISABLE_GPU=1``,
    one per service, ``jobs`` at once (:func:`gpuroute.server.warmup.prefill_cache`): ``gpuroute serve`` runs on
    the CPU with more than one worker, its default, and would otherwise compile them before it listens.

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
        ``compiled_here`` (``{service: functions this process compiled}``) and, after a GPU warm-up,
        ``cpu_paths`` (``{"seconds": wall, "compiled": {service: functions its child compiled, None where it
        failed}}``; a child's failure is listed in ``failed``) added; ``compiled`` holds what the service children compiled and what this process did,
        ``seconds`` the whole time (children included).

    Raises
    ------
    CLIError
        A dataset that cannot be opened, or a service it does not offer.
    """
    from ..server import create_app, warm_up
    from .common import open_engine

    state = None
    if jobs > 1:  # asked before opening, which may compile (and cache) kernels of its own
        from ..server.warmup import cache_state, import_kernel_modules

        import_kernel_modules()
        state = cache_state()
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
    children, probe = {}, None
    if state is not None and len(wanted) > 1:
        from ..server.warmup import prefill_cache

        missing, rest = state["missing"], wanted
        what = f"numba's cache lacks {missing} of the {state['kernels']} kernels loaded"
        if not missing and PROBE_SERVICE in wanted:
            # a cache holding other kernels only (a build's own stages, another dataset's services) looks filled:
            # the probe service, warmed up here first, tells whether the services' kernels are in it
            probe = warm_up(app, services=[PROBE_SERVICE])
            missing = sum(len(v) for v in probe["compiled"].values())
            rest = [s for s in wanted if s != PROBE_SERVICE]
            what = f"{PROBE_SERVICE} compiled {missing} functions numba's cache lacked"
        if missing and rest:
            n = min(int(jobs), len(rest))
            print(f"{prog}: {what}: compiling the services in {n} processes at once ...", file=sys.stderr,
                  flush=True)
            with progress("compiling"):
                children = prefill_cache(spec, rest, n)
    with progress("warming up"):
        report = warm_up(app, services=services)
    for service, done in (probe or {}).get("compiled", {}).items():  # the probe's compilations, and its time
        report["compiled"][service] = done + report["compiled"].get(service, [])
        report["services"][service] = report["services"].get(service, 0.0) + probe["services"].get(service, 0.0)
    report["compiled_here"] = {k: len(v) for k, v in report["compiled"].items()}
    for service, child in children.items():
        if child:
            mine = report["compiled"].get(service, [])
            report["compiled"][service] = [(e["function"], e["types"], e["seconds"], e["own_seconds"])
                                           for e in child.get("compiled", {}).get(service, [])] + mine
    report["children"] = {k: v["seconds"] for k, v in children.items() if v}
    if gpu_served():
        from ..server.warmup import prefill_cache

        print(f"{prog}: the warm-up ran on the GPU; warming up the CPU paths too (gpuroute serve runs on the CPU "
              "with more than one worker) ...", file=sys.stderr, flush=True)
        t_cpu = time.perf_counter()
        with progress("warming up the CPU paths"):
            cpu = prefill_cache(spec, wanted, jobs, env={"GPUROUTE_DISABLE_GPU": "1"})
        report["cpu_paths"] = {"seconds": time.perf_counter() - t_cpu, "compiled": {
            k: None if v is None else sum(len(x) for x in (v.get("compiled") or {}).values()) for k, v in cpu.items()}}
        report["failed"] += [f"{k} on the CPU: {m}" for k, v in cpu.items()
                             for m in (["the child process failed"] if v is None else v.get("failed", []))]
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
    if "cpu_paths" in report:  # after a GPU warm-up: the CPU paths, in children
        cpu = report["cpu_paths"]
        rows.append(("CPU paths", f"{cpu['seconds']:.2f} s: " + ", ".join(
            f"{k} {'failed' if n is None else n}" for k, n in cpu["compiled"].items()) + " functions compiled"))
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
