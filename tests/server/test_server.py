"""The OSRM v5-compatible HTTP adapter (:mod:`gpuroute.server`): URL and option parsing, every error
code it answers, the limits, POST bodies, the worker threads, and the real OSRM client library
(routingpy) against uvicorn on loopback, first over a small fake engine (the HTTP layer alone), then over
the real Monaco engine (skipped until :mod:`gpuroute.engine` exists)."""
from __future__ import annotations

import contextlib
import math
import socket
import sys
import threading
import time
import warnings

import pytest

pytest.importorskip("starlette")
pytest.importorskip("orjson")
pytest.importorskip("polyline")

import orjson  # noqa: E402
import polyline  # noqa: E402

with warnings.catch_warnings():  # newer Starlette asks for httpx2; httpx works the same
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from gpuroute.server import DEFAULT_LIMITS, OSRMError, create_app, parse_coordinates, parse_request  # noqa: E402

#: Two points in Monaco (lon, lat): Place du Casino and Port Hercule; a third in Fontvieille.
CASINO = (7.4282, 43.7396)
PORT = (7.4233, 43.7347)
FONTVIEILLE = (7.4168, 43.7283)
#: Far from any road of Monaco (the Mediterranean, 40 km south).
SEA = (7.43, 43.35)


class FakeEngineError(Exception):
    """Shaped as gpuroute.engine.EngineError: ``code`` and ``message``."""

    def __init__(self, code, message):
        super().__init__(code, message)
        self.code = code
        self.message = message


def _seconds(a, b):
    return round(1e4 * (abs(a[0] - b[0]) + abs(a[1] - b[1])), 1)


def _waypoint(c):
    return {"location": [c[0], c[1]], "name": "Avenue", "distance": 1.0, "hint": "AAAA"}


class FakeEngine:
    """The engine's interface with answers computed from the coordinates; records every call."""

    limits = {"max_locations_route": 10, "max_locations_table": 16, "max_locations_nearest": 5}

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def _check(self, coords):
        for i, c in enumerate(coords):
            if 40 < c[1] < 43.5:
                raise FakeEngineError("NoSegment", f"Could not find a matching segment for coordinate {i}")

    def route(self, coords, *, alternatives=False, steps=False, annotations=False, geometries="polyline",
              overview="simplified", radiuses=None, bearings=None, approaches=None, continue_straight=None):
        kw = dict(alternatives=alternatives, steps=steps, annotations=annotations, geometries=geometries,
                  overview=overview, radiuses=radiuses, bearings=bearings, approaches=approaches,
                  continue_straight=continue_straight)
        with self.lock:
            self.calls.append(("route", list(coords), kw))
        self._check(coords)
        if coords[-1] == (0.0, 0.0):
            raise FakeEngineError("NoRoute", "Impossible route between points")
        if coords[-1] == (1.0, 1.0):
            raise RuntimeError("engine bug\nwith a traceback")
        if coords[-1] == (2.0, 2.0):
            time.sleep(1.0)
        dur = sum(_seconds(a, b) for a, b in zip(coords, coords[1:], strict=False))
        geom = ({"type": "LineString", "coordinates": [list(c) for c in coords]} if geometries == "geojson"
                else polyline.encode([(c[1], c[0]) for c in coords], 6 if geometries == "polyline6" else 5))
        return {"code": "Ok", "waypoints": [_waypoint(c) for c in coords],
                "routes": [{"duration": dur, "distance": 10 * dur, "weight": dur, "weight_name": "duration",
                            "geometry": geom, "legs": [{"duration": dur, "distance": 10 * dur, "summary": "",
                                                        "steps": [], "weight": dur}]}]}

    def table(self, coords, *, sources=None, destinations=None, annotations=("duration",), radiuses=None,
              bearings=None, approaches=None, fallback_speed=None, scale_factor=None):
        import numpy as np

        with self.lock:
            self.calls.append(("table", list(coords), dict(sources=sources, destinations=destinations,
                                                            annotations=annotations, radiuses=radiuses)))
        self._check(coords)
        src = range(len(coords)) if sources is None else sources
        dst = range(len(coords)) if destinations is None else destinations
        d = np.array([[_seconds(coords[i], coords[j]) for j in dst] for i in src], dtype=np.float64)
        out = {"code": "Ok", "sources": [_waypoint(coords[i]) for i in src],
               "destinations": [_waypoint(coords[j]) for j in dst]}
        if "duration" in annotations:
            out["durations"] = d
        if "distance" in annotations:
            out["distances"] = 10 * d
        return out

    def nearest(self, coord, *, number=1, radiuses=None, bearings=None, approaches=None):
        with self.lock:
            self.calls.append(("nearest", [coord], dict(number=number)))
        self._check([coord])
        return {"code": "Ok", "waypoints": [_waypoint(coord) for _ in range(number)]}


class PerThreadEngine(FakeEngine):
    """An engine with ``query_for_thread()``: the server must use one query object per worker thread."""

    def __init__(self):
        super().__init__()
        self.made = []

    def query_for_thread(self):
        q = _Query(self, threading.get_ident())
        with self.lock:
            self.made.append(q)
        return q


class _Query:
    def __init__(self, engine, thread):
        self.engine, self.thread, self.uses = engine, thread, 0

    def route(self, coords, **kw):
        assert threading.get_ident() == self.thread, "a query object used by two threads"
        self.uses += 1
        time.sleep(0.01)
        return self.engine.route(coords, **kw)


@pytest.fixture
def fake():
    return FakeEngine()


@pytest.fixture
def client(fake):
    return TestClient(create_app(fake))


def _coords(*pts):
    return ";".join(f"{x},{y}" for x, y in pts)


def _error(r, code, status=400):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert "\n" not in r.text.strip()
    body = r.json()
    assert set(body) == {"code", "message"} and body["code"] == code, body
    assert body["message"] and "\n" not in body["message"] and "Traceback" not in body["message"]
    return body["message"]


# --------------------------------------------------------------------------------------------------
# Parsing


def test_route_options_reach_the_engine(client, fake):
    url = (f"/route/v1/driving/{_coords(CASINO, PORT, FONTVIEILLE)}?steps=true&alternatives=2"
           "&annotations=duration,distance&geometries=polyline6&overview=full&continue_straight=false"
           "&radiuses=5;unlimited;&bearings=90,20;;0,180&approaches=curb;;unrestricted&hints=;;"
           "&generate_hints=true")
    r = client.get(url)
    assert r.status_code == 200, r.text
    assert r.headers["access-control-allow-origin"] == "*"
    name, coords, kw = fake.calls[-1]
    assert coords == [CASINO, PORT, FONTVIEILLE]
    assert kw == dict(alternatives=2, steps=True, annotations=["duration", "distance"], geometries="polyline6",
                      overview="full", radiuses=[5.0, None, None], bearings=[(90, 20), None, (0, 180)],
                      approaches=["curb", None, "unrestricted"], continue_straight=False)
    assert r.json()["routes"][0]["duration"] == _seconds(CASINO, PORT) + _seconds(PORT, FONTVIEILLE)


