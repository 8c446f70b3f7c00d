"""The server's warm-up: every service answered once before the server says it is ready.

The engine's kernels are numba functions, compiled on their first call (or loaded from numba's cache,
which takes a while too): without a warm-up the first ``/table`` of a fresh server compiled for 5.7 s and
the first ``/isochrone`` for 11.5 s (issue 18). :func:`warm_up` runs each service the server offers
through the same path a request takes (:func:`gpuroute.server.app.parse_request`, the worker's call and
the JSON encoding), with the options that select other kernels (steps, annotations, distances, both
isochrone metrics, a search small enough for the bounded Dijkstra and one as large as the limits allow
for the hierarchy's), at points of the engine's own graph, and the customization path without changing
the metric (``engine.warm_customize()``). :func:`gpuroute.server.create_app` with ``warm_up=True`` runs
it at the application's startup, which uvicorn completes before it listens; ``gpuroute serve`` runs it
before it starts uvicorn.
"""
from __future__ import annotations

import logging
import time

log = logging.getLogger("gpuroute.server")


#: The environment variable naming numba's on-disk cache directory (numba's own): compiled kernels are
#: written there and loaded from there by every process that has it set (``gpuroute warmup``, ``build`` and
#: ``serve --cache-dir DIR`` set it). Unset: numba's default, a ``__pycache__`` folder beside each source
#: file where that is writable, else a folder under the user's cache directory (``~/.cache/numba``).
CACHE_ENV = "NUMBA_CACHE_DIR"


def use_cache_dir(path):
    """Make ``path`` numba's on-disk cache for this process and the processes it starts
    (``NUMBA_CACHE_DIR``): a folder created where missing and checked writable first, since numba itself
    falls back to its default folder without a word when it cannot write there. Kernels already loaded are
    pointed at it too.

    Parameters
    ----------
    path : str or os.PathLike
        The cache directory (``~`` expanded).

    Returns
    -------
    pathlib.Path
        The absolute directory.

    Raises
    ------
    ValueError
        The directory cannot be created or written (the message names it and why).
    """
    import os
    import tempfile
    from pathlib import Path

    p = Path(os.path.expanduser(os.fspath(path))).absolute()
    try:
        p.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=p).close()
    except OSError as e:
        raise ValueError(f"cache directory {p}: not writable ({e.strerror or e}): choose a folder this user may "
                         f"write (--cache-dir or {CACHE_ENV})") from None
    os.environ[CACHE_ENV] = str(p)
    from numba.core import config as numba_config

    numba_config.CACHE_DIR = str(p)
    for disp in _cached_dispatchers():  # created before: their cache folder was chosen at their import
        disp.enable_caching()
    return p


def _cached_dispatchers():
    """The loaded numba functions of gpuroute that are cached on disk (``cache=True``)."""
    import sys

    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    seen = {}
    for name, mod in list(sys.modules.items()):
        if name.startswith("gpuroute") and mod is not None:
            for v in list(vars(mod).values()):
                if isinstance(v, Dispatcher) and not isinstance(getattr(v, "_cache", None), NullCache):
                    seen[id(v)] = v
    return list(seen.values())


def _index_state(disp):
    """``(state, folder)`` of a cached numba function's index in numba's cache: ``"cached"`` (compiled code for
    this numba and source), ``"stale"`` (an index of another source or numba, or unreadable: numba compiles
    anew) or ``"absent"`` (never compiled here, or compiled only inlined into its callers)."""
    import os

    cache = disp._cache
    folder = str(getattr(cache, "_cache_path", "?"))
    cache_file = getattr(cache, "_cache_file", None)
    try:
        if cache_file._load_index():  # {} where absent, stale or of another numba
            return "cached", folder
    except Exception:  # an unreadable index: numba compiles anew
        return "stale", folder
    exists = os.path.exists(getattr(cache_file, "_index_path", ""))
    return ("stale" if exists else "absent"), folder


