"""``POST /customize`` and the capability table of ``/health`` over HTTP (Starlette's TestClient) on a
Monaco dataset directory: traffic changes routes as the turn-aware oracle says, bad updates answer 400
and change nothing, a metric switch works, and the refused cases (switched off, no overlay, bad
bodies)."""
from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

pytest.importorskip("osmium")
pytest.importorskip("starlette")
pytest.importorskip("orjson")
pytest.importorskip("httpx")

with warnings.catch_warnings():  # starlette's note about httpx2
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient
from turn_oracle import phantom_cost, route_arcs  # noqa: E402

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.engine.dataset import build_dataset  # noqa: E402
from gpuroute.server import create_app  # noqa: E402


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds") / "monaco"
    build_dataset("monaco", d, cell_sizes=(64, 1024))
    return d


@pytest.fixture
def served(dataset):
    """A fresh engine on the dataset (customizations do not leak between tests) and its client."""
    e = Engine.open(dataset)
    with TestClient(create_app(e, allow_customize=True)) as client:
        yield e, client


def _url(pts):
    return "/route/v1/driving/" + ";".join(f"{lon:.7f},{lat:.7f}" for lon, lat in pts) + \
        "?annotations=nodes&overview=false"


def _route(client, pts):
    r = client.get(_url(pts))
    assert r.status_code == 200, r.text
    return r.json()["routes"][0]


def _pts(e, i, j):
    c = e.graph.coords
    return [(float(c[i, 0]), float(c[i, 1])), (float(c[j, 0]), float(c[j, 1]))]


def test_health_capabilities(served):
    e, client = served
    h = client.get("/health").json()
    caps = {c["service"]: c for c in h["capabilities"]}
    assert caps["route"]["algorithm"] == "crp" and caps["route"]["traffic_aware"] is True
    assert caps["table"]["traffic_aware"] is False and caps["nearest"]["algorithm"] == "segment index"
    assert h["customize"] is True and h["engine"]["metric"] == "time"


