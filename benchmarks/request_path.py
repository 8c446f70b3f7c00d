"""Benchmark suite: the CPU one ``/route`` or ``/table`` request costs inside the server process, and where
it goes (issue 20). In-process, no sockets: what a worker thread of ``gpuroute serve`` runs for a request
(URL split, ``parse_request`` through the server's ``call``, the engine, ``encode``), and the engine call alone,
each timed with ``time.process_time`` over a batch of requests and profiled with cProfile.

The dataset is what users run: ``gpuroute build monaco.osm.pbf --profile <OSRM's car.lua> -o DIR`` (built
into ``out/request_path/`` once; OSRM's car.lua from the osrm-bindings wheel, ``.ci/fetch_osrm.sh`` /
``make osrm-bin``). The requests are those of an earlier ``benchmarks/serve.py --dataset`` run (its
``.requests.json.gz``: random snappable points of Monaco), so the numbers line up with that benchmark.

Cases: ``/route`` with 2 coordinates and the default options (``route_default``: ``overview=simplified``,
``steps=false``), with ``overview=full``, with ``overview=false``, ``/route`` with
``overview=full&steps=true&annotations=true`` (context), with ``steps=true`` alone (``route_steps_only``: what
routingpy and OSRM's clients ask), with ``steps=true&geometries=geojson&annotations=distance,duration``
(``route_steps_geojson``) and ``/table`` 100 x 100.

Small ``/table`` and ``/trip`` cases (issue 20's fixed cost, ``--cases table4 table25 trip4 trip12 trip25``): the
20 trips of each size of ``--trip-requests`` (a ``benchmarks/serve.py --trips`` run's requests), as ``/table`` of
their points and as ``/trip/v1/driving/...?roundtrip=true&source=any&destination=any``. ``--numba-threads 1`` is a
``gpuroute serve`` worker on 2 cores (two workers, one numba thread each).

``--stages`` adds, per ``/route`` case, the CPU of each stage of the server's GET path (the short parse, snapping,
the search and unpacking, the route object, the waypoints, the JSON), timed one request at a time.

``--sizes N`` measures instead what the rule for answering on the event loop (``config.SERVE_INLINE_*``) is
chosen from: the wall time of one request by service and size (routes of 2-12 coordinates, tables of 2 x 2 to
30 x 30, nearest) and the CPU of one worker-thread hand-off (asyncio and uvloop).

Usage (from the repo root):
    .venv/bin/python benchmarks/request_path.py [--routes 1000] [--tables 20] [--profile-top 25]
        [--requests benchmarks/results/serve_dataset_2026-11-26_before_75fde7b.requests.json.gz]
        [--json OUT.json] [--stages] [--cases route_default route_full ...] [--src OTHER/src]
Prints, per case, the CPU ms per request (through the HTTP adapter: the general parse, the engine and the JSON;
through ``app.direct``, the path the server takes for a GET: its short parse where it has one; and of the engine
call alone) and the top of its cProfile (by total time and by cumulative time).
"""
from __future__ import annotations

import argparse
import cProfile
import gzip
import io
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# --src DIR: another copy of src/ (an earlier version, for a before -> after comparison on one machine)
_SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv[:-1] else str(ROOT / "src")
sys.path.insert(0, _SRC)

REQUESTS = ROOT / "benchmarks" / "results" / "serve_dataset_2026-11-26_before_75fde7b.requests.json.gz"
TRIP_REQUESTS = ROOT / "benchmarks" / "results" / "serve_dataset_2026-11-26_trip_db19feb.requests.json.gz"
OUT = ROOT / "out" / "request_path"


def car_lua():
    found = sorted((ROOT / ".venv" / "osrm").glob("**/profiles/car.lua"))
    if found:
        return found[0]
    r = subprocess.run(["bash", str(ROOT / ".ci" / "fetch_osrm.sh")], capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"OSRM's car.lua is needed (make osrm-bin): {r.stderr.strip()[-500:]}")
    return (ROOT / r.stdout.strip().splitlines()[-1] / ".." / "share" / "profiles" / "car.lua").resolve()


def dataset():
    ds = OUT / "monaco_car"
    if not (ds / "manifest.json").is_file():
        OUT.mkdir(parents=True, exist_ok=True)
        pbf = ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"
        subprocess.run([sys.executable, "-m", "gpuroute.cli", "build", str(pbf), "-o", str(ds), "--profile",
                        str(car_lua())], check=True, cwd=ROOT, capture_output=True)
    return ds