def cache_state():
    """What numba's cache holds of the gpuroute kernels loaded so far (``serve`` asks before its warm-up;
    ``gpuroute warmup`` before it compiles in child processes).

    Most cached kernels get no index of their own even in a full cache: those the services never call from
    Python (numba compiles a kernel called from another one into its caller) and those of paths the services do
    not take. So an absent index counts as missing only while no kernel at all is cached (an empty cache); a
    stale one (a changed source, another numba) always does. A cache holding some kernels only counts as filled
    here: ``gpuroute warmup`` then warms up one service first and looks at what it compiled
    (:data:`gpuroute.cli.warmup.PROBE_SERVICE`); ``serve`` says what its warm-up compiled once it is done.

    Returns
    -------
    dict
        ``{"kernels": loaded cached functions, "cached": those with compiled code in the cache for this numba
        and source, "stale": those with an index numba will not use, "absent": those with no index, "missing":
        the ones counted missing (above), "folders": the cache folders they use (sorted)}``.
    """
    kernels = _cached_dispatchers()
    counts, folders = {"cached": 0, "stale": 0, "absent": 0}, set()
    for disp in kernels:
        state, folder = _index_state(disp)
        counts[state] += 1
        folders.add(folder)
    missing = counts["stale"] + (counts["absent"] if counts["cached"] == 0 else 0)
    return {"kernels": len(kernels), **counts, "missing": missing, "folders": sorted(folders)}


def cache_location():
    """Where numba's cache lives for gpuroute: ``NUMBA_CACHE_DIR`` when set, else numba's default (a
    sentence)."""
    import os

    path = os.environ.get(CACHE_ENV)
    if path:
        return path
    return ("numba's default: __pycache__ beside each source file where writable, else ~/.cache/numba "
            f"(set {CACHE_ENV} or --cache-dir to choose)")


#: Modules whose numba kernels the services run: imported (not compiled) before :func:`cache_state` is asked,
#: so that it sees the services' kernels and not only those that opening the dataset loaded. A module missing
#: here only makes the check less complete.
KERNEL_MODULES = ("gpuroute.ch.query", "gpuroute.ch.phast", "gpuroute.ch.alternatives", "gpuroute.geo.segments",
                  "gpuroute.engine.legs", "gpuroute.engine.table_combine", "gpuroute.engine.osrm",
                  "gpuroute.engine.match_hmm", "gpuroute.engine.services.isochrone.polygons",
                  "gpuroute.engine.services.isochrone.lattice", "gpuroute.engine.services.isochrone.search",
                  "gpuroute.tours.local_search", "gpuroute.tours.exact", "gpuroute.crp.search",
                  "gpuroute.crp.many_to_many", "gpuroute.crp.customize")

#: The services in the order a parallel warm-up (:func:`prefill_cache`) starts them: the longest compilations
#: first (an empty cache on the 16-core H100 host: route 49.5 s, match 30.6, table 27.3, isochrone 15, trip 13.6).
PREFILL_ORDER = ("route", "match", "table", "isochrone", "trip", "customize", "nearest")


def import_kernel_modules():
    """Import :data:`KERNEL_MODULES` (those that import), so that :func:`cache_state` sees their kernels."""
    import importlib

    for name in KERNEL_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional part (e.g. CuPy-only) or a module that moved
            log.debug("warm-up: no module %s", name)


def prefill_cache(spec, services, jobs, *, timeout=None, env=None):
    """Compile the kernels of ``services`` into numba's on-disk cache in ``jobs`` child processes at once, one
    ``gpuroute warmup SPEC --services S --jobs 1 --json`` per service (numba compiles one function at a time
    per process: with an empty cache the services compile side by side instead of one after the other). The
    children share this process's environment (``NUMBA_CACHE_DIR``); the caller then warms up itself, which
    loads what they compiled and compiles whatever is still missing (a child that failed, a cache entry two
    children wrote at once), so a failure here costs time, never a kernel.

    Parameters
    ----------
    spec : str
        The dataset each child opens (a dataset directory, a graph file or a shipped name).
    services : iterable of str
        Service names (``"customize"`` included where wanted); started in :data:`PREFILL_ORDER`.
    jobs : int
        Children running at once (at least 1).
    timeout : float, optional
        Seconds a child may run before it is stopped.
    env : dict, optional
        Environment variables set in the children (``{"GPUROUTE_DISABLE_GPU": "1"}``: the CPU paths).

    Returns
    -------
    dict
        ``{service: the child's report (its ``--json`` object) or None where it failed}``.
    """
    from concurrent.futures import ThreadPoolExecutor

    order = sorted(services, key=lambda s: PREFILL_ORDER.index(s) if s in PREFILL_ORDER else len(PREFILL_ORDER))
    with ThreadPoolExecutor(max_workers=max(1, int(jobs))) as pool:
        return dict(zip(order, pool.map(lambda s: child_warmup(spec, [s], 1, env=env, timeout=timeout), order),
                        strict=True))