def test_doubled_costs_reroute_as_oracle_says(served):
    e, client = served
    ov = e.overlay
    rng = np.random.default_rng(5)
    changed = 0
    for i, j in rng.integers(0, e.graph.n_nodes, (5, 2)):
        pts = _pts(e, i, j)
        before = _route(client, pts)
        arcs = route_arcs(e, before)
        if len(arcs) < 4:
            continue
        cost = np.asarray(ov.arc_cost)
        r = client.post("/customize", json={"updates": [{"arc": int(a), "cost": int(2 * cost[a])} for a in arcs]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["code"] == "Ok" and body["seconds"] >= 0 and len(body["cells"]) == 2 and body["arcs"] >= 1
        after = _route(client, pts)
        sp = [e.segments.snap(*p) for p in pts]
        assert after["weight"] == pytest.approx(phantom_cost(ov, sp[0], sp[1]) * 0.1, abs=0.051)
        if route_arcs(e, after) != arcs:
            changed += 1
            assert after["weight"] < 2 * before["weight"]  # the detour beats the doubled old route
        assert client.post("/customize", json={"metric": "time"}).status_code == 200
        assert _route(client, pts)["weight"] == before["weight"]
    assert changed >= 1


def test_speed_updates(served):
    e, client = served
    g = e.graph
    ids = np.asarray(g.node_ids)
    length = np.asarray(g.arc_attrs["length_m"])
    a = int(np.flatnonzero(length > 20)[0])
    r = client.post("/customize", json={"updates": [{"from": int(ids[g.tail[a]]), "to": int(ids[g.head[a]]),
                                                     "speed_kmh": 18}]})
    assert r.status_code == 200, r.text
    assert e.overlay.arc_cost[a] == max(1, round(float(length[a]) / 5.0 * 10))  # 18 km/h = 5 m/s, in ds


def test_bad_updates_400_and_nothing_changes(served):
    e, client = served
    pts = _pts(e, 20, 7000)
    before = client.get(_url(pts)).json()
    met = e.overlay.metric
    m = e.graph.n_arcs
    cases = [
        ({"updates": [{"arc": 0, "cost": 7}, {"arc": m, "cost": 7}]}, "InvalidValue", "updates[1]"),
        ({"updates": [{"arc": 0, "cost": 7}, {"arc": 1, "cost": -3}]}, "InvalidValue", "updates[1]"),
        ({"updates": [{"arc": 0, "cost": 0}]}, "InvalidValue", "updates[0]"),
        ({"updates": [{"arc": 0, "cost": "fast"}]}, "InvalidValue", "updates[0]"),
        ({"updates": [{"arc": 0, "cost": 7}, {"from": 1, "to": 2, "speed_kmh": 40}]}, "InvalidValue", "updates[1]"),
        ({"updates": [{"from": int(e.graph.node_ids[e.graph.tail[0]]),
                       "to": int(e.graph.node_ids[e.graph.head[0]]), "speed_kmh": 0}]}, "InvalidValue", "updates[0]"),
        ({"updates": []}, "InvalidOptions", "updates"),
        ({"metric": "fastest"}, "InvalidValue", "metric"),
        ({"metric": "time", "updates": [{"arc": 0, "cost": 1}]}, "InvalidOptions", "either"),
        ({"metric": "time", "file": "/etc/passwd"}, "InvalidOptions", "file"),
        ({}, "InvalidOptions", "either"),
    ]
    for body, code, where in cases:
        r = client.post("/customize", json=body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["code"] == code and where in r.json()["message"], (body, r.json())
    for raw in (b"[1, 2]", b"not json", b"", b'{"updates": [{"arc": 0, "cost": NaN}]}'):
        r = client.post("/customize", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["code"] == "InvalidQuery", raw
    r = client.post("/customize", content=b"x" * (2 << 20), headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "TooBig"
    assert e.overlay.metric is met
    assert client.get(_url(pts)).json() == before


def test_metric_switch(served):
    e, client = served
    pts = _pts(e, 300, 11000)
    t = _route(client, pts)
    r = client.post("/customize", json={"metric": "distance"})
    assert r.status_code == 200 and r.json()["cells"] == [int(x) for x in e.overlay.n_cells]
    d = _route(client, pts)
    assert d["weight_name"] == "distance" and d["distance"] <= t["distance"] + 0.5
    sp = [e.segments.snap(*p) for p in pts]
    assert d["weight"] == pytest.approx(phantom_cost(e.overlay, sp[0], sp[1]), abs=0.51)
    assert client.post("/customize", json={"metric": "time"}).status_code == 200
    assert _route(client, pts)["weight"] == t["weight"]


def test_concurrent_routes_during_customize(served):
    """Routes running while metrics are swapped see one metric or the other: their weight is always one
    of the two answers."""
    e, client = served
    pts = _pts(e, 40, 9000)
    w_time = _route(client, pts)["weight"]
    arcs = route_arcs(e, _route(client, pts))
    cost = np.asarray(e.overlay.arc_cost)
    slow = {"updates": [{"arc": int(a), "cost": int(3 * cost[a])} for a in arcs]}
    client.post("/customize", json=slow)
    w_slow = _route(client, pts)["weight"]
    client.post("/customize", json={"metric": "time"})
    assert w_slow > w_time
    seen, errors = [], []

    def worker():
        try:
            for _ in range(15):
                seen.append(e.route(pts, overview="false")["routes"][0]["weight"])
        except Exception as ex:  # pragma: no cover - reported below
            errors.append(ex)

    th = [threading.Thread(target=worker) for _ in range(3)]
    for t in th:
        t.start()
    for k in range(10):
        body = slow if k % 2 == 0 else {"metric": "time"}
        assert client.post("/customize", json=body).status_code == 200
    for t in th:
        t.join()
    assert not errors and set(seen) <= {w_time, w_slow}


def test_refused(dataset):
    e = Engine.open(dataset)
    with TestClient(create_app(e)) as client:  # off unless asked for
        r = client.post("/customize", json={"metric": "time"})
        assert r.status_code == 403 and r.json()["code"] == "Forbidden"
        assert client.get("/health").json()["customize"] is False
        assert client.get("/customize").status_code in (400, 405)  # POST only (a GET is no OSRM URL)
    plain = Engine(e.graph, e.ch)  # no overlay
    with TestClient(create_app(plain, allow_customize=True)) as client:
        r = client.post("/customize", json={"updates": [{"arc": 0, "cost": 5}]})
        assert r.status_code == 400 and r.json()["code"] == "NotImplemented"
        assert "gpuroute build" in r.json()["message"]
        caps = {c["service"]: c for c in client.get("/health").json()["capabilities"]}
        assert caps["route"]["algorithm"] == "ch" and caps["route"]["traffic_aware"] is False