def adapter_call(server, path):
    """What a worker thread runs for a GET ``path``: split, parse (the server's ``call``: the record it runs, e.g. a
    route's steps as JSON text where the tree writes them so), engine, encode (``(status, body)``)."""
    from gpuroute.server.app import parse_query, split_target

    service, _, profile, coords, query = split_target(path)
    return server.work(server.call(service, profile, coords, parse_query(query)))


def direct_scope(path):
    """The ASGI scope of a GET ``path`` as the HTTP protocol hands it to ``app.direct`` (the server's own path
    for a short request: the short parse of :mod:`gpuroute.server.fastpath` where the tree has it, the engine on
    the event loop, the JSON; no socket)."""
    raw, _, query = path.partition("?")
    return {"type": "http", "method": "GET", "http_version": "1.1", "path": raw, "raw_path": raw.encode(),
            "query_string": query.encode(), "headers": [], "scheme": "http", "server": None, "client": None}


def direct_call(app, scope):
    """``app.direct(scope)``, or (a request for a worker thread) the adapter's ``answer_get`` and ``work``."""
    got = app.direct(scope)
    if got is None:
        status, body, call = app.state.adapter.answer_get(scope)
        return app.state.adapter.work(call) if call is not None else (status, body)
    return got[0], got[2]


def engine_call(engine, server, path):
    """The engine call alone (the parsed request's record, as the adapter passes it: ``Engine.run``)."""
    import dataclasses

    from gpuroute.server.app import parse_query, split_target

    service, _, profile, coords, query = split_target(path)
    call = server.call(service, profile, coords, parse_query(query))
    extra = server.table_kwargs if service == "table" else {}
    params = dataclasses.replace(call.params, **extra)
    return lambda: engine.run(params)


def cpu_ms(fn, items, repeat=3):
    """Least CPU ms per item of ``fn`` over ``items``, of ``repeat`` passes."""
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        for x in items:
            fn(x)
        best = min(best, (time.process_time() - t) * 1e3 / len(items))
    return best


def profile_top(fn, items, top, sort):
    pr = cProfile.Profile()
    pr.enable()
    for x in items:
        fn(x)
    pr.disable()
    s = io.StringIO()
    st = pstats.Stats(pr, stream=s)
    st.sort_stats(sort).print_stats(top)
    lines = s.getvalue().splitlines()
    # drop pstats' preamble up to the column header; keep the totals line
    total = next((ln.strip() for ln in lines if "function calls" in ln), "")
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
    body = [ln.replace(_SRC.rstrip("/") + "/", "").replace(str(ROOT) + "/", "") for ln in lines[start:] if ln.strip()]
    return total, body


def stages(eng, server, paths, repeat=3):
    """CPU ms per request of each stage of a ``GET /route`` on the server's path (the short parse of
    :mod:`gpuroute.server.fastpath`, snapping, the search and unpacking, the route object, the waypoints, the JSON),
    the least of ``repeat`` passes over ``paths`` (the default ``continue_straight``, no exclude)."""
    from gpuroute.engine.algorithms import route_search
    from gpuroute.engine.exclude import resolve as resolve_exclude
    from gpuroute.engine.osrm import waypoints
    from gpuroute.engine.services import route as service
    from gpuroute.server.app import _strip, encode

    scopes = [direct_scope(p) for p in paths]
    cs = bool(eng.graph.meta.get("continue_straight_at_waypoint", True))
    names = ("parse", "snap", "search", "route_object", "waypoints", "json")
    best = None
    for _ in range(repeat):
        tot = [0.0] * 6
        for sc in scopes:
            t0 = time.process_time()
            call = server.route_templates.call(sc)
            t1 = time.process_time()
            p = call.params
            ex = resolve_exclude(eng, p.exclude, p.avoid_polygons, p.avoid_ways)
            ph = eng._snap(p, segments=eng._snap_index(ex))
            t2 = time.process_time()
            plan, snap = route_search(eng, ex, None).route(
                ph, continue_straight=cs if p.continue_straight is None else bool(p.continue_straight))
            t3 = time.process_time()
            parts = {"leg_parts": p.leg_parts} if hasattr(p, "leg_parts") else {}  # steps as JSON text (the server's)
            r = service.route_object(eng, ph, service.PhantomRows(ph), plan, snap, steps=p.steps,
                                     annotations=p.annotations, geometries=p.geometries, overview=p.overview, **parts)
            t4 = time.process_time()
            res = {"code": "Ok", "routes": [r], "waypoints": waypoints(ph, eng._fingerprint, eng._names)}
            t5 = time.process_time()
            encode(_strip(res, call))
            t6 = time.process_time()
            for i, (a, b) in enumerate(((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5), (t5, t6))):
                tot[i] += b - a
        best = tot if best is None else [min(x, y) for x, y in zip(best, tot, strict=True)]
    out = {n: round(v * 1e3 / len(scopes), 4) for n, v in zip(names, best, strict=True)}
    out["total"] = round(sum(best) * 1e3 / len(scopes), 4)
    return out