def child_warmup(spec, services, jobs, *, env=None, timeout=None):
    """Run ``gpuroute warmup SPEC --services S1,S2 --jobs J --json`` in a child process (this Python, this
    process's environment updated with ``env``) and return its report, or None where it failed (logged).

    Parameters
    ----------
    spec : str
        The dataset the child opens.
    services : list of str
        Its services.
    jobs : int
        Its ``--jobs``.
    env : dict, optional
        Environment variables to set in the child (e.g. ``{"GPUROUTE_DISABLE_GPU": "1"}``).
    timeout : float, optional
        Seconds the child may run before it is stopped.

    Returns
    -------
    dict or None
        The child's ``--json`` report.
    """
    import json
    import os
    import subprocess
    import sys

    what = ",".join(services)
    cmd = [sys.executable, "-m", "gpuroute.cli.main", "warmup", str(spec), "--services", what, "--jobs",
           str(int(jobs)), "--json"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                           env=None if env is None else {**os.environ, **env})
    except (OSError, subprocess.SubprocessError) as e:
        log.warning("warm-up: the child warming up %s failed: %s", what, e)
        return None
    if r.returncode != 0:
        log.warning("warm-up: the child warming up %s exited %d: %s", what, r.returncode,
                    (r.stderr.strip().splitlines() or [""])[-1][:300])
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return None


#: Stops of the largest warm-up trip, at least: up to ``config.TOUR_EXACT_MAX_N`` the order is exact
#: (Held–Karp), past it searched and, past 7 stops, perturbed (iterated local search); the warm-up takes
#: one more than ``TOUR_EXACT_MAX_N`` when that is more, so that the search is compiled too.
TRIP_STOPS = 12


def warm_points(engine, k=TRIP_STOPS):
    """``k`` positions ``(lon, lat)`` of the engine's graph to warm up at (node positions spread evenly
    over its node ids), or None when the engine has no graph coordinates."""
    import numpy as np

    g = getattr(engine, "graph", None)
    coords = getattr(g, "coords", None)
    if coords is None or len(coords) == 0:
        return None
    idx = np.linspace(0, len(coords) - 1, k).round().astype(np.int64)
    return [(float(coords[i][0]), float(coords[i][1])) for i in idx]


def off_network_point(engine):
    """``(lon, lat)`` just outside the south-west corner of the engine's graph (0.02 degrees beyond its
    bounding box), or None without coordinates: a coordinate that the first ball of the segment index does
    not settle, so that snapping's second step is compiled by the warm-up too."""
    import numpy as np

    coords = getattr(getattr(engine, "graph", None), "coords", None)
    if coords is None or len(coords) == 0:
        return None
    lo = np.asarray(coords, dtype=np.float64).min(axis=0)
    return (max(float(lo[0]) - 0.02, -180.0), max(float(lo[1]) - 0.02, -90.0))


#: Points of the warm-up's long /match trace: more transition searches than ``config.SERVE_MATCH_PARALLEL_JOBS``
#: (64) with one candidate a point already, so the parallel kernel is compiled before serving too.
_MATCH_POINTS = 70
#: GPS standard deviation (metres) of the long trace's points when they lie on a segment (a ``/nearest``
#: answer's location): a few candidates a point. The searches grow with the square of the candidates: with
#: 50 m, 40 points cost 0.27 s of CPU at every start (Monaco), for kernels that a few candidates load too.
_MATCH_SIGMA_M = 10