def test_route_defaults_pass_nothing(client, fake):
    r = client.get(f"/route/v1/car/{_coords(CASINO, PORT)}.json")
    assert r.status_code == 200
    assert fake.calls[-1][2]["steps"] is False and fake.calls[-1][2]["radiuses"] is None
    r = client.get(f"/route/v1/car/{_coords(CASINO, PORT)}?alternatives=false&annotations=true&"
                   "continue_straight=default&overview=false")
    assert r.status_code == 200
    kw = fake.calls[-1][2]
    from gpuroute.engine.osrm import ROUTE_ANNOTATIONS

    # the record's values (gpuroute.engine.params): annotations=true is every annotation's name
    assert (kw["alternatives"], kw["annotations"], kw["continue_straight"], kw["overview"]) == (
        False, list(ROUTE_ANNOTATIONS), None, "false")


@pytest.mark.parametrize("precision", [5, 6])
def test_polyline_coordinates(client, fake, precision):
    enc = polyline.encode([(CASINO[1], CASINO[0]), (PORT[1], PORT[0])], precision)
    name = "polyline" if precision == 5 else "polyline6"
    r = client.get(f"/route/v1/driving/{name}({enc})?overview=false")
    assert r.status_code == 200, r.text
    got = fake.calls[-1][1]
    assert all(math.isclose(a, b, abs_tol=10 ** -precision) for p, q in zip(got, [CASINO, PORT], strict=True)
               for a, b in zip(p, q, strict=True))


def test_polyline_with_a_bare_question_mark(client, fake):
    """'?' is in the polyline alphabet; OSRM clients do not always escape it."""
    pts = [(43.7396, 7.4282), (43.7396, 7.4282), (43.7347, 7.4233)]
    enc = polyline.encode(pts, 5)
    assert "?" in enc
    r = client.get(f"/route/v1/driving/polyline({enc}).json?steps=true")
    assert r.status_code == 200, r.text
    assert len(fake.calls[-1][1]) == 3 and fake.calls[-1][2]["steps"] is True
    r = client.get(f"/route/v1/driving/polyline({enc.replace('?', '%3F')})?steps=true")
    assert r.status_code == 200, r.text


def test_percent_encoded_coordinates_and_options(client, fake):
    r = client.get("/table/v1/driving/7.4282%2C43.7396%3B7.4233%2C43.7347?sources=0%3B1&annotations=duration%2C"
                   "distance")
    assert r.status_code == 200, r.text
    assert fake.calls[-1][2]["sources"] == [0, 1]
    assert set(r.json()) >= {"durations", "distances", "sources", "destinations"}


def test_table_options_and_nan_is_null(client, fake):
    r = client.get(f"/table/v1/driving/{_coords(CASINO, PORT, FONTVIEILLE)}?sources=0&destinations=all")
    assert r.status_code == 200
    assert fake.calls[-1][2]["sources"] == [0] and fake.calls[-1][2]["destinations"] is None
    assert fake.calls[-1][2]["annotations"] is not None
    assert r.json()["durations"] == [[0.0, _seconds(CASINO, PORT), _seconds(CASINO, FONTVIEILLE)]]
    app = create_app(type("NaNEngine", (), {"table": lambda self, c, **kw: {
        "code": "Ok", "durations": [[0.0, float("nan")], [float("inf"), 0.0]]}})())
    assert TestClient(app).get(f"/table/v1/x/{_coords(CASINO, PORT)}").json()["durations"] == [
        [0.0, None], [None, 0.0]]


def test_nearest(client, fake):
    r = client.get(f"/nearest/v1/driving/{_coords(CASINO)}?number=3")
    assert r.status_code == 200
    assert fake.calls[-1] == ("nearest", [CASINO], {"number": 3}) and len(r.json()["waypoints"]) == 3


def test_generate_hints_and_skip_waypoints(client):
    r = client.get(f"/route/v1/driving/{_coords(CASINO, PORT)}?generate_hints=false")
    assert all("hint" not in w for w in r.json()["waypoints"])
    r = client.get(f"/route/v1/driving/{_coords(CASINO, PORT)}?skip_waypoints=true")
    assert "waypoints" not in r.json() and r.json()["routes"]
    r = client.get(f"/table/v1/driving/{_coords(CASINO, PORT)}?skip_waypoints=true")
    assert "sources" not in r.json() and "durations" in r.json()