def sizes(server, reqs, n_each):
    """Wall ms (p50, p99, max) of one request through the adapter, by service and size: how long a request
    answered on the event loop holds it (``config.SERVE_INLINE_*``). Routes of k coordinates, tables of n x n,
    nearest with number = m; each from the recorded random points."""
    pts = [c for r in reqs["routes"] for c in r.split(";")]
    rng = np.random.default_rng(3)
    cases = [(f"route {k} coords", "/route/v1/driving/{}?overview=full", k) for k in (2, 3, 4, 6, 8, 12)]
    cases += [("route 2 coords steps+annotations", "/route/v1/driving/{}?overview=full&steps=true&annotations=true", 2)]
    cases += [(f"nearest number={m}", "/nearest/v1/driving/{}?number=" + str(m), 1) for m in (1, 10, 100)]
    cases += [(f"table {n}x{n}", "/table/v1/driving/{}", n) for n in (2, 5, 10, 15, 20, 30)]
    out = {}
    for name, fmt, k in cases:
        paths = [fmt.format(";".join(pts[j] for j in rng.choice(len(pts), k, replace=False))) for _ in range(n_each)]
        for p in paths[:5]:
            adapter_call(server, p)
        wall = []
        for p in paths:
            t = time.perf_counter()
            adapter_call(server, p)
            wall.append(time.perf_counter() - t)
        ms = np.array(wall) * 1e3
        out[name] = {"n": len(paths), "p50_ms": round(float(np.percentile(ms, 50)), 3),
                     "p99_ms": round(float(np.percentile(ms, 99)), 3), "max_ms": round(float(ms.max()), 3)}
        print(f"  {name:36s} p50 {out[name]['p50_ms']:7.3f} ms  p99 {out[name]['p99_ms']:7.3f}  max "
              f"{out[name]['max_ms']:7.3f}", flush=True)
    return out


