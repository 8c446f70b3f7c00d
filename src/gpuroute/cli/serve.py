"""``gpuroute serve``: serve a dataset over an OSRM v5-compatible HTTP API
(:meth:`gpuroute.engine.Engine.open` + :func:`gpuroute.server.create_app`, run by uvicorn).

With no argument it builds and serves the shipped Monaco extract; a dataset directory (``gpuroute
build GRAPH -o DIR``) is loaded without building anything and routes run over its overlay. It binds
127.0.0.1 unless told otherwise (``--host 0.0.0.0`` opens it to the network, with a warning).
``POST /customize`` (live traffic) is served on loopback binds unless ``--no-allow-customize``, and on
other binds only with ``--allow-customize``."""
from __future__ import annotations

import gc
import sys
import time

from .common import EXIT_OK, CLIError, log, one_line, progress

#: What ``gpuroute serve`` serves without an argument.
DEFAULT_DATASET = "monaco"

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def run(args):
    try:
        import uvicorn

        from ..server import create_app
    except ImportError as e:
        raise CLIError(f"gpuroute serve needs the serve extra ({one_line(e)}): pip install 'gpuroute[serve]'") from e
    from ..engine import Engine

    if not 0 < args.port < 65536:
        raise CLIError(f"--port {args.port}: expected 1 .. 65535")
    spec = args.dataset or DEFAULT_DATASET
    t0 = time.perf_counter()
    with progress(f"opening {spec}"):
        engine = Engine.open(spec)
    log.info("opened %r in %.3f s", engine, time.perf_counter() - t0)
    table = None if args.max_table_size is None else max(0, args.max_table_size) ** 2  # the engine counts cells
    counts = {"max_locations_route": args.max_viaroute_size, "max_locations_table": table,
              "max_locations_nearest": args.max_nearest_size}
    counts = {k: v for k, v in counts.items() if v is not None}
    engine_limits = getattr(engine, "limits", None)
    if counts and isinstance(engine_limits, dict):
        engine_limits.update(counts)  # our engine: the server and the engine enforce the same limits
    limits = dict(counts)
    for key, value in (("max_body_bytes", args.max_body), ("timeout_s", args.timeout), ("workers", args.threads),
                       ("default_radius", args.default_radius)):
        if value is not None:
            limits[key] = value
    allow = args.allow_customize if args.allow_customize is not None else args.host in _LOOPBACK
    app = create_app(engine, limits=limits, allow_customize=allow)
    # the engine's arrays and objects live as long as the server: move them out of the garbage
    # collector's generations, so that a request's collections do not walk them (measured: ~45 ms of a
    # 10-minute NY isochrone went to collections before)
    gc.collect()
    gc.freeze()
    if args.host not in _LOOPBACK:
        print(f"gpuroute serve: warning: listening on {args.host}, not loopback: anyone who can reach this "
              "machine can query it", file=sys.stderr)
    print(f"gpuroute serve: {spec} on http://{args.host}:{args.port} (the map at /; GET /route/v1/driving/LON,LAT;LON,LAT, "
          f"/table/v1, /nearest/v1, /health{', POST /customize' if allow else ''}; Ctrl-C stops)", file=sys.stderr)
    max_body = app.state.limits.get("max_body_bytes") or 0
    uvicorn.run(app, host=args.host, port=args.port, log_level="info" if args.verbose else "warning",
                # h11 refuses request lines and headers over this size: long GET tables up to the body limit
                h11_max_incomplete_event_size=max(65536, int(max_body)))
    return EXIT_OK


def add_parser(sub, common):
    s = sub.add_parser("serve", parents=[common], help="serve a dataset over an OSRM-compatible HTTP API",
                       description="Serve routes, tables and nearest queries over HTTP with the OSRM v5 API "
                                   "(GET/POST /route/v1/{profile}/{coordinates}, /table/v1, /nearest/v1; GET "
                                   "/health). Without an argument: build and serve the shipped Monaco extract.")
    s.add_argument("dataset", nargs="?", default=None, metavar="DIR|GRAPH",
                   help=f"a dataset directory (gpuroute build), a graph file or a shipped graph name (default "
                        f"{DEFAULT_DATASET})")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, loopback only)")
    s.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    s.add_argument("--max-viaroute-size", type=int, default=None, metavar="N",
                   help="most coordinates of a route (default: the engine's limit; <= 0: none)")
    s.add_argument("--max-table-size", type=int, default=None, metavar="N",
                   help="a table has at most N x N cells, sources x destinations (osrm-routed's meaning; default: "
                        "the engine's limit, 100 x 100; <= 0: none)")
    s.add_argument("--max-nearest-size", type=int, default=None, metavar="N",
                   help="largest 'number' of a nearest query (default: the engine's limit; <= 0: none)")
    s.add_argument("--default-radius", type=float, default=None, metavar="M",
                   help="snapping radius in metres of coordinates given no radius (default unlimited, as OSRM; with "
                        "it, a point farther from every road is answered NoSegment)")
    s.add_argument("--max-body", type=int, default=None, metavar="BYTES",
                   help="largest POST body (default 1 MiB)")
    s.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds a request may run before it is answered 504 (default 30; <= 0: none)")
    s.add_argument("--threads", type=int, default=None, metavar="N",
                   help="worker threads running queries at once (default min(8, CPUs))")
    s.add_argument("--allow-customize", dest="allow_customize", action="store_true", default=None,
                   help="serve POST /customize (live traffic; needs a dataset directory from gpuroute build). "
                        "Default: on for a loopback --host, off otherwise")
    s.add_argument("--no-allow-customize", dest="allow_customize", action="store_false",
                   help="refuse POST /customize (HTTP 403) even on loopback")
    s.set_defaults(func=run)
    return s