def _requests(services, pts, limits, off=None, on=None):
    """``(service, coordinates text, options)`` of the warm-up, for the services offered; ``off``: a
    point off the network (:func:`off_network_point`) for one table request; ``on``: a point on a segment
    (:func:`on_network_point`) for the long ``/match`` trace (None: the first point, with 50 m)."""
    def c(*i):
        return ";".join(f"{pts[j][0]:.7f},{pts[j][1]:.7f}" for j in i)

    top_match = limits.get("max_locations_map_matching")
    n_match = max(2, min(_MATCH_POINTS, int(top_match) if top_match and top_match > 0 else _MATCH_POINTS))
    trace, sigma = (c(*[0] * n_match), 50) if on is None else \
        (";".join([f"{on[0]:.7f},{on[1]:.7f}"] * n_match), _MATCH_SIGMA_M)
    top_trip = limits.get("max_locations_trip")
    trip_stops = max(2, min(len(pts), int(top_trip) if top_trip and top_trip > 0 else len(pts)))
    top_s = _positive(limits.get("max_isochrone_duration_s"), 3600.0)
    top_m = _positive(limits.get("max_isochrone_distance_m"), 50000.0)
    out = [
        ("route", c(0, 1), {}),
        # alternatives: several pairs, so that some candidate reaches the local-optimality test's searches
        *[("route", c(i, i + 1), {"alternatives": "3", "overview": "full"}) for i in range(min(6, len(pts) - 1))],
        ("route", c(0, 1, 2), {"steps": "true", "annotations": "true", "overview": "full", "geometries": "geojson",
                               "continue_straight": "true"}),
        ("table", c(0, 1, 2, 3), {}),
        ("table", c(0, 1, 2, 3), {"annotations": "duration,distance", "sources": "0;1", "destinations": "1;2;3"}),
        ("nearest", c(0), {"number": "2"}),
        # up to 3 stops the tour is enumerated, past them searched
        ("trip", c(0, 1, 2), {}),
        ("trip", c(*range(trip_stops)), {}),
        ("trip", c(0, 1, 2, 3), {"roundtrip": "false", "source": "first", "destination": "last", "steps": "true"}),
        # a reach small enough for the bounded Dijkstra, then one as large as a client may ask (the
        # hierarchy's one-to-all), for both metrics
        ("isochrone", c(1), {"contours_minutes": "1"}),
        ("isochrone", c(1), {"contours_minutes": f"1,{top_s / 60.0:g}"}),
        ("isochrone", c(1), {"contours_meters": f"200,{top_m:g}", "polygons": "false"}),
        # map matching's kernels (a point twice: it always matches), then a trace long enough for the
        # transition searches' parallel path (config.SERVE_MATCH_PARALLEL_JOBS searches and more)
        ("match", c(0, 0), {"timestamps": "0;1", "radiuses": "50;50"}),
        ("match", trace, {"timestamps": ";".join(str(5 * i) for i in range(n_match)),
                          "radiuses": ";".join([str(sigma)] * n_match)}),
    ]
    if off is not None:  # snapping's second step (a point the first ball does not settle)
        out.append(("table", f"{off[0]:.7f},{off[1]:.7f};{c(0)}", {"radiuses": "unlimited;unlimited"}))
    return [r for r in out if r[0] in services]


def on_network_point(server, pts):
    """``(lon, lat)`` of a point on a segment the engine snaps to (the location ``/nearest`` answers for the
    first warm-up point), or None where that request fails or answers no location."""
    import orjson

    from .app import OSRMError, parse_request

    if "nearest" not in server.services:
        return None
    try:
        status, body = server.work(parse_request("nearest", "warm-up", f"{pts[0][0]:.7f},{pts[0][1]:.7f}", {},
                                                 server.limits))
        loc = orjson.loads(body)["waypoints"][0]["location"] if status == 200 else None
        return (float(loc[0]), float(loc[1])) if loc is not None else None
    except (OSRMError, KeyError, IndexError, TypeError, ValueError, orjson.JSONDecodeError):
        return None


def _on_one_thread(server, call):
    """Answer ``call`` once more with one numba thread in this thread: map matching's Viterbi pass that searches
    its own tables (:func:`gpuroute.engine.services.match._lazy`: taken on one thread, or for batches of many
    traces) is then compiled too, whatever this process's thread setting."""
    import numba

    threads = numba.get_num_threads()
    if threads == 1:  # the request just answered took it
        return
    numba.set_num_threads(1)
    try:
        server.work(call)
    finally:
        numba.set_num_threads(threads)


class CompileLog:
    """numba's compilations while it is installed (:meth:`watch`): one ``(function, argument types, seconds,
    own seconds)`` tuple each in ``entries``, in the order they end; ``own seconds`` leaves out the
    compilations of the functions it calls. A function loaded from numba's cache is not compiled and not
    listed (numba raises its ``numba:compile`` event only for a compilation)."""

    def __init__(self):
        self.entries = []
        self._stack = []

    def on_start(self, event):
        self._stack.append([event.data["dispatcher"], event.data["args"], time.perf_counter(), 0.0])

    def on_end(self, event):
        if not self._stack:
            return
        disp, args, t0, inner = self._stack.pop()
        dt = time.perf_counter() - t0
        if self._stack:
            self._stack[-1][3] += dt
        fn = getattr(disp, "py_func", None)
        name = f"{fn.__module__}.{fn.__qualname__}" if fn is not None else repr(disp)
        self.entries.append((name, ", ".join(str(a) for a in args), dt, dt - inner))

    def watch(self):
        """A context manager that logs numba's compilations into this object while it is open."""
        from numba.core import event

        log = self

        class _Listener(event.Listener):
            def on_start(self, ev):
                log.on_start(ev)

            def on_end(self, ev):
                log.on_end(ev)

        return event.install_listener("numba:compile", _Listener())


def _positive(v, default):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return default
    return v if v > 0 else default


def _took(report, service, t, c):
    """Add the wall seconds since ``t`` (``perf_counter``) and CPU seconds since ``c`` (``process_time``) to
    ``service``'s entries of a warm-up report."""
    report["services"][service] = report["services"].get(service, 0.0) + time.perf_counter() - t
    report["services_cpu"][service] = report["services_cpu"].get(service, 0.0) + time.process_time() - c