def handoff(n=5000):
    """CPU us of one worker-thread hand-off (``anyio.to_thread.run_sync`` of a no-op, awaited one at a
    time, the way the server waits for each request) on asyncio's loop and on uvloop, against a direct call."""
    import asyncio

    import anyio.to_thread

    def noop():
        return None

    async def through_thread():
        t = time.process_time()
        for _ in range(n):
            await anyio.to_thread.run_sync(noop)
        return (time.process_time() - t) * 1e6 / n

    async def direct():
        t = time.process_time()
        for _ in range(n):
            noop()
        return (time.process_time() - t) * 1e6 / n

    out = {}
    loops = {"asyncio": asyncio.new_event_loop}
    try:
        import uvloop

        loops["uvloop"] = uvloop.new_event_loop
    except ImportError:
        pass
    for name, make in loops.items():
        for what, fn in (("thread", through_thread), ("direct", direct)):
            runs = []
            for _ in range(3):
                loop = make()
                try:
                    runs.append(loop.run_until_complete(fn()))
                finally:
                    loop.close()
            out[f"{name} {what}"] = round(min(runs), 2)
            print(f"  hand-off {name} {what}: {min(runs):.2f} us CPU per call", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--routes", type=int, default=1000)
    ap.add_argument("--tables", type=int, default=20)
    ap.add_argument("--profile-top", type=int, default=25)
    ap.add_argument("--requests", default=str(REQUESTS))
    ap.add_argument("--dataset", default=None, help="a built dataset directory (default: build Monaco with car.lua)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--src", default=None, help="import gpuroute from this copy of src/ (before -> after runs)")
    ap.add_argument("--stages", action="store_true", help="also the CPU of each stage of a /route case")
    ap.add_argument("--cases", nargs="*", default=["route_default", "route_full", "route_false", "route_steps", "table"])
    ap.add_argument("--trip-requests", default=str(TRIP_REQUESTS),
                    help="requests with trips (cases table4, table25, trip4, trip12, trip25)")
    ap.add_argument("--numba-threads", type=int, default=0, help="numba threads (0: numba's default)")
    ap.add_argument("--sizes", type=int, default=0, metavar="N",
                    help="instead of the cases: wall ms of one request by service and size (N requests each) and "
                         "the worker-thread hand-off's CPU (the config.SERVE_INLINE_* rule)")
    args = ap.parse_args()

    if args.numba_threads:
        import numba

        numba.set_num_threads(args.numba_threads)
    import gpuroute
    from gpuroute.engine import Engine
    from gpuroute.server.app import create_app

    print(f"gpuroute from {Path(gpuroute.__file__).parent}", flush=True)

    ds = Path(args.dataset) if args.dataset else dataset()
    eng = Engine.open(ds)
    app = create_app(eng)
    server = app.state.adapter
    reqs = json.loads(gzip.decompress(Path(args.requests).read_bytes()))["Monaco"]
    routes = reqs["routes"][:args.routes]
    tables = reqs["tables"][:args.tables]
    cases = {
        "route_default": ("/route/v1/driving/{}", routes),
        "route_full": ("/route/v1/driving/{}?overview=full", routes),
        "route_false": ("/route/v1/driving/{}?overview=false", routes),
        "route_steps": ("/route/v1/driving/{}?overview=full&steps=true&annotations=true", routes),
        "route_steps_only": ("/route/v1/driving/{}?steps=true", routes),
        "route_steps_geojson": ("/route/v1/driving/{}?steps=true&geometries=geojson&annotations=distance,duration",
                                routes),
        "table": ("/table/v1/driving/{}", tables),
    }
    if any(c.startswith(("table4", "table25", "trip")) for c in args.cases):
        trips = json.loads(gzip.decompress(Path(args.trip_requests).read_bytes()))["Monaco"]["trips"]
        for k in ("4", "25"):
            cases[f"table{k}"] = ("/table/v1/driving/{}", trips[k])
        for k in ("4", "12", "25"):
            cases[f"trip{k}"] = ("/trip/v1/driving/{}?roundtrip=true&source=any&destination=any", trips[k])
    out = {}
    if args.sizes:
        out = {"sizes": sizes(server, reqs, args.sizes), "handoff_us": handoff(), "loadavg": os.getloadavg()}
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))
        return
    for name in args.cases:
        fmt, items = cases[name]
        paths = [fmt.format(c) for c in items]
        for p in paths[:20]:  # warm: compile, caches
            status, _ = adapter_call(server, p)
        ok = sum(adapter_call(server, p)[0] == 200 for p in paths)
        calls = [engine_call(eng, server, p) for p in paths]
        adapter_ms = cpu_ms(lambda p: adapter_call(server, p), paths)
        scopes = [direct_scope(p) for p in paths]
        direct_ms = cpu_ms(lambda sc: direct_call(app, sc), scopes)
        engine_ms = cpu_ms(lambda f: f(), calls)
        tot, by_tot = profile_top(lambda p: adapter_call(server, p), paths, args.profile_top, "tottime")
        _, by_cum = profile_top(lambda p: adapter_call(server, p), paths, args.profile_top, "cumulative")
        if args.stages and name.startswith("route") and getattr(server, "route_templates", None) is not None:
            st = stages(eng, server, paths)
            print(f"## {name}: CPU ms/request by stage: " + ", ".join(f"{k} {v:.4f}" for k, v in st.items()))
        else:
            st = None
        out[name] = {"requests": len(paths), "ok": ok, "stages_cpu_ms": st, "adapter_cpu_ms": round(adapter_ms, 3),
                     "direct_cpu_ms": round(direct_ms, 3),
                     "engine_cpu_ms": round(engine_ms, 3), "profile_total": tot, "by_tottime": by_tot,
                     "by_cumtime": by_cum}
        print(f"## {name}: {len(paths)} requests ({ok} answered 200); CPU ms/request: adapter (parse + engine + "
              f"encode) {adapter_ms:.3f}, the server's GET path (app.direct) {direct_ms:.3f}, engine alone {engine_ms:.3f}")
        print(f"cProfile over the {len(paths)} requests through the adapter: {tot}")
        print("\n".join(by_tot))
        print()
        print("\n".join(by_cum))
        print(flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
