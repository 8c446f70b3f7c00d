"""``/isochrone/v1`` over the real Monaco engine: GET and POST answer what the engine answers, options
and errors in the server's error shape, and ``/health`` lists the service."""
from __future__ import annotations

import warnings

import pytest

pytest.importorskip("starlette")
pytest.importorskip("orjson")
pytest.importorskip("osmium")
pytest.importorskip("shapely")

with warnings.catch_warnings():  # newer Starlette asks for httpx2; httpx works the same
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.server import create_app  # noqa: E402

CASINO = (7.4282, 43.7396)
PORT = (7.4233, 43.7347)
URL = f"/isochrone/v1/driving/{CASINO[0]},{CASINO[1]}"


@pytest.fixture(scope="module")
def engine():
    return Engine.open("monaco")


@pytest.fixture(scope="module")
def client(engine):
    return TestClient(create_app(engine))


def assert_osrm_error(r, code):
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["code"] == code and isinstance(body["message"], str) and "\n" not in body["message"]


def test_get_and_post_match_the_engine(engine, client):
    r = client.get(URL + "?contours_minutes=2,5&contours_colors=ff0000,00ff00")
    assert r.status_code == 200, r.text
    got = r.json()
    want = engine.isochrone(CASINO, [120.0, 300.0], colors=["ff0000", "00ff00"])
    assert got["code"] == "Ok" and got["type"] == "FeatureCollection"
    assert [f["properties"] for f in got["features"]] == [f["properties"] for f in want["features"]]
    assert got["features"][0]["properties"] == {"contour": 300.0, "metric": "duration", "color": "#00ff00"}
    assert got["features"][0]["geometry"] == want["features"][0]["geometry"]
    post = client.post(f"/isochrone/v1/driving/{CASINO[0]},{CASINO[1]}",
                       json={"contours_minutes": [2, 5], "contours_colors": ["ff0000", "00ff00"]})
    assert post.status_code == 200 and post.json()["features"] == got["features"]
    body = client.post("/isochrone/v1/driving", json={"coordinates": [list(CASINO)], "contours_meters": 800,
                                                      "polygons": False, "generalize": 10, "denoise": 0.5})
    assert body.status_code == 200, body.text
    f = body.json()["features"][0]
    assert f["properties"]["metric"] == "distance" and f["properties"]["contour"] == 800.0
    assert f["geometry"]["type"] in ("LineString", "MultiLineString")


def test_waypoints_and_health(client):
    r = client.get(URL + "?contours_minutes=1&skip_waypoints=true")
    assert r.status_code == 200 and "waypoints" not in r.json()
    r = client.get(URL + "?contours_minutes=1&generate_hints=false")
    assert "hint" not in r.json()["waypoints"][0]
    h = client.get("/health").json()
    assert "isochrone" in h["services"] and h["limits"]["max_isochrone_contours"] >= 1


@pytest.mark.parametrize("query, code", [
    ("", "InvalidOptions"),
    ("?contours_minutes=5&contours_meters=100", "InvalidOptions"),
    ("?contours_minutes=5&foo=1", "InvalidOptions"),
    ("?contours_minutes=1,2,3,4,5", "TooBig"),
    ("?contours_minutes=121", "TooBig"),
    ("?contours_meters=100001", "TooBig"),
    ("?contours_minutes=0", "InvalidValue"),
    ("?contours_minutes=-5", "InvalidValue"),
    ("?contours_minutes=abc", "InvalidQuery"),
    ("?contours_minutes=5&polygons=maybe", "InvalidQuery"),
    ("?contours_minutes=5&denoise=1.5", "InvalidOptions"),  # as the Python API (gpuroute.engine.params)
    ("?contours_minutes=5&contours_colors=red", "InvalidOptions"),
    ("?contours_minutes=5,6&contours_colors=ff0000", "InvalidOptions"),
    ("?contours_minutes=5&exclude=motorway", "InvalidValue"),
])
def test_errors(client, query, code):
    assert_osrm_error(client.get(URL + query), code)


def test_more_errors(client):
    assert_osrm_error(client.get(f"/isochrone/v1/driving/{CASINO[0]},{CASINO[1]};{PORT[0]},{PORT[1]}?contours_minutes=5"),
           "InvalidOptions")
    assert_osrm_error(client.get("/isochrone/v1/driving/7.43,43.35?contours_minutes=5&radiuses=100"), "NoSegment")
    assert_osrm_error(client.get("/isochrone/v1/driving/7.43,95?contours_minutes=5"), "InvalidValue")
    assert_osrm_error(client.get("/isochrone/v2/driving/7.43,43.73?contours_minutes=5"), "InvalidVersion")
    assert client.get(URL + "?contours_minutes=1").status_code == 200  # still serving


def test_an_engine_without_isochrones():
    class RouteOnly:
        def route(self, coords, **kw):
            return {"code": "Ok", "routes": [], "waypoints": []}

        def table(self, coords, **kw):
            return {"code": "Ok"}

        def nearest(self, coord, **kw):
            return {"code": "Ok", "waypoints": []}

    c = TestClient(create_app(RouteOnly()))
    assert_osrm_error(c.get(URL + "?contours_minutes=5"), "InvalidService")
    assert "isochrone" not in c.get("/health").json()["services"]