def warm_up(app, services=None):
    """Answer every service of ``app`` once (see the module documentation), then mark it ready.

    Parameters
    ----------
    app : starlette.applications.Starlette
        Made by :func:`gpuroute.server.create_app`.
    services : iterable of str, optional
        Only these services (of those ``app`` offers; ``"customize"`` for the customization path); default
        every one. ``gpuroute warmup --services`` compiles a part ahead; a server warms up every service.

    Returns
    -------
    dict
        ``{"seconds": total, "services": {service: seconds}, "services_cpu": {service: this process's CPU
        seconds (all its threads)}, "failed": [messages], "compiled": {service:
        [(function, argument types, seconds, own seconds)]}}`` (also ``app.state.warm_report``): ``compiled``
        lists what numba compiled for each service (:class:`CompileLog`; empty where every kernel came from
        numba's cache or was compiled by an earlier service). A request that fails is logged and listed, and
        the server is ready even so (it serves what it can, as it would without a warm-up). With ``services``
        the application is not marked ready (only a part was warmed up).
    """
    from .app import OSRMError, parse_request

    state = app.state
    if services is None and state.ready and state.warm_report is not None:
        return state.warm_report
    server = state.adapter
    engine = state.engine
    t0 = time.perf_counter()
    report = {"seconds": 0.0, "services": {}, "services_cpu": {}, "failed": [], "compiled": {}}
    compiled = CompileLog()
    from .. import config

    pts = warm_points(engine, max(TRIP_STOPS, int(config.TOUR_EXACT_MAX_N) + 1))
    if pts is None:
        log.warning("warm-up: the engine has no graph coordinates to query at; the first request of each service "
                    "compiles what it needs")
    else:
        offered = [s for s in server.services if services is None or s in services]
        log.info("warm-up: compiling and running %s once", ", ".join(offered))
        on = on_network_point(server, pts) if "match" in offered else None
        reqs = _requests(offered, pts, server.limits, off_network_point(engine), on)
        long_match = [r for r in reqs if r[0] == "match"][-1:]  # the long trace (the list's last /match)
        for service, coords, options in reqs:
            t, c = time.perf_counter(), time.process_time()
            first = len(compiled.entries)
            with compiled.watch():
                try:
                    call = parse_request(service, "warm-up", coords, options, server.limits)
                    status, body = server.work(call)
                except OSRMError as e:  # a limit below the warm-up's request: that request is not served anyway
                    status, body = e.status, e.message.encode()
                if status == 200 and [(service, coords, options)] == long_match:
                    _on_one_thread(server, call)  # the Viterbi pass that searches its own tables
            report["compiled"].setdefault(service, []).extend(compiled.entries[first:])
            if status != 200:
                msg = f"{service} {options or ''}: HTTP {status} {bytes(body)[:200].decode(errors='replace')}"
                report["failed"].append(msg)
                log.warning("warm-up: %s", msg)
            _took(report, service, t, c)
        if any(s in offered for s in ("route", "match", "trip")):
            # an overview's simplification called from Python (GeoJSON, /match): the answers above may hold lines of
            # at most 2 points, which it returns untouched (a repeated point, a short leg)
            import numpy as np

            from ..geo.simplify import simplify_lonlat

            t, c = time.perf_counter(), time.process_time()
            first = len(compiled.entries)
            with compiled.watch():
                simplify_lonlat(np.array([pts[0], pts[1], pts[2]], dtype=np.float64),
                                config.SERVE_SIMPLIFY_TOLERANCE_M)
            report["compiled"].setdefault("geometry", []).extend(compiled.entries[first:])
            _took(report, "geometry", t, c)
    if (services is None or "customize" in services) and state.can_customize \
            and callable(getattr(engine, "warm_customize", None)):
        t, c = time.perf_counter(), time.process_time()
        first = len(compiled.entries)
        try:
            with compiled.watch():
                engine.warm_customize()
        except Exception as e:  # the server still serves; /customize compiles on its first call then
            log.exception("warm-up: customize failed")
            report["failed"].append(f"customize: {type(e).__name__}: {e}")
        _took(report, "customize", t, c)
        report["compiled"]["customize"] = compiled.entries[first:]
    report["seconds"] = time.perf_counter() - t0
    log.info("warm-up: done in %.1f s (%s)", report["seconds"],
             ", ".join(f"{k} {v:.2f} s" for k, v in report["services"].items()))
    if services is None:
        state.warm_report = report
        state.ready = True
    return report
