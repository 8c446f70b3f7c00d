"""The overheads around a customization on ``POST /customize`` (issue 20): the traffic file's save, the
engine's own ``Engine.customize``, the HTTP adapter over it, and the time until every serve worker answers
on the new generation (``gpuroute serve DIR --workers N``; response headers ``X-Gpuroute-Worker`` /
``X-Gpuroute-Generation``, :mod:`gpuroute.server.workers`).

Usage::

    python benchmarks/customize_path.py [--dataset monaco|andorra] [--repeat 15] [--workers 2] [--out FILE]

Run it once per tree to compare (``PYTHONPATH=OLD/src`` then the working tree), interleaved. Reports
medians of CPU time (``time.process_time``) and wall time in milliseconds; writes JSON with ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings

import numpy as np


def _med(xs):
    return round(float(np.median(xs)) * 1e3, 3)


def _timed(fn, repeat):
    cpu, wall = [], []
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return {"cpu_ms": _med(cpu), "wall_ms": _med(wall)}


def _updates(engine, k, seed=3):
    cost = np.asarray(engine.overlay.arc_cost)
    rng = np.random.default_rng(seed)
    arcs = rng.choice(cost.size, size=min(k, cost.size), replace=False)
    return [{"arc": int(a), "cost": int(cost[a]) * 2} for a in arcs]


def in_process(directory, repeat):
    """TrafficStore.save alone, Engine.customize (metric switch; 1,000 updates), and the same through
    the HTTP application (Starlette's TestClient: the adapter's parse + format, no sockets)."""
    from gpuroute.engine import Engine
    from gpuroute.engine.dataset import traffic_store

    e = Engine.open(directory)
    st = traffic_store(e.overlay)
    out = {"n_arcs": int(e.graph.n_arcs), "save": _timed(lambda: st.save(e.overlay), repeat)}
    ups = _updates(e, 1000)
    flip = iter(range(10**9))
    metrics = ("time", "time-uturn")

    def switch():
        e.customize(metric=metrics[next(flip) % 2])

    out["engine_metric"] = _timed(switch, repeat)
    out["engine_updates_1000"] = _timed(lambda: e.customize(ups), repeat)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from starlette.testclient import TestClient
        from gpuroute.server import create_app
    except ImportError as err:  # the HTTP part needs the serve extras
        out["http"] = f"skipped: {err}"
        return out
    body_ups = json.dumps({"updates": ups}).encode()
    with TestClient(create_app(e, allow_customize=True)) as client:
        def post(body):
            r = client.post("/customize", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 200, r.text

        out["http_metric"] = _timed(lambda: post(json.dumps({"metric": metrics[next(flip) % 2]}).encode()), repeat)
        out["http_updates_1000"] = _timed(lambda: post(body_ups), repeat)
    return out


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        r.read()
        return int(r.headers["X-Gpuroute-Worker"]), int(r.headers["X-Gpuroute-Generation"])


def workers_switch(directory, n_workers, rounds):
    """Time from the POST's answer until every worker has answered one request on the new generation
    (requests to /nearest from new connections, spread over the workers by the kernel), and the first
    such request's wall time against the steady one's."""
    port = _free_port()
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from gpuroute.cli.main import main; sys.exit(main())", "serve", str(directory), "--port", str(port),
                             "--workers", str(n_workers), "--allow-customize"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if proc.poll() is not None:
        raise RuntimeError("gpuroute serve exited at once")
    base = f"http://127.0.0.1:{port}"
    try:
        from gpuroute.engine import Engine

        e = Engine.open(directory)
        lon, lat = (float(x) for x in e.graph.coords[0])
        del e
        probe = f"{base}/nearest/v1/driving/{lon:.6f},{lat:.6f}"
        t0 = time.time()
        while True:
            try:
                _get(probe)
                break
            except OSError:
                if proc.poll() is not None or time.time() - t0 > 300:
                    raise RuntimeError("the server did not start in 300 s") from None
                time.sleep(0.5)
        seen = set()
        while len(seen) < n_workers and time.time() - t0 < 400:
            seen.add(_get(probe)[0])
        res = []
        metrics = ("time-uturn", "time")
        for i in range(rounds):
            req = urllib.request.Request(f"{base}/customize", method="POST",
                                         data=json.dumps({"metric": metrics[i % 2]}).encode(),
                                         headers={"content-type": "application/json"})
            w = time.perf_counter()
            with urllib.request.urlopen(req, timeout=60) as r:
                r.read()
                gen = int(r.headers["X-Gpuroute-Generation"])
            answered = time.perf_counter()
            switched, first, later = {}, [], []
            while len(switched) < n_workers and time.perf_counter() - answered < 30:
                q = time.perf_counter()
                pid, g = _get(probe)
                dt = time.perf_counter() - q
                if g >= gen and pid not in switched:
                    switched[pid] = time.perf_counter() - answered
                    first.append(dt)
                elif g >= gen:
                    later.append(dt)
            res.append({"post_ms": (answered - w) * 1e3, "all_switched_ms": max(switched.values()) * 1e3,
                        "workers_switched": len(switched), "first_request_ms": float(np.median(first)) * 1e3,
                        "later_request_ms": float(np.median(later)) * 1e3 if later else None})
        return {"workers": n_workers, "rounds": res,
                "median": {k: round(float(np.median([r[k] for r in res if r[k] is not None])), 3)
                           for k in ("post_ms", "all_switched_ms", "first_request_ms", "later_request_ms")
                           if any(r[k] is not None for r in res)}}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="monaco", help="a shipped network (built into a temporary directory) "
                                                        "or a dataset directory")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--workers", type=int, default=2, help="serve workers for the switch (0: skip)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    import gpuroute

    tmp = tempfile.mkdtemp(prefix="customize-path-")
    try:
        if os.path.isdir(a.dataset):
            d = os.path.join(tmp, "ds")
            shutil.copytree(a.dataset, d)
        else:
            from gpuroute.pipeline import build_dataset

            d = os.path.join(tmp, a.dataset)
            build_dataset(a.dataset, d, cell_sizes=(64, 1024))
        out = {"gpuroute": os.path.dirname(gpuroute.__file__), "dataset": a.dataset,
               "date": time.strftime("%Y-%m-%d"), "in_process": in_process(d, a.repeat)}
        if a.workers:
            out["workers_switch"] = workers_switch(d, a.workers, a.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
