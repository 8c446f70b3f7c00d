"""``/match/v1`` over the Monaco engine: GET and POST answer what :meth:`gpuroute.engine.Engine.match`
answers (OSRM's ``matchings`` with ``confidence`` and ``tracepoints`` with ``matchings_index``,
``waypoint_index``, ``alternatives_count``), options reach the engine, errors in OSRM's shape and codes,
``skip_waypoints`` / ``generate_hints`` act on the tracepoints, ``/health`` lists the service and its limit."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("orjson")
pytest.importorskip("osmium")

with warnings.catch_warnings():  # newer Starlette asks for httpx2; httpx works the same
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from match_traces import make_trace  # noqa: E402

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.server import create_app  # noqa: E402


@pytest.fixture(scope="module")
def engine():
    return Engine.open("monaco")


@pytest.fixture(scope="module")
def client(engine):
    return TestClient(create_app(engine))


@pytest.fixture(scope="module")
def trace(engine):
    """A 10 s, sigma 5 m trace of at most 100 points (the default limit)."""
    coords, ts, _ = make_trace(engine, np.random.default_rng(3), 5.0, 10.0, min_m=800.0, max_m=3000.0,
                               max_points=100)
    return coords, ts


def _url(coords, query=""):
    return "/match/v1/driving/" + ";".join(f"{lon:.6f},{lat:.6f}" for lon, lat in coords) + (
        "?" + query if query else "")


def _six(coords):
    return [(round(x, 6), round(y, 6)) for x, y in coords]


def test_get_answers_what_the_engine_answers(client, engine, trace):
    coords, ts = trace
    q = "timestamps=" + ";".join(map(str, ts)) + "&radiuses=" + ";".join(["5"] * len(ts)) + "&steps=true"
    r = client.get(_url(coords, q))
    assert r.status_code == 200, r.text
    body = r.json()
    want = engine.match(_six(coords), timestamps=ts, radiuses=[5] * len(ts), steps=True)
    assert body["code"] == "Ok"
    assert len(body["tracepoints"]) == len(coords)
    assert len(body["matchings"]) == len(want["matchings"])
    for got, exp in zip(body["matchings"], want["matchings"], strict=True):
        assert got["distance"] == pytest.approx(exp["distance"])
        assert got["confidence"] == pytest.approx(exp["confidence"])
        assert got["legs"][0]["steps"], "steps=true reached the engine"
    for got, exp in zip(body["tracepoints"], want["tracepoints"], strict=True):
        assert (got is None) == (exp is None)
        if got is not None:
            for k in ("matchings_index", "waypoint_index", "alternatives_count", "location", "name", "hint"):
                assert got[k] == exp[k]


def test_post_json_body(client, trace):
    coords, ts = trace
    r = client.post("/match/v1/driving", json={"coordinates": [list(c) for c in _six(coords)], "timestamps": ts,
                                                "tidy": True})
    assert r.status_code == 200, r.text
    assert r.json()["code"] == "Ok"


def test_skip_waypoints_and_hints(client, trace):
    coords, ts = trace
    body = client.get(_url(coords, "skip_waypoints=true")).json()
    assert body["code"] == "Ok" and "tracepoints" not in body and body["matchings"]
    body = client.get(_url(coords, "generate_hints=false&tidy=true")).json()
    tps = body["tracepoints"]
    assert len(tps) == len(coords)
    assert all(tp is None or "hint" not in tp for tp in tps)
    assert any(tp is not None for tp in tps)


@pytest.mark.parametrize("query, code", [
    ("timestamps=0;10;5", "InvalidValue"),
    ("timestamps=0;10", "InvalidOptions"),
    ("timestamps=0;x;10", "InvalidQuery"),
    ("radiuses=5;5", "InvalidOptions"),
    ("radiuses=5;0;5", "InvalidValue"),
    ("gaps=sometimes", "InvalidOptions"),
    ("tidy=maybe", "InvalidQuery"),
    ("waypoints=0;2", "InvalidOptions"),
    ("approaches=curb;curb;curb", "InvalidOptions"),
    ("alternatives=true", "InvalidOptions"),
])
def test_bad_options(client, query, code):
    r = client.get(_url([(7.4200, 43.7380), (7.4205, 43.7382), (7.4210, 43.7385)], query))
    assert r.status_code == 400
    assert r.json()["code"] == code


def test_single_point_too_many_points_and_no_segment(client, engine):
    r = client.get(_url([(7.4200, 43.7380)]))
    assert r.status_code == 400 and r.json()["code"] == "InvalidOptions"
    n = engine.limits["max_locations_map_matching"] + 1
    r = client.get(_url([(7.42 + 1e-5 * i, 43.738) for i in range(n)]))
    assert r.status_code == 400 and r.json()["code"] == "TooBig"
    r = client.get(_url([(0.0, 0.0), (0.001, 0.0)]))
    assert r.status_code == 400 and r.json()["code"] == "NoSegment"


def test_health_lists_match_and_its_limit(client):
    h = client.get("/health").json()
    assert "match" in h["services"]
    assert h["limits"]["max_locations_map_matching"] == 100
