"""``gpuroute serve``: serve a dataset over an OSRM v5-compatible HTTP API
(:meth:`gpuroute.engine.Engine.open` + :func:`gpuroute.server.create_app`, run by uvicorn).

With no argument it builds and serves the shipped Monaco extract; a dataset directory (``gpuroute
build GRAPH -o DIR``) is loaded without building anything and routes run over its overlay. It binds
127.0.0.1 unless told otherwise (``--host 0.0.0.0`` opens it to the network, with a warning).
``POST /customize`` (live traffic) is served on loopback binds unless ``--no-allow-customize``, and on
other binds only with ``--allow-customize``. A write (``POST /customize``) from a web page is taken only
from the server's own origin and those given by ``--allow-origin`` (:func:`gpuroute.server.create_app`).

The port is bound before anything is loaded (a port in use: exit 2, one line naming it); every service is
then compiled and run once (:func:`gpuroute.server.warm_up`) before the socket listens, so ``/health``
answers only once no request compiles anything. Where numba's cache (``--cache-dir``, ``NUMBA_CACHE_DIR``)
lacks kernels it says so first (``gpuroute warmup`` and ``gpuroute build`` fill the cache ahead, compiling the
services side by side, so that a start takes about a second).

``--workers N`` (default: the cores this process may use) forks N worker processes once the dataset is
loaded and warmed up, each connection handed to the worker with the fewest open ones (or, with
``config.SERVE_DISPATCH = "reuseport"``, each worker on its own ``SO_REUSEPORT`` socket), sharing the loaded
arrays and switching to a new traffic metric together (:mod:`gpuroute.server.workers`); ``--workers 1`` is one
process. With more than one worker the server runs on the CPU (forked processes cannot share a CUDA
context)."""
from __future__ import annotations

import gc
import ipaddress
import socket
import sys
import time

from .common import EXIT_OK, CLIError, log, one_line, progress, weight_line

#: What ``gpuroute serve`` serves without an argument.
DEFAULT_DATASET = "monaco"