def test_post_json_and_form(client, fake):
    body = {"coordinates": [list(CASINO), list(PORT), list(FONTVIEILLE)], "sources": [0, 2],
            "annotations": ["duration", "distance"], "radiuses": [5, None, "unlimited"],
            "bearings": [[90, 20], None, None]}
    r = client.post("/table/v1/driving", json=body)
    assert r.status_code == 200, r.text
    assert fake.calls[-1][2]["sources"] == [0, 2] and fake.calls[-1][2]["radiuses"] == [5.0, None, None]
    assert len(r.json()["distances"]) == 2
    r = client.post(f"/route/v1/driving/{_coords(CASINO, PORT)}", data={"steps": "true", "radiuses": "5;5"})
    assert r.status_code == 200, r.text
    assert fake.calls[-1][2]["steps"] is True and fake.calls[-1][2]["radiuses"] == [5.0, 5.0]
    r = client.post("/route/v1/driving", content=f"coordinates={_coords(CASINO, PORT)}&steps=true",
                    headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200, r.text
    r = client.post("/route/v1/driving", json={"coordinates": _coords(CASINO, PORT), "steps": True,
                                               "overview": False})
    assert r.status_code == 200, r.text
    assert fake.calls[-1][2]["overview"] == "false"


def test_health(client):
    r = client.get("/health")
    assert r.status_code == 200
    h = r.json()
    assert h["status"] == "ok" and set(h["services"]) == {"route", "table", "nearest"}
    assert h["limits"]["max_locations_table"] == FakeEngine.limits["max_locations_table"]


def test_parse_coordinates_directly():
    assert parse_coordinates("7.1,43.2;-7,-43") == [(7.1, 43.2), (-7.0, -43.0)]
    with pytest.raises(OSRMError) as e:
        parse_coordinates("43.7,200")
    assert e.value.code == "InvalidValue"


# --------------------------------------------------------------------------------------------------
# Errors: every code the adapter answers, HTTP 400, one line; the server keeps serving


ERRORS = [
    ("InvalidUrl", "/route"),  # GET / is the web page (tests/server/test_web_page.py)
    ("InvalidUrl", "/route/v1/driving"),
    ("InvalidUrl", "/route/v1/driving/"),
    ("InvalidUrl", f"/route/v1/driving/{_coords(CASINO, PORT)}.xml"),
    ("InvalidUrl", f"/route/v1/dr%20iving/{_coords(CASINO, PORT)}"),
    ("InvalidService", f"/match/v1/driving/{_coords(CASINO, PORT)}"),
    ("InvalidService", f"/files/v1/driving/{_coords(CASINO, PORT)}"),
    ("InvalidVersion", f"/route/v5/driving/{_coords(CASINO, PORT)}"),
    ("InvalidQuery", "/route/v1/driving/7.4282,43.7396;7.4233"),
    ("InvalidQuery", "/route/v1/driving/7.4282,43.7396;abc,43.7"),
    ("InvalidQuery", "/route/v1/driving/7.4282,43.7396;nan,43.7"),
    ("InvalidQuery", "/route/v1/driving/7.4282,43.7396;;7.4233,43.7347"),
    ("InvalidQuery", "/route/v1/driving/polyline(!!!)"),
    ("InvalidQuery", "/route/v1/driving/polyline(_p~iF~ps|U_ulL)"),
    ("InvalidQuery", "/route/v1/driving/polyline(~~~)"),
    # digits of other scripts (Arabic-Indic 9, fullwidth 4, Devanagari 1): OSRM takes ASCII numbers only
    ("InvalidQuery", "/route/v1/driving/7.4282,43.7396;%D9%A9.5209,43.7"),
    ("InvalidQuery", "/route/v1/driving/7.4282,43.7396;7.42,%EF%BC%94%EF%BC%93.7"),
    ("InvalidQuery", f"/route/v1/driving/{_coords(CASINO, PORT)}?radiuses=%E0%A5%A7;5"),
    ("InvalidQuery", f"/table/v1/driving/{_coords(CASINO, PORT)}?sources=%D9%A0"),
    ("InvalidQuery", f"/nearest/v1/driving/{_coords(CASINO)}?number=%D9%A2"),
    ("InvalidQuery", f"/route/v1/driving/{_coords(CASINO, PORT)}?steps=maybe"),
    ("InvalidQuery", f"/route/v1/driving/{_coords(CASINO, PORT)}?steps"),
    ("InvalidQuery", f"/route/v1/driving/{_coords(CASINO, PORT)}?steps=true&steps=false"),
    ("InvalidQuery", f"/route/v1/driving/{_coords(CASINO, PORT)}?radiuses=abc;5"),
    ("InvalidQuery", f"/route/v1/driving/{_coords(CASINO, PORT)}?bearings=90;"),
    ("InvalidQuery", f"/nearest/v1/driving/{_coords(CASINO)}?number=two"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?foo=bar"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?number=3"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?file=/etc/passwd"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?radiuses=5"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?approaches=curb;curb;curb"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO)}"),
    ("InvalidOptions", f"/nearest/v1/driving/{_coords(CASINO, PORT)}"),
    ("InvalidOptions", f"/table/v1/driving/{_coords(CASINO, PORT)}?sources=0;2"),
    ("InvalidOptions", f"/table/v1/driving/{_coords(CASINO, PORT)}?steps=true"),
    # a value the option does not take: InvalidOptions, the same code as the Python API's (one check,
    # gpuroute.engine.params; osrm-routed's IsValid answers these InvalidOptions too)
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?bearings=400,20;"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?bearings=90,200;"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?radiuses=-1;5"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?approaches=left;curb"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?geometries=wkt"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?overview=some"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?annotations=duration,colour"),
    ("InvalidOptions", f"/route/v1/driving/{_coords(CASINO, PORT)}?snapping=nearest"),
    ("InvalidOptions", f"/nearest/v1/driving/{_coords(CASINO)}?number=0"),
    ("InvalidOptions", f"/table/v1/driving/{_coords(CASINO, PORT)}?annotations=true"),
    ("InvalidValue", "/route/v1/driving/7.4282,43.7396;7.4233,95"),
    ("InvalidValue", "/route/v1/driving/43.7396,7.4282;181,43.7"),
    ("InvalidValue", f"/route/v1/driving/{_coords(CASINO, PORT)}?exclude=motorway"),
    ("InvalidValue", f"/route/v1/driving/{_coords(CASINO, PORT)}?snapping=any"),
    ("InvalidValue", f"/table/v1/driving/{_coords(CASINO, PORT)}?fallback_speed=0"),
    ("TooBig", "/route/v1/driving/" + _coords(*[CASINO] * 11)),
    ("TooBig", "/table/v1/driving/" + _coords(*[CASINO] * 5)),
    ("TooBig", f"/nearest/v1/driving/{_coords(CASINO)}?number=6"),
    ("TooBig", f"/route/v1/driving/{_coords(CASINO, PORT)}?alternatives=4"),
    ("NoSegment", f"/route/v1/driving/{_coords(CASINO, SEA)}"),
    ("NoSegment", f"/table/v1/driving/{_coords(SEA, CASINO)}"),
    ("NoSegment", f"/nearest/v1/driving/{_coords(SEA)}"),
    ("NoRoute", f"/route/v1/driving/{_coords(CASINO, (0, 0))}"),
]


@pytest.mark.parametrize(("code", "url"), ERRORS, ids=[f"{c}-{i}" for i, (c, _) in enumerate(ERRORS)])
def test_errors(client, fake, code, url):
    _error(client.get(url), code)
    assert client.get(f"/route/v1/driving/{_coords(CASINO, PORT)}").status_code == 200  # still serving


def test_a_table_within_the_limit_by_sources(client):
    """The table limit counts cells: 5 coordinates with one source is 5 <= 16 cells."""
    r = client.get("/table/v1/driving/" + _coords(*[CASINO] * 5) + "?sources=0")
    assert r.status_code == 200, r.text


def test_default_radius(fake):
    c = TestClient(create_app(fake, limits={"default_radius": 250}))
    assert c.get(f"/route/v1/driving/{_coords(CASINO, PORT)}").status_code == 200
    assert fake.calls[-1][2]["radiuses"] == [250, 250]
    assert c.get(f"/route/v1/driving/{_coords(CASINO, PORT)}?radiuses=5;unlimited").status_code == 200
    assert fake.calls[-1][2]["radiuses"] == [5.0, None]
    assert c.get(f"/route/v1/driving/{_coords(CASINO, PORT)}?radiuses=;7").status_code == 200
    assert fake.calls[-1][2]["radiuses"] == [250, 7.0]


def test_limits_override_the_engine(fake):
    c = TestClient(create_app(fake, limits={"max_locations_route": 2, "max_locations_table": 0}))
    _error(c.get("/route/v1/driving/" + _coords(CASINO, PORT, FONTVIEILLE)), "TooBig")
    assert c.get("/table/v1/driving/" + _coords(*[CASINO] * 20)).status_code == 200  # 0 lifts the limit


def test_post_errors(client):
    big = b"{" + b" " * (DEFAULT_LIMITS["max_body_bytes"] + 10) + b"}"
    _error(client.post("/table/v1/driving", content=big, headers={"content-type": "application/json"}), "TooBig")

    def chunks():  # no content-length: the limit is counted as the body arrives
        for _ in range(40):
            yield b" " * 65536

    _error(client.post("/table/v1/driving", content=chunks(), headers={"content-type": "application/json"}),
           "TooBig")
    _error(client.post("/table/v1/driving", content=b"[1, 2]", headers={"content-type": "application/json"}),
           "InvalidQuery")
    _error(client.post("/table/v1/driving", content=b"{nope", headers={"content-type": "application/json"}),
           "InvalidQuery")
    _error(client.post("/table/v1/driving", content=b"\xff\xfe", headers={"content-type": "text/plain"}),
           "InvalidQuery")
    _error(client.post("/table/v1/driving", json={"coordinates": {"a": 1}}), "InvalidQuery")
    _error(client.post(f"/table/v1/driving/{_coords(CASINO, PORT)}", json={"coordinates": [list(CASINO)]}),
           "InvalidQuery")
    _error(client.post(f"/table/v1/driving/{_coords(CASINO, PORT)}?sources=0", json={"sources": [1]}),
           "InvalidQuery")
    _error(client.post("/table/v1/driving", json={"sources": [0]}), "InvalidUrl")
    _error(client.post("/table/v1/driving", json={"coordinates": [list(CASINO)], "file": "x"}), "InvalidOptions")
    assert client.get("/health").status_code == 200


def test_internal_error_is_one_line_500(client):
    msg = _error(client.get(f"/route/v1/driving/{_coords(CASINO, (1, 1))}"), "InternalError", status=500)
    assert "engine bug" not in msg  # the engine's message stays in the log


def test_timeout():
    """Past ``timeout_s`` the client gets 504 while the engine is still at work: the slow route blocks
    until the test has read the 504, so the answer cannot have waited for the engine (no wall time)."""
    release, finished = threading.Event(), threading.Event()

    class Blocking(FakeEngine):
        def route(self, coords, **kw):
            if coords[-1] == (2.0, 2.0):
                release.wait(10)  # only reached in full where the server does not time out
                finished.set()
                coords = [*coords[:-1], PORT]
            return super().route(coords, **kw)

    c = TestClient(create_app(Blocking(), limits={"timeout_s": 0.2}))
    try:
        _error(c.get(f"/route/v1/driving/{_coords(CASINO, (2, 2))}"), "Timeout", status=504)
        assert not finished.is_set()  # answered before the engine's call returned
    finally:
        release.set()
    assert finished.wait(10)  # the engine's call completes in its worker thread
    assert c.get(f"/route/v1/driving/{_coords(CASINO, PORT)}").status_code == 200


def test_one_query_object_per_worker_thread():
    eng = PerThreadEngine()
    app = create_app(eng, limits={"workers": 3})
    url = f"/route/v1/driving/{_coords(CASINO, PORT)}"
    with TestClient(app) as c:
        statuses = []

        def hit():
            for _ in range(5):
                statuses.append(c.get(url).status_code)

        threads = [threading.Thread(target=hit) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert statuses == [200] * 30
    assert 1 <= len(eng.made) and sum(q.uses for q in eng.made) == 30
    assert len({q.thread for q in eng.made}) == len(eng.made)  # one object per thread


def test_serve_command_parser():
    import argparse

    from gpuroute.cli import serve

    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command")
    serve.add_parser(sub, argparse.ArgumentParser(add_help=False))
    a = p.parse_args(["serve"])
    assert (a.dataset, a.host, a.port, a.func) == (None, "127.0.0.1", 5000, serve.run)
    a = p.parse_args(["serve", "some/dir", "--port", "5055", "--max-table-size", "50"])
    assert (a.dataset, a.port, a.max_table_size) == ("some/dir", 5055, 50)


# --------------------------------------------------------------------------------------------------
# The real OSRM client library against uvicorn on loopback


@pytest.fixture
def serve_on_loopback():
    """``start(app) -> base_url``: uvicorn in a thread on a free loopback port, stopped after the test."""
    uvicorn = pytest.importorskip("uvicorn")
    from gpuroute.server.http import config as server_config

    servers = []

    def start(app, http=None, **kw):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(server_config(app, log_level="warning", http=http, **kw))  # as gpuroute serve does
        th = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        th.start()
        servers.append((server, th, sock))
        t0 = time.monotonic()
        while not server.started:
            assert th.is_alive() and time.monotonic() - t0 < 10, "uvicorn did not start"
            time.sleep(0.01)
        return f"http://127.0.0.1:{sock.getsockname()[1]}"

    yield start
    for server, th, sock in servers:
        server.should_exit = True
        th.join(10)
        sock.close()


def _routingpy(base_url):
    routingpy = pytest.importorskip("routingpy")
    return routingpy.OSRM(base_url=base_url, timeout=30, retry_over_query_limit=False)


def test_routingpy_against_the_http_layer(fake, serve_on_loopback):
    """routingpy unchanged against uvicorn over the fake engine: the HTTP layer end to end."""
    api = _routingpy(serve_on_loopback(create_app(fake)))
    d = api.directions(locations=[list(CASINO), list(PORT)], profile="driving")
    assert d.duration == int(_seconds(CASINO, PORT))
    assert d.geometry[0] == pytest.approx(list(CASINO), abs=1e-5)
    d = api.directions(locations=[list(CASINO), list(PORT)], profile="driving", geometries="geojson",
                       radiuses=[100, 100], bearings=[[90, 45], [0, 180]], steps=True, overview="full")
    assert fake.calls[-1][2]["bearings"] == [(90, 45), (0, 180)] and fake.calls[-1][2]["steps"] is True
    m = api.matrix(locations=[list(CASINO), list(PORT), list(FONTVIEILLE)], profile="driving", sources=[0, 1])
    assert m.durations == [[0.0, _seconds(CASINO, PORT), _seconds(CASINO, FONTVIEILLE)],
                           [_seconds(PORT, CASINO), 0.0, _seconds(PORT, FONTVIEILLE)]]
    assert m.distances[0][1] == 10 * _seconds(CASINO, PORT)
    from routingpy.exceptions import RouterApiError

    with pytest.raises(RouterApiError) as e:
        api.directions(locations=[list(CASINO), list(SEA)], profile="driving")
    assert e.value.status == 400 and "NoSegment" in str(e.value.message)


# --------------------------------------------------------------------------------------------------
# The real engine on Monaco (skipped until gpuroute.engine exists)


def _same_matrix(got, want):
    """A matrix from JSON equals the engine's (a list of lists or an array; NaN/None for unreachable)."""
    ref = orjson.loads(orjson.dumps(want, option=orjson.OPT_SERIALIZE_NUMPY))
    assert len(got) == len(ref) and all(len(g) == len(w) for g, w in zip(got, ref, strict=True))
    for g_row, w_row in zip(got, ref, strict=True):
        for g, w in zip(g_row, w_row, strict=True):
            assert (g is None and w is None) or g == pytest.approx(w)


@pytest.fixture(scope="module")
def monaco():
    from gpuroute.engine import Engine

    return Engine.open("monaco")


@pytest.fixture(scope="module")
def monaco_client(monaco):
    return TestClient(create_app(monaco))


def test_real_route_table_nearest(monaco, monaco_client):
    c = monaco_client
    r = c.get(f"/route/v1/driving/{_coords(CASINO, PORT)}?steps=true&annotations=true&overview=full")
    assert r.status_code == 200, r.text
    want = monaco.route([CASINO, PORT], steps=True, annotations=True, overview="full")
    got = r.json()
    assert got["code"] == "Ok"
    assert got["routes"][0]["duration"] == pytest.approx(want["routes"][0]["duration"])
    assert got["routes"][0]["distance"] == pytest.approx(want["routes"][0]["distance"])
    pts = [CASINO, PORT, FONTVIEILLE]
    r = c.get(f"/table/v1/driving/{_coords(*pts)}?annotations=duration,distance")
    assert r.status_code == 200, r.text
    want = monaco.table(pts, annotations=("duration", "distance"))
    _same_matrix(r.json()["durations"], want["durations"])
    _same_matrix(r.json()["distances"], want["distances"])
    r = c.get(f"/nearest/v1/driving/{_coords(CASINO)}?number=2")
    assert r.status_code == 200 and len(r.json()["waypoints"]) >= 1


def test_real_errors(monaco, monaco_client):
    c = monaco_client
    # OSRM's default radius is unlimited: a far point snaps (40 km away) unless a radius bounds it
    _error(c.get(f"/route/v1/driving/{_coords(CASINO, SEA)}?radiuses=;1000"), "NoSegment")
    _error(c.get(f"/nearest/v1/driving/{_coords(SEA)}?radiuses=100"), "NoSegment")
    bounded = TestClient(create_app(monaco, limits={"default_radius": 1000}))
    _error(bounded.get(f"/route/v1/driving/{_coords(CASINO, SEA)}"), "NoSegment")
    _error(bounded.get(f"/table/v1/driving/{_coords(SEA, CASINO)}"), "NoSegment")
    assert bounded.get(f"/route/v1/driving/{_coords(CASINO, SEA)}?radiuses=;unlimited").status_code == 200
    _error(c.get(f"/route/v1/driving/{_coords(CASINO, PORT)}?radiuses=0.5;0.5&foo=1"), "InvalidOptions")
    health = c.get("/health").json()
    assert health["status"] == "ok" and health["engine"]["graph"]
    limit = health["limits"]["max_locations_route"]
    if limit:
        _error(c.get("/route/v1/driving/" + _coords(*[CASINO] * (limit + 1))), "TooBig")
    assert c.get(f"/route/v1/driving/{_coords(CASINO, PORT)}").status_code == 200


def test_routingpy_against_the_real_engine(monaco, serve_on_loopback):
    """routingpy's OSRM client, unchanged, against uvicorn serving Monaco: durations equal the engine's."""
    api = _routingpy(serve_on_loopback(create_app(monaco)))
    pts = [CASINO, PORT, FONTVIEILLE]
    d = api.directions(locations=[list(CASINO), list(FONTVIEILLE)], profile="driving")
    want = monaco.route([CASINO, FONTVIEILLE])["routes"][0]
    assert d.duration == int(want["duration"]) and d.distance == int(want["distance"])
    assert len(d.geometry) >= 2
    m = api.matrix(locations=[list(p) for p in pts], profile="driving")
    want = monaco.table(pts, annotations=("duration", "distance"))
    _same_matrix(m.durations, want["durations"])
    _same_matrix(m.distances, want["distances"])


def test_serve_command_runs_uvicorn_on_loopback(monkeypatch, capsys):
    """``gpuroute serve`` opens the engine (Monaco by default), binds 127.0.0.1 and hands the HTTP server
    the app with its limits."""
    port = _free_port()
    opened = []
    ran = _serve_stub(monkeypatch, ["serve", "--port", str(port), "--max-table-size", "7", "--timeout", "5",
                                    "--default-radius", "500"], opened)
    assert opened == ["monaco"] and ran["address"] == ("127.0.0.1", port)
    lim = ran["app"].state.limits
    assert lim["max_locations_table"] == 49 and lim["timeout_s"] == 5 and lim["default_radius"] == 500
    assert ran["app"].state.engine.limits["max_locations_table"] == 49  # the engine enforces the same
    assert ran["app"].state.ready  # warmed up before the HTTP server was started
    err = capsys.readouterr().err
    assert f"http://127.0.0.1:{port}" in err and "compiling" in err


# --------------------------------------------------------------------------------------------------
# Issue 18: minor findings of the HTTP layer and of gpuroute serve


def test_malformed_polyline_message_is_clean(client):
    for enc in ("~~~", "_p~iF~ps|U_ulL", "?"):
        msg = _error(client.get(f"/route/v1/driving/polyline({enc})"), "InvalidQuery")
        assert "Error" not in msg and "polyline" in msg, msg


def test_non_ascii_digits_are_refused():
    for text in ("\u0669.5209,43.7", "7.42,\uff14\uff13.7", "7.42,43.7\u0663"):
        with pytest.raises(OSRMError) as e:
            parse_coordinates(text)
        assert e.value.code == "InvalidQuery"
    assert parse_coordinates("+7.5e0,-4.35E1;.5,1.") == [(7.5, -43.5), (0.5, 1.0)]


def _parsers():
    """The HTTP parsers installed here (h11 always; httptools with uvloop, the serve extra's)."""
    from gpuroute.server.http import parser

    return ["h11"] + (["httptools"] if parser("auto") == "httptools" else [])


@pytest.mark.parametrize("parser", _parsers())
def test_a_long_url_is_answered_414(fake, serve_on_loopback, parser):
    """A URL past the HTTP server's request-line limit is answered 414 URI Too Long (OSRM's JSON), the
    connection read to its end first so that the client gets the answer instead of a reset; with either
    parser (httptools has no limit of its own)."""
    import http.client

    base = serve_on_loopback(create_app(fake), http=parser)
    host, port = base.rsplit("/", 1)[1].split(":")
    path = "/route/v1/driving/" + ";".join([_coords(CASINO)] * (2_000_000 // 16))
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", path)
    r = conn.getresponse()
    body = orjson.loads(r.read())
    conn.close()
    assert r.status == 414 and body["code"] == "TooBig" and "POST" in body["message"], body
    conn = http.client.HTTPConnection(host, int(port), timeout=30)  # a URL within the limit still works
    conn.request("GET", f"/route/v1/driving/{_coords(CASINO, PORT)}")
    assert conn.getresponse().status == 200
    conn.close()


def test_loopback_hosts():
    from gpuroute.cli.serve import is_loopback

    for host in ("127.0.0.1", "127.0.0.2", "127.255.0.9", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.168.1.10", "10.0.0.1", "example.com", ""):
        assert not is_loopback(host), host


def test_serve_on_127_0_0_2_is_loopback(monkeypatch, capsys):
    ran = _serve_stub(monkeypatch, ["serve", "--host", "127.0.0.2", "--port", str(_free_port("127.0.0.2"))])
    err = capsys.readouterr().err
    assert "not loopback" not in err and ran["app"].state.allow_customize is True


def test_port_in_use_exits_2_naming_the_port(capsys):
    from gpuroute.cli.main import main

    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        rc = main(["serve", "--port", str(port)])
    finally:
        busy.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and str(port) in err[0] and "in use" in err[0], err


def test_serve_allow_origin(monkeypatch, capsys):
    ran = _serve_stub(monkeypatch, ["serve", "--port", str(_free_port()), "--allow-origin", "https://map.example",
                                    "--allow-origin", "http://10.0.0.5:8000"])
    assert ran["app"].state.allow_origins == ("https://map.example", "http://10.0.0.5:8000")
    from gpuroute.cli.main import main

    capsys.readouterr()
    rc = main(["serve", "--port", str(_free_port()), "--allow-origin", "*"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--allow-origin" in err[0], err


class _GraphLike:
    """What the warm-up reads of an engine: graph coordinates (lon, lat) to query at."""

    def __init__(self, pts):
        import numpy as np

        self.coords = np.asarray(pts, dtype=np.float64)


def test_health_is_not_ready_before_the_warm_up(fake):
    fake.graph = _GraphLike([CASINO, PORT, FONTVIEILLE])
    app = create_app(fake, warm_up=True)
    c = TestClient(app)  # without `with`: the app's startup (the warm-up) has not run
    r = c.get("/health")
    assert r.status_code == 503 and r.json()["status"] == "warming", r.text
    assert fake.calls == []
    with TestClient(app) as c:  # startup: every service once, then ready
        assert {name for name, *_ in fake.calls} == {"route", "table", "nearest"}
        r = c.get("/health")
        assert r.status_code == 200 and r.json()["status"] == "ok"
    app = create_app(FakeEngine())  # no warm-up asked for: ready at once
    assert TestClient(app).get("/health").json()["status"] == "ok"


def _free_port(host="127.0.0.1"):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _serve_stub(monkeypatch, argv, opened=None):
    """Run ``gpuroute serve`` over a fake engine, with the HTTP server replaced by a recorder."""
    import argparse
    import sys
    import types

    from gpuroute.cli import serve
    from gpuroute.server import http as server_http

    ran = {}

    class StubEngine(FakeEngine):
        @classmethod
        def open(cls, spec, **kw):
            if opened is not None:
                opened.append(spec)
            return cls()

    monkeypatch.setitem(sys.modules, "gpuroute.engine", types.SimpleNamespace(Engine=StubEngine))
    monkeypatch.setattr(server_http, "run", lambda app, sock, **kw: ran.update(app=app, sock=sock, address=sock.getsockname(), **kw) or True)
    p = argparse.ArgumentParser()
    serve.add_parser(p.add_subparsers(), argparse.ArgumentParser(add_help=False))
    args = p.parse_args(argv)
    args.verbose = 0
    assert serve.run(args) == 0
    return ran


# --------------------------------------------------------------------------------------------------
# Issue 20: the HTTP server's parsers, the GET short path, short requests on the event loop


def _raw_exchange(base, data, timeout=30):
    """Send ``data`` on a new connection and read one answer (its head and ``content-length`` bytes)."""
    host, port = base.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(data)
        out = b""
        while True:
            head, sep, body = out.partition(b"\r\n\r\n")
            if sep:
                length = next((int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                               if line.startswith(b"content-length:")), 0)
                if len(body) >= length:
                    return out
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


@pytest.mark.parametrize("http", _parsers())
def test_long_headers_are_answered_431_and_garbage_400(fake, serve_on_loopback, http):
    """A header block past the limit (the request line complete) is 431 in OSRM's JSON with either parser;
    a request that does not parse is 400 ``InvalidUrl``, JSON too."""
    base = serve_on_loopback(create_app(fake), http=http)
    big = b"GET /route/v1/driving/7.4,43.7;7.41,43.71 HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 1_200_000
    got = _raw_exchange(base, big)  # the head unfinished past the limit (1 MiB: the body limit)
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 "), got[:200]
    assert orjson.loads(body)["code"] == "TooBig"
    got = _raw_exchange(base, b"NOT HTTP AT ALL\r\n\r\n")
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), got[:200]
    assert orjson.loads(body)["code"] == "InvalidUrl"


def test_http_parser_names_are_checked(monkeypatch):
    from gpuroute import config
    from gpuroute.server import http as server_http

    assert server_http.parser("h11") == "h11"
    with pytest.raises(ValueError, match="expected one of"):
        server_http.parser("hyper")
    monkeypatch.setattr(config, "SERVE_HTTP", "h11")
    assert server_http.parser() == "h11"
    assert server_http.config(create_app(FakeEngine()), http="h11").loop == "asyncio"
    monkeypatch.setitem(sys.modules, "httptools", None)  # not installed
    assert server_http.parser("auto") == "h11"
    with pytest.raises(ValueError, match="pip install"):
        server_http.parser("httptools")


def test_serve_http_option_reaches_the_server(monkeypatch, capsys):
    ran = _serve_stub(monkeypatch, ["serve", "--port", str(_free_port()), "--http", "h11"])
    assert ran["http"] == "h11"
    ran = _serve_stub(monkeypatch, ["serve", "--port", str(_free_port())])
    assert ran["http"] is None  # config.SERVE_HTTP


def _via_router(app):
    """``app`` as Starlette's router answers every request (no short path): the reference."""
    from starlette.applications import Starlette

    async def asgi(scope, receive, send):
        await Starlette.__call__(app, scope, receive, send)

    return asgi


def _exchange(c, url):
    r = c.get(url)
    return r.status_code, list(r.headers.raw), r.content


_FAKE_URLS = [f"/route/v1/driving/{_coords(CASINO, PORT)}",
              f"/route/v1/driving/{_coords(CASINO, PORT, FONTVIEILLE)}?geometries=geojson&overview=full",
              f"/route/v1/driving/polyline({polyline.encode([(CASINO[1], CASINO[0]), (PORT[1], PORT[0])])})",
              f"/table/v1/driving/{_coords(CASINO, PORT, FONTVIEILLE)}?annotations=duration,distance&sources=0",
              f"/nearest/v1/driving/{_coords(CASINO)}?number=3&generate_hints=false",
              f"/route/v1/driving/{_coords(CASINO, PORT)}?skip_waypoints=true",
              f"/route/v1/driving/{_coords(CASINO, SEA)}",            # NoSegment
              f"/route/v1/driving/{_coords(CASINO, (0, 0))}",         # NoRoute
              f"/route/v1/driving/{_coords(CASINO, (1, 1))}",         # the engine's bug: 500 InternalError
              f"/route/v2/driving/{_coords(CASINO, PORT)}", "/route/v1/driving/", "/route/v1/dr!ving/1,2;3,4",
              f"/bogus/v1/driving/{_coords(CASINO)}", f"/trip/v1/driving/{_coords(CASINO, PORT)}",
              f"/route/v1/driving/{_coords(CASINO, PORT)}?steps=maybe", f"/route/v1/driving/{_coords(CASINO, PORT)}?x=1",
              f"/route/v1/driving/{_coords(*[CASINO] * 11)}", f"/route/v1/driving/{_coords(CASINO, PORT)}.xml",
              f"/route/v1/driving/{_coords(CASINO, (200, 0))}", f"/nearest/v1/driving/{_coords(CASINO)}?number=9",
              f"/route/v1/driving/{_coords(CASINO, PORT)}?exclude=motorway"]


def test_the_get_short_path_answers_as_the_router(fake):
    """Every GET of a service answered by the application's short path has the status, headers and bytes
    Starlette's router and the ``/{path:path}`` route give (errors included)."""
    app = create_app(fake)
    fast, ref = TestClient(app), TestClient(_via_router(app))
    for url in _FAKE_URLS:
        assert app.fast({"type": "http", "method": "GET", "path": url.split("?")[0]}) is not url.startswith("/bogus")
        assert _exchange(fast, url) == _exchange(ref, url), url
    # HEAD, OPTIONS and other paths go through the router
    assert not app.fast({"type": "http", "method": "HEAD", "path": "/route/v1/driving/1,2;3,4"})
    assert not app.fast({"type": "http", "method": "GET", "path": "/health"})
    assert fast.options("/route/v1/driving/1,2;3,4").status_code == 204


def test_the_short_path_answers_an_exception_as_starlette(fake, monkeypatch):
    """An exception outside the engine call (none is expected) is answered 500 ``Internal Server Error`` in
    plain text, as Starlette's error middleware answers it."""
    app = create_app(fake)
    ref = TestClient(_via_router(app), raise_server_exceptions=False)
    url = f"/route/v1/driving/{_coords(CASINO, PORT)}"

    def broken(scope):
        raise RuntimeError("a bug")

    monkeypatch.setattr(app.state.adapter, "target", broken)
    got = _exchange(TestClient(app), url)
    assert got[0] == 500 and got[2] == b"Internal Server Error"
    assert got == _exchange(ref, url)


class RunEngine(FakeEngine):
    """A fake with ``run(record)`` (as gpuroute's Engine): short requests may be answered on the event loop.
    Records the thread of every call; a route ending at (2, 2) waits for ``release``."""

    def __init__(self):
        super().__init__()
        self.threads = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def run(self, p):
        from gpuroute.engine.params import NearestParams, RouteParams, TableParams

        self.threads.append(threading.current_thread().name)
        kw = p.kwargs()
        coords = kw.pop("coords")
        if isinstance(p, RouteParams):
            if coords[-1] == (2.0, 2.0):
                self.entered.set()
                assert self.release.wait(10)
                coords = [*coords[:-1], PORT]
            return self.route(coords, **kw)
        if isinstance(p, TableParams):
            return self.table(coords, **kw)
        if isinstance(p, NearestParams):
            return self.nearest(coords[0], **kw)
        raise AssertionError(type(p))


_WORKER = "AnyIO worker thread"


def test_short_requests_are_answered_on_the_event_loop(monkeypatch):
    """With an engine that has ``run``: a route of up to SERVE_INLINE_ROUTE_MAX_COORDS coordinates and a
    nearest run on the event loop's thread, a longer route and a table in a worker thread; the answers are
    the same bytes either way."""
    from gpuroute import config

    monkeypatch.setattr(config, "SERVE_INLINE_ROUTE_MAX_COORDS", 2)
    eng = RunEngine()
    app = create_app(eng)
    c = TestClient(app)
    cases = [(f"/route/v1/driving/{_coords(CASINO, PORT)}", False),
             (f"/route/v1/driving/{_coords(CASINO, PORT, FONTVIEILLE)}", True),
             (f"/route/v1/driving/{_coords(CASINO, PORT)}?alternatives=true", True),
             (f"/nearest/v1/driving/{_coords(CASINO)}?number=2", False),
             (f"/table/v1/driving/{_coords(CASINO, PORT)}", True)]
    for url, threaded in cases:
        got = _exchange(c, url)
        assert got[0] == 200, got
        assert (eng.threads[-1] == _WORKER) is threaded, (url, eng.threads[-1])
        app.state.adapter.inline = False  # the same request through a worker thread: the same bytes
        assert _exchange(c, url) == got and eng.threads[-1] == _WORKER
        app.state.adapter.inline = True
    # POST takes the same rule
    c.post("/route/v1/driving", json={"coordinates": [list(CASINO), list(PORT)]})
    assert eng.threads[-1] != _WORKER
    # an engine without run (its costs unknown) always gets a worker thread
    assert not create_app(FakeEngine()).state.adapter.inline


def test_no_request_runs_on_the_loop_while_a_thread_runs_the_engine(serve_on_loopback, monkeypatch):
    """While an engine call runs in a worker thread, a short request goes to a thread too (numba's
    workqueue layer is not thread-safe); once it has ended, short requests are answered on the loop again."""
    import http.client

    from gpuroute import config

    monkeypatch.setattr(config, "SERVE_INLINE_ROUTE_MAX_COORDS", 2)

    eng = RunEngine()
    app = create_app(eng, limits={"workers": 2})
    base = serve_on_loopback(app)
    host, port = base.rsplit("/", 1)[1].split(":")
    long_status = []

    def long_request():
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", f"/route/v1/driving/{_coords(CASINO, PORT, (2, 2))}")  # 3 coordinates: a thread
        long_status.append(conn.getresponse().status)
        conn.close()

    th = threading.Thread(target=long_request)
    th.start()
    try:
        assert eng.entered.wait(10)
        assert app.state.adapter.busy == 1
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", f"/route/v1/driving/{_coords(CASINO, PORT)}")
        r = conn.getresponse()
        assert r.status == 200 and r.read()
        assert eng.threads[-1] == _WORKER  # short, but a thread was busy
    finally:
        eng.release.set()
        th.join(10)
    assert long_status == [200] and app.state.adapter.busy == 0
    conn.request("GET", f"/route/v1/driving/{_coords(CASINO, PORT)}")
    assert conn.getresponse().status == 200
    conn.close()
    assert eng.threads[-1] != _WORKER


def test_a_timed_out_thread_stays_counted_until_it_ends(monkeypatch):
    """A request past the timeout is answered 504 while its engine call runs on: it stays counted as busy
    (nothing runs on the loop beside it) until the call returns."""
    from gpuroute import config

    monkeypatch.setattr(config, "SERVE_INLINE_ROUTE_MAX_COORDS", 2)
    eng = RunEngine()
    app = create_app(eng, limits={"timeout_s": 0.2})
    c = TestClient(app)
    try:
        _error(c.get(f"/route/v1/driving/{_coords(CASINO, PORT, (2, 2))}"), "Timeout", status=504)
        assert app.state.adapter.busy == 1
    finally:
        eng.release.set()
    t0 = time.monotonic()
    while app.state.adapter.busy and time.monotonic() - t0 < 10:
        time.sleep(0.01)
    assert app.state.adapter.busy == 0


def test_the_inline_rule(monkeypatch):
    """``inline_request``: by service, size and options (``config.SERVE_INLINE_*``; 0 turns a kind off)."""
    from gpuroute import config
    from gpuroute.server.app import inline_request, parse_query

    lim = dict(DEFAULT_LIMITS)

    def call(service, n, query=""):
        pts = ";".join(f"{7.42 + 0.001 * i},{43.73 + 0.001 * i}" for i in range(n))
        return parse_request(service, "driving", pts, parse_query(query), lim)

    monkeypatch.setattr(config, "SERVE_INLINE_ROUTE_MAX_COORDS", 4)
    monkeypatch.setattr(config, "SERVE_INLINE_NEAREST_MAX_NUMBER", 10)
    monkeypatch.setattr(config, "SERVE_INLINE_TABLE_MAX_CELLS", 6)
    assert inline_request(call("route", 4)) and not inline_request(call("route", 5))
    assert inline_request(call("route", 2, "steps=true&annotations=true&overview=full"))
    assert not inline_request(call("route", 2, "alternatives=2"))
    assert not inline_request(call("route", 2, "exclude=motorway"))
    assert not inline_request(call("route", 2, "avoid_ways=1,2"))
    assert inline_request(call("nearest", 1, "number=10")) and not inline_request(call("nearest", 1, "number=11"))
    assert inline_request(call("table", 2)) and not inline_request(call("table", 3))
    assert inline_request(call("table", 3, "sources=0;1&destinations=0;1;2"))
    assert not inline_request(call("trip", 3)) and not inline_request(call("isochrone", 1, "contours_minutes=5"))
    monkeypatch.setattr(config, "SERVE_INLINE_ROUTE_MAX_COORDS", 0)
    monkeypatch.setattr(config, "SERVE_INLINE_TABLE_MAX_CELLS", 0)
    assert not inline_request(call("route", 2)) and not inline_request(call("table", 1))


def test_real_answers_are_the_same_bytes_every_way(monaco):
    """The real Monaco engine: every GET answered by the short path on the loop, by the short path in a
    worker thread and by Starlette's router in a worker thread (the path every answer took before) is the
    same status, headers and bytes."""
    app = create_app(monaco)
    fast, ref = TestClient(app), TestClient(_via_router(app))
    a, b = _coords(CASINO, PORT), _coords(CASINO, PORT, FONTVIEILLE)
    urls = [f"/route/v1/driving/{a}", f"/route/v1/driving/{a}?overview=full&geometries=geojson",
            f"/route/v1/driving/{b}?steps=true&annotations=true&overview=full",
            f"/route/v1/driving/{a}?alternatives=true", f"/route/v1/driving/{a}?generate_hints=false",
            f"/nearest/v1/driving/{_coords(CASINO)}?number=3", f"/table/v1/driving/{b}?annotations=duration,distance",
            f"/trip/v1/driving/{b}", f"/route/v1/driving/{_coords(CASINO, SEA)}", f"/route/v1/driving/{a}?bearings=1"]
    for url in urls:
        got = _exchange(fast, url)
        assert got[0] in (200, 400), got
        assert got == _exchange(ref, url), url
        app.state.adapter.inline = False
        assert got == _exchange(fast, url), url
        app.state.adapter.inline = True


def _answers(base, data, n, wait_close=0.0):
    """Send ``data`` (one or more requests) on one connection; ``n`` answers, each without its date header, and
    whether the server then closed the connection (within ``wait_close`` seconds; None: not waited for)."""
    host, port = base.rsplit("/", 1)[1].split(":")
    out, buf = [], b""
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(data)
        while len(out) < n:
            head, sep, rest = buf.partition(b"\r\n\r\n")
            if sep:
                lines = head.split(b"\r\n")
                length = next(int(x.split(b":")[1]) for x in lines if x.lower().startswith(b"content-length:"))
                if len(rest) >= length:
                    out.append(b"\r\n".join(x for x in lines if not x.lower().startswith(b"date:")) + sep
                               + rest[:length])
                    buf = rest[length:]
                    continue
            chunk = s.recv(65536)
            assert chunk, (out, buf)
            buf += chunk
        if not wait_close:
            return out, None
        s.settimeout(wait_close)
        try:
            closed = s.recv(1) == b""
        except TimeoutError:
            closed = False
    return out, closed


@pytest.mark.skipif("httptools" not in _parsers(), reason="httptools and uvloop (the serve extra) not installed")
def test_the_direct_answer_is_the_request_cycles(serve_on_loopback):
    """With httptools, a GET the application answers at once is written by the protocol (one write, no ASGI
    task): the same status line, headers and body as uvicorn's request cycle writes, keep-alive, pipelining,
    HTTP/1.0 and ``Connection: close`` alike; a request for a worker thread still takes the cycle."""
    eng = RunEngine()
    app = create_app(eng)
    answered = []
    direct = app.direct

    def counting(scope, extra=None):
        got = direct(scope, extra)
        answered.append(got is not None)
        return got

    app.direct = counting
    on = serve_on_loopback(app, http="httptools")
    off = serve_on_loopback(app, http="httptools", direct=False)
    long_route = f"/route/v1/driving/{_coords(CASINO, PORT, FONTVIEILLE, CASINO, PORT)}"  # 5: a worker thread
    for url in [*_FAKE_URLS, long_route]:
        req = f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        answered.clear()
        got = _answers(on, req, 1)
        assert got == _answers(off, req, 1), url
        threaded = url == long_route or (url.startswith("/table/") and "?" in url)  # left to the cycle
        threaded = threaded or url.startswith("/bogus/")  # not a service: the router's
        assert answered == [not threaded], url
    a, b = (f"GET /route/v1/driving/{_coords(CASINO, PORT)} HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
            f"GET /nearest/v1/driving/{_coords(CASINO)} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    for data, n in ((a + b + a, 3), (a.replace(b"HTTP/1.1", b"HTTP/1.0"), 1),
                    (a.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"), 1)):
        got = _answers(on, data, n, wait_close=0.5)
        assert got == _answers(off, data, n, wait_close=0.5)
        assert got[1] is (n == 1), got  # closed after an HTTP/1.0 or Connection: close answer only
