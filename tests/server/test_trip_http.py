"""``/trip/v1`` over the real Monaco engine: GET and POST answer what the engine answers (OSRM's
``trips`` and ``waypoints`` with ``trips_index``/``waypoint_index``), options reach the engine, errors in
OSRM's shape, ``/health`` lists the service. routingpy's OSRM client has no trip method (``directions``,
``matrix`` and ``isochrones`` only), so plain HTTP requests stand in for a client."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("orjson")
pytest.importorskip("osmium")
pytest.importorskip("polyline")

with warnings.catch_warnings():  # newer Starlette asks for httpx2; httpx works the same
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.server import create_app  # noqa: E402

#: Five places in Monaco: the casino, the port, the palace, the Larvotto beach, the station.
STOPS = [(7.4282, 43.7396), (7.4233, 43.7347), (7.4206, 43.7314), (7.4367, 43.7441), (7.4197, 43.7387)]


@pytest.fixture(scope="module")
def engine():
    return Engine.open("monaco")


@pytest.fixture(scope="module")
def client(engine):
    return TestClient(create_app(engine))


def _url(coords, query=""):
    path = "/trip/v1/driving/" + ";".join(f"{lon},{lat}" for lon, lat in coords)
    return path + (f"?{query}" if query else "")


def _error(r, code):
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["code"] == code and isinstance(body["message"], str) and "\n" not in body["message"]


def _order(body):
    wi = [w["waypoint_index"] for w in body["waypoints"]]
    assert sorted(wi) == list(range(len(wi))) and all(w["trips_index"] == 0 for w in body["waypoints"])
    return [int(i) for i in np.argsort(wi)]


def test_get_and_post_match_the_engine(engine, client):
    r = client.get(_url(STOPS))
    assert r.status_code == 200, r.text
    got = r.json()
    want = engine.trip(STOPS)
    assert got == want
    trip = got["trips"][0]
    assert len(trip["legs"]) == len(STOPS) and _order(got)[0] == 0
    assert trip["duration"] == pytest.approx(sum(leg["duration"] for leg in trip["legs"]), abs=0.3)
    # the legs are the table's cells of the order, and the order is the best of all orders
    m = np.array(engine.table(STOPS)["durations"])
    order = _order(got)
    cost = sum(m[a, b] for a, b in zip(order, order[1:] + order[:1], strict=True))
    assert trip["duration"] == pytest.approx(cost, abs=0.6)
    best = min(sum(m[a, b] for a, b in zip((0, *p), (*p, 0), strict=True))
               for p in itertools.permutations(range(1, 5)))
    assert cost <= best + 0.5
    post = client.post("/trip/v1/driving", json={"coordinates": [list(c) for c in STOPS]})
    assert post.status_code == 200 and post.json() == got
    form = client.post(_url(STOPS), data={"roundtrip": "true", "source": "any"})
    assert form.status_code == 200 and form.json() == got


def test_options_reach_the_engine(engine, client):
    q = ("roundtrip=false&source=first&destination=last&steps=true&geometries=geojson&overview=full"
         "&annotations=true")
    r = client.get(_url(STOPS, q))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body == engine.trip(STOPS, roundtrip=False, source="first", destination="last", steps=True,
                               geometries="geojson", overview="full", annotations=True)
    order = _order(body)
    assert order[0] == 0 and order[-1] == len(STOPS) - 1 and len(body["trips"][0]["legs"]) == len(STOPS) - 1
    assert body["trips"][0]["geometry"]["type"] == "LineString"
    assert body["trips"][0]["legs"][0]["steps"][0]["maneuver"]["type"] == "depart"
    r = client.get(_url(STOPS, "skip_waypoints=true&generate_hints=false&radiuses=" + ";".join(["500"] * 5)))
    assert r.status_code == 200 and "waypoints" not in r.json()
    r = client.get(_url(STOPS, "generate_hints=false"))
    assert all("hint" not in w for w in r.json()["waypoints"])


def test_errors(client, engine):
    _error(client.get(_url(STOPS, "roundtrip=false")), "NotImplemented")
    _error(client.get(_url(STOPS, "roundtrip=false&source=first")), "NotImplemented")
    _error(client.get(_url(STOPS, "roundtrip=false&destination=last")), "NotImplemented")
    _error(client.get(_url(STOPS, "source=middle")), "InvalidOptions")  # as engine.trip's
    _error(client.get(_url(STOPS, "roundtrip=maybe")), "InvalidQuery")
    _error(client.get(_url(STOPS, "alternatives=true")), "InvalidOptions")
    _error(client.get(_url(STOPS, "number=2")), "InvalidOptions")
    _error(client.get(_url(STOPS[:1])), "InvalidOptions")
    _error(client.get(_url(STOPS, "radiuses=5;5")), "InvalidOptions")
    small = TestClient(create_app(engine, limits={"max_locations_trip": 3}))
    _error(small.get(_url(STOPS)), "TooBig")
    assert small.get(_url(STOPS[:3])).status_code == 200


def test_health_lists_trip(client):
    h = client.get("/health").json()
    assert "trip" in h["services"] and h["limits"]["max_locations_trip"] >= 2
    assert h["engine"]["limits"]["max_locations_trip"] >= 2