def is_loopback(host):
    """Whether ``host`` (an address, ``[::1]``, or a name) reaches only this machine: a loopback address
    (``127.0.0.0/8``, ``::1``), ``localhost`` or a name under ``.localhost`` (RFC 6761)."""
    h = str(host).strip().lower()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def bind(host, port, *, reuse_port=False):
    """A TCP socket bound to ``host:port``, not yet listening (connections are refused until the server
    starts); the first IPv4 address of a name, else its first address.

    With ``reuse_port`` (``--workers`` > 1 with ``config.SERVE_DISPATCH = "reuseport"``) the socket has
    ``SO_REUSEPORT`` set, so that each worker can
    bind a socket of its own to the same port; the port is first bound without it, so that a port another
    server holds (even one with ``SO_REUSEPORT``, e.g. another ``gpuroute serve``) is refused all the same.

    Raises
    ------
    CLIError
        The port is in use, or the address cannot be bound (one line naming both).
    """
    h = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        infos = socket.getaddrinfo(h, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise CLIError(f"--host {host}: {e.strerror or e}") from None
    infos.sort(key=lambda i: i[0] != socket.AF_INET)
    family, kind, proto, _, address = infos[0]
    reuse_port = bool(reuse_port) and hasattr(socket, "SO_REUSEPORT")
    sock = _bind_one(family, kind, proto, address, host, port, False)
    if reuse_port:  # the port is free (and chosen, for --port 0): bind it again, shareable by the workers
        address = sock.getsockname()
        sock.close()
        sock = _bind_one(family, kind, proto, address, host, port, True)
    return sock


def _bind_one(family, kind, proto, address, host, port, reuse_port):
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a TIME_WAIT port is free
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError as e:
        sock.close()
        import errno

        if e.errno == errno.EADDRINUSE:
            raise CLIError(f"--port {port}: port {port} is already in use on {host} (another server is listening "
                           "there): stop it or choose another --port") from None
        raise CLIError(f"cannot listen on {host} port {port}: {e.strerror or e}") from None
    return sock


def allowed_origins(values):
    """The ``--allow-origin`` values, normalized (:func:`gpuroute.server.normalize_origin`).

    Raises
    ------
    CLIError
        A value that is not an http(s) origin (``*`` included: a wildcard would let every page write).
    """
    from ..server.app import normalize_origin

    out = []
    for v in values or ():
        n = normalize_origin(v)
        if n is None:
            raise CLIError(f"--allow-origin {v!r}: expected a web origin scheme://host[:port] (http or https, no "
                           "path, no wildcard), e.g. https://map.example")
        out.append(n)
    return out


def run(args):
    """Bind the port, then serve (:func:`serve`); the socket is closed however that ends."""
    if not 0 <= args.port < 65536:
        raise CLIError(f"--port {args.port}: expected 1 .. 65535 (or 0: any free port)")
    from .warmup import apply_cache_dir, start_stamp

    start_stamp("cli")  # GPUROUTE_START_TRACE (benchmarks/serve_start.py): the command line parsed
    apply_cache_dir(getattr(args, "cache_dir", None))  # before any kernel is loaded
    allowed_origins(getattr(args, "allow_origin", None))  # checked before anything is bound or loaded
    value = getattr(args, "workers", 1)
    if value is not None and value < 1:
        raise CLIError(f"--workers {value}: expected at least 1 (1: one process)")
    from ..server import workers as server_workers

    workers = server_workers.available_cores() if value is None else int(value)
    try:
        shared_port = workers > 1 and server_workers.dispatch_mode() == "reuseport"
    except ValueError as e:
        raise CLIError(str(e)) from None
    sock = bind(args.host, args.port, reuse_port=shared_port)
    start_stamp("bound")
    undo = None
    try:
        if workers > 1:
            workers, undo = prepare_workers(workers, value is None)
            if workers == 1 and shared_port:  # the default fell back to one process: a socket no other may share
                address = sock.getsockname()
                sock.close()
                sock = bind(args.host, address[1])
        return serve(args, sock, workers)
    finally:
        sock.close()
        if undo is not None:
            undo()


def prepare_workers(n, default):
    """``(workers, undo)``: this process prepared to fork ``n`` workers once loaded
    (:func:`gpuroute.server.workers.prepare`; ``undo`` puts its settings back).

    Where this process cannot fork workers (it already started the GPU or numba's OpenMP threads: a program
    embedding the command, not the command line itself), the default (``default`` True) falls back to one
    process, saying so: ``(1, None)``.

    Raises
    ------
    CLIError
        An explicit ``--workers N`` this process cannot fork.
    """
    from ..server import workers as server_workers

    try:
        return n, server_workers.prepare(n)
    except server_workers.WorkerError as e:
        if not default:
            raise CLIError(f"--workers {n}: {e}") from None
        print(f"gpuroute serve: one process ({e})", file=sys.stderr)
        return 1, None


def _gpu_present():
    """A GPU this process could have used (CuPy installed and an NVIDIA device node), without starting CUDA."""
    import importlib.util
    import os

    return importlib.util.find_spec("cupy") is not None and os.path.exists("/dev/nvidiactl")


def _say_compiling(sock):
    """With kernels missing from numba's cache (:func:`gpuroute.server.warmup.cache_state`): say so, and what
    fills it ahead, before the warm-up compiles them (minutes with an empty cache)."""
    from ..server.warmup import cache_state, import_kernel_modules
    from .warmup import cache_line

    import_kernel_modules()
    state = cache_state()
    if state["missing"]:
        print(f"gpuroute serve: numba's cache ({cache_line()}) lacks compiled code for {state['missing']} of the "
              f"{state['kernels']} kernels loaded: compiling them before listening on port {sock.getsockname()[1]} "
              "(minutes with an empty cache; gpuroute warmup or gpuroute build compiles them ahead, several at once)",
              file=sys.stderr, flush=True)


def serve(args, sock, workers=1):
    try:
        import uvicorn  # noqa: F401 - the serve extra is there

        from ..server import create_app, warm_up
        from ..server import http as server_http
    except ImportError as e:
        raise CLIError(f"gpuroute serve needs the serve extra ({one_line(e)}): pip install 'gpuroute[serve]'") from e
    try:  # before anything is loaded: httptools asked for and not installed
        server_http.parser(getattr(args, "http", None))
    except ValueError as e:
        raise CLIError(f"--http: {e}") from None
    from ..engine import Engine
    from .warmup import cache_line, start_stamp

    start_stamp("imports")
    _say_compiling(sock)  # before opening, which may compile (and cache) kernels of its own
    start_stamp("cache_checked")
    spec = args.dataset or DEFAULT_DATASET
    t0 = time.perf_counter()
    with progress(f"opening {spec}"):
        # a dataset directory's stored time profile (gpuroute timeprofile), unless --time-profile overrides it
        engine = Engine.open(spec, weight=args.weight,
                             time_profile=False if getattr(args, "time_profile", None) is not None else None)
    if getattr(args, "time_profile", None) is not None:  # depart_at= (gpuroute.engine.timeslots)
        from ..engine import EngineError

        try:
            engine.set_time_profile(args.time_profile)
        except (OSError, ValueError, EngineError) as e:  # TimeProfileError names the file and line
            raise CLIError(f"--time-profile: {one_line(e)}") from None
    start_stamp("loaded")
    log.info("opened %r in %.3f s", engine, time.perf_counter() - t0)
    g = getattr(engine, "graph", None)  # any engine-shaped object serves; ours names its routing weight
    if g is not None:
        print(f"gpuroute serve: {weight_line({w: g.units[w] for w in g.weight_names}, engine.weight, spec)}",
              file=sys.stderr)
    table = None if args.max_table_size is None else max(0, args.max_table_size) ** 2  # the engine counts cells
    counts = {"max_locations_route": args.max_viaroute_size, "max_locations_table": table,
              "max_locations_nearest": args.max_nearest_size}
    counts = {k: v for k, v in counts.items() if v is not None}
    alts = getattr(args, "max_alternatives", None)
    if alts is not None:  # 0: no alternative (osrm-routed's meaning); < 0: no limit, reported as null on /health
        counts["max_alternatives"] = None if alts < 0 else alts
    engine_limits = getattr(engine, "limits", None)
    if counts and isinstance(engine_limits, dict):
        engine_limits.update(counts)  # our engine: the server and the engine enforce the same limits
    limits = dict(counts)
    for key, value in (("max_body_bytes", args.max_body), ("timeout_s", args.timeout), ("workers", args.threads),
                       ("default_radius", args.default_radius)):
        if value is not None:
            limits[key] = value
    allow = args.allow_customize if args.allow_customize is not None else is_loopback(args.host)
    app = create_app(engine, limits=limits, allow_customize=allow,
                     allow_origins=allowed_origins(getattr(args, "allow_origin", None)), warm_up=True)
    start_stamp("app")
    t_warm = time.perf_counter()
    print("gpuroute serve: compiling and warming up every service before listening (the first start after an "
          "install takes longest) ...", file=sys.stderr, flush=True)
    report = warm_up(app)
    compiled_by = {k: len(v) for k, v in report.get("compiled", {}).items()}
    start_stamp("warmed", services=report.get("services"), services_cpu=report.get("services_cpu"),
                compiled=compiled_by)
    compiled = sum(compiled_by.values())
    print(f"gpuroute serve: warmed up in {report['seconds']:.1f} s"
          + (f" ({len(report['failed'])} warm-up requests failed: see the log)" if report["failed"] else "")
          + (f"; compiled {compiled} functions numba's cache lacked ({cache_line()}; gpuroute warmup DIR with the "
             "same --cache-dir fills it ahead)" if compiled else ""),
          file=sys.stderr, flush=True)
    log.info("warm-up took %.3f s", time.perf_counter() - t_warm)
    # the engine's arrays and objects live as long as the server: move them out of the garbage
    # collector's generations, so that a request's collections do not walk them (measured: ~45 ms of a
    # 10-minute NY isochrone went to collections before)
    gc.collect()
    gc.freeze()
    if not is_loopback(args.host):
        print(f"gpuroute serve: warning: listening on {args.host}, not loopback: anyone who can reach this "
              "machine can query it", file=sys.stderr)
    host = f"[{args.host}]" if ":" in args.host and not args.host.startswith("[") else args.host
    port = sock.getsockname()[1]  # --port 0: the one the system chose
    print(f"gpuroute serve: {spec} on http://{host}:{port} (the map at /; GET /route/v1/driving/LON,LAT;LON,LAT, "
          f"/table/v1, /nearest/v1, /health{', POST /customize' if allow else ''}; Ctrl-C stops)", file=sys.stderr)
    if workers > 1:
        from ..server import workers as server_workers

        layer = server_workers.threading_layer() or "not started"
        note = "" if layer != "workqueue" else "; numba's workqueue layer is not thread-safe: one query at a time " \
                                               "per worker (pip install tbb lifts it)"
        print(f"gpuroute serve: {workers} worker processes, {server_workers.numba_threads(workers)} numba "
              f"thread(s) each (threading layer {layer}){note}"
              + ("; the GPU is not used with more than one worker (--workers 1 uses it)" if _gpu_present() else ""),
              file=sys.stderr)
    start_stamp("serving", workers=workers)  # uvicorn (one process) or the workers' fork follow
    # the request-line limit is the body limit (long GET tables); a longer URL is answered 414
    if not server_http.run(app, sock, log_level="info" if args.verbose else "warning", workers=workers,
                           http=getattr(args, "http", None)):
        raise CLIError(f"the server on {args.host} port {port} did not start (see the log above)")
    return EXIT_OK


def add_parser(sub, common):
    s = sub.add_parser("serve", parents=[common], help="serve a dataset over an OSRM-compatible HTTP API",
                       description="Serve routes, tables and nearest queries over HTTP with the OSRM v5 API "
                                   "(GET/POST /route/v1/{profile}/{coordinates}, /table/v1, /nearest/v1; GET "
                                   "/health). Without an argument: build and serve the shipped Monaco extract.")
    s.add_argument("dataset", nargs="?", default=None, metavar="DIR|GRAPH",
                   help=f"a dataset directory (gpuroute build), a graph file or a shipped graph name (default "
                        f"{DEFAULT_DATASET})")
    s.add_argument("--weight", metavar="NAME", default=None,
                   help="the routing weight (default: a dataset directory's own; else travel_time when the graph "
                        "has it, else its first weight, e.g. distance on ny: routes then report no duration)")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, loopback only)")
    s.add_argument("--port", type=int, default=5000, help="port (default 5000; 0: any free port, printed)")
    s.add_argument("--max-viaroute-size", type=int, default=None, metavar="N",
                   help="most coordinates of a route (default: the engine's limit; <= 0: none)")
    s.add_argument("--max-table-size", type=int, default=None, metavar="N",
                   help="a table has at most N x N cells, sources x destinations (osrm-routed's meaning; default: "
                        "the engine's limit, 100 x 100; <= 0: none)")
    s.add_argument("--max-nearest-size", type=int, default=None, metavar="N",
                   help="largest 'number' of a nearest query (default: the engine's limit; <= 0: none)")
    s.add_argument("--max-alternatives", dest="max_alternatives", type=int, default=None, metavar="N",
                   help="most alternative routes one /route may ask for (osrm-routed's --max-alternatives: 0 refuses "
                        "every alternative, alternatives=true included; default: the engine's limit, "
                        "config.SERVE_MAX_ALTERNATIVES = 3; < 0: none)")
    s.add_argument("--default-radius", type=float, default=None, metavar="M",
                   help="snapping radius in metres of coordinates given no radius (default unlimited, as OSRM; with "
                        "it, a point farther from every road is answered NoSegment)")
    s.add_argument("--max-body", type=int, default=None, metavar="BYTES",
                   help="largest POST body (default 1 MiB)")
    s.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds a request may run before it is answered 504 (default 30; <= 0: none)")
    s.add_argument("--workers", type=int, default=None, metavar="N",
                   help="worker processes answering on the port, forked once the dataset is loaded and warmed up: "
                        "they share its memory and switch traffic together (default: the cores this process may "
                        "use; 1: one process, the only way the GPU is used)")
    s.add_argument("--time-profile", dest="time_profile", metavar="FILE", default=None,
                   help="a time profile (CSV, or Parquet with pandas + pyarrow: speeds or factors per road class, "
                        "way or arc per time slot) that depart_at= reads on /route, /table, /trip and /isochrone "
                        "(README: departure time; needs a dataset directory; overrides the profile stored in it "
                        "by gpuroute timeprofile DIR FILE)")
    s.add_argument("--cache-dir", dest="cache_dir", default=None, metavar="DIR",
                   help="numba's cache of compiled kernels (sets NUMBA_CACHE_DIR; as given to gpuroute warmup / build). "
                        "Kernels it lacks are compiled before the server listens")
    s.add_argument("--threads", type=int, default=None, metavar="N",
                   help="threads running queries at once in each process (default min(8, CPUs))")
    s.add_argument("--http", choices=("auto", "httptools", "h11"), default=None,
                   help="the HTTP parser under uvicorn: httptools (on uvloop), h11, or auto (httptools where it and "
                        "uvloop are installed, else h11; the default, config.SERVE_HTTP)")
    s.add_argument("--allow-customize", dest="allow_customize", action="store_true", default=None,
                   help="serve POST /customize (live traffic; needs a dataset directory from gpuroute build). "
                        "Default: on for a loopback --host, off otherwise")
    s.add_argument("--no-allow-customize", dest="allow_customize", action="store_false",
                   help="refuse POST /customize (HTTP 403) even on loopback")
    s.add_argument("--allow-origin", dest="allow_origin", action="append", default=None, metavar="URL",
                   help="a web origin (scheme://host[:port]) whose pages may POST /customize besides this server's "
                        "own page; repeatable. Reads (route, table, ...) are open to every origin")
    s.set_defaults(func=run)
    return s
