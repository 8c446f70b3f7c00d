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
from phantoms import point  # noqa: E402
from turn_oracle import phantom_cost, route_arcs  # noqa: E402

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.engine.dataset import drop_traffic  # noqa: E402
from gpuroute.pipeline import build_dataset  # noqa: E402
from gpuroute.server import create_app  # noqa: E402


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds") / "monaco"
    build_dataset("monaco", d, cell_sizes=(64, 1024))
    return d


@pytest.fixture(autouse=True)
def _built_metric(request):
    """Each test starts from the built metric: an engine opened from the directory saves its
    customizations there (DIR/traffic.npz) and the next one would restore them."""
    if "dataset" in request.fixturenames:
        drop_traffic(request.getfixturevalue("dataset"))


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
    for svc in ("route", "table", "trip", "isochrone"):  # every service follows /customize, turns included
        assert caps[svc]["traffic_aware"] is True and caps[svc]["turn_aware"] is True, svc
    assert caps["nearest"]["algorithm"] == "segment index"
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
        sp = [point(e.segments.snap(*p)) for p in pts]
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
                       "to": int(e.graph.node_ids[e.graph.head[0]]), "speed_kmh": -1}]}, "InvalidValue", "updates[0]"),
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
    sp = [point(e.segments.snap(*p)) for p in pts]
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


# --------------------------------------------------------------------------------------------------
# Cross-site writes (issue 18, 1): a foreign page must not change the server's traffic


EVIL = "http://evil.example"


def _state(e, client, pts):
    """What a write could change: the overlay's costs and metric name, and a route's answer."""
    return (np.asarray(e.overlay.arc_cost).copy(), e.overlay.metric.name, client.get(_url(pts)).json())


def _same_state(a, b):
    assert np.array_equal(a[0], b[0]) and a[1] == b[1] and a[2] == b[2]


def test_cross_site_writes_are_refused(served):
    e, client = served
    pts = _pts(e, 20, 7000)
    before = _state(e, client, pts)
    arcs = route_arcs(e, before[2]["routes"][0])
    slow = orjson_bytes({"updates": [{"arc": int(a), "cost": 100000} for a in arcs]})
    for ctype in ("text/plain", "application/json", "application/x-www-form-urlencoded"):
        r = client.post("/customize", content=slow, headers={"content-type": ctype, "origin": EVIL})
        assert r.status_code == 403, (ctype, r.text)
        assert r.json()["code"] == "Forbidden" and EVIL in r.json()["message"]
        assert "access-control-allow-origin" not in r.headers
    # a metric switch is a write too
    r = client.post("/customize", json={"metric": "distance"}, headers={"origin": EVIL})
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
    # "null" is the origin of sandboxed frames and file:// pages: foreign as well
    r = client.post("/customize", json={"metric": "distance"}, headers={"origin": "null"})
    assert r.status_code == 403
    # a same-site page on another port is another origin
    r = client.post("/customize", json={"metric": "distance"}, headers={"origin": "http://testserver:8080"})
    assert r.status_code == 403
    _same_state(before, _state(e, client, pts))


def test_writes_need_json(served):
    """Without a browser's Origin (curl, scripts) a write still has to say it is JSON: a text/plain or
    form body is what a page can send without a preflight."""
    e, client = served
    pts = _pts(e, 20, 7000)
    before = _state(e, client, pts)
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = {} if ctype is None else {"content-type": ctype}
        r = client.post("/customize", content=b'{"metric": "distance"}', headers=headers)
        assert r.status_code == 415, (ctype, r.text)
        body = r.json()
        assert body["code"] == "UnsupportedMediaType" and "application/json" in body["message"]
        assert "access-control-allow-origin" not in r.headers
    _same_state(before, _state(e, client, pts))


def test_same_origin_writes_work(served):
    e, client = served
    pts = _pts(e, 20, 7000)
    for origin in ("http://testserver", "http://testserver:80", "HTTP://TestServer"):
        r = client.post("/customize", json={"metric": "distance"}, headers={"origin": origin})
        assert r.status_code == 200, (origin, r.text)
        assert r.headers.get("access-control-allow-origin") != "*"
        assert e.overlay.metric.name == "distance"
        r = client.post("/customize", content=b'{"metric": "time"}',
                        headers={"origin": origin, "content-type": "application/json; charset=utf-8"})
        assert r.status_code == 200 and e.overlay.metric.name == "time"
    assert client.get(_url(pts)).status_code == 200


def test_write_preflight(served):
    e, client = served
    pre = {"access-control-request-method": "POST", "access-control-request-headers": "content-type"}
    r = client.options("/customize", headers={"origin": EVIL, **pre})
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
    r = client.options("/customize", headers={"origin": "http://testserver", **pre})
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == "http://testserver"
    assert "POST" in r.headers["access-control-allow-methods"]
    assert "content-type" in r.headers["access-control-allow-headers"].lower()
    # reads stay open to every origin, as OSRM's
    r = client.options("/route/v1/driving/7.42,43.73;7.41,43.72", headers={"origin": EVIL, **pre})
    assert r.status_code == 204 and r.headers["access-control-allow-origin"] == "*"
    pts = _pts(e, 20, 7000)
    r = client.get(_url(pts), headers={"origin": EVIL})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"


def test_allowed_origins(dataset):
    e = Engine.open(dataset)
    app = create_app(e, allow_customize=True, allow_origins=["https://map.example", "http://10.0.0.5:8000/"])
    with TestClient(app) as client:
        for origin in ("https://map.example", "http://10.0.0.5:8000"):
            r = client.post("/customize", json={"metric": "distance"}, headers={"origin": origin})
            assert r.status_code == 200, r.text
            assert r.headers["access-control-allow-origin"] == origin and "Origin" in r.headers["vary"]
            r = client.options("/customize", headers={"origin": origin, "access-control-request-method": "POST"})
            assert r.status_code == 204 and r.headers["access-control-allow-origin"] == origin
        r = client.post("/customize", json={"metric": "time"}, headers={"origin": "http://map.example"})
        assert r.status_code == 403 and e.overlay.metric.name == "distance"  # the scheme is part of the origin
    for bad in (["*"], ["map.example"], ["https://map.example/path"], ["ftp://map.example"]):
        with pytest.raises(ValueError, match="origin"):
            create_app(e, allow_customize=True, allow_origins=bad)


def test_dns_rebinding_is_refused(dataset):
    """A page of evil.example whose name was re-pointed at 127.0.0.1 is same-origin with itself: on a
    server bound to loopback, a write must come under a loopback Host (or an allowed origin)."""
    from gpuroute.server.app import _write_refusal

    class Req:
        def __init__(self, host, origin, server=("127.0.0.1", 5000)):
            self.headers = {"host": host, "origin": origin, "content-type": "application/json"}
            self.scope = {"scheme": "http", "server": server}

    assert _write_refusal(Req("evil.example:5000", "http://evil.example:5000"), ()) is not None
    assert _write_refusal(Req("127.0.0.1:5000", "http://127.0.0.1:5000"), ()) is None
    assert _write_refusal(Req("localhost:5000", "http://localhost:5000"), ()) is None
    assert _write_refusal(Req("[::1]:5000", "http://[::1]:5000", ("::1", 5000)), ()) is None
    assert _write_refusal(Req("evil.example:5000", "http://evil.example:5000"), ("http://evil.example:5000",)) is None
    # not bound to loopback: the Host is whatever name the network gives the server
    assert _write_refusal(Req("router.lan:5000", "http://router.lan:5000", ("192.168.1.2", 5000)), ()) is None


def orjson_bytes(obj):
    import orjson

    return orjson.dumps(obj)


# --------------------------------------------------------------------------------------------------
# Out-of-range numbers (issue 18, 2): 400 naming the field and the value, never 500


def test_huge_numbers_are_400_naming_field_and_value(served):
    e, client = served
    pts = _pts(e, 20, 7000)
    before = _state(e, client, pts)
    g = e.graph
    ids = np.asarray(g.node_ids)
    a = int(np.flatnonzero(np.asarray(g.arc_attrs["length_m"]) > 20)[0])
    f, t = int(ids[g.tail[a]]), int(ids[g.head[a]])
    cases = [({"updates": [{"arc": 10, "cost": 1e30}]}, "cost", "1e+30"),
             ({"updates": [{"arc": 10, "cost": 1e308}]}, "cost", "1e+308"),
             ({"updates": [{"arc": 10, "cost": 2 ** 70}]}, "cost", "e+21"),  # past 64 bits: read as a float
             ({"updates": [{"arc": 10, "cost": 5}, {"arc": 11, "cost": 3e9}]}, "updates[1]", "3000000000"),
             ({"updates": [{"from": f, "to": t, "speed_kmh": 1e-300}]}, "speed_kmh", "1e-300"),
             ({"updates": [{"arc": 2 ** 80, "cost": 5}]}, "arc", "e+24"),
             ({"updates": [{"from": 2 ** 80, "to": t, "speed_kmh": 30}]}, "from", "e+24")]
    for body, field, value in cases:
        r = client.post("/customize", content=orjson_dumps_big(body), headers={"content-type": "application/json"})
        assert r.status_code == 400, (body, r.text)
        msg = r.json()["message"]
        assert r.json()["code"] == "InvalidValue" and field in msg and value in msg, (body, msg)
    for raw, value in ((b'{"updates": [{"arc": 10, "cost": NaN}]}', "NaN"),
                       (b'{"updates": [{"arc": 10, "cost": 1e400}]}', "1e400"),
                       (b'{"updates": [{"arc": 10, "cost": -Infinity}]}', "-Infinity"),
                       (b'{"updates": [{"arc": 10, "cost": Infinity}]}', "Infinity")):
        r = client.post("/customize", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400, (raw, r.text)
        msg = r.json()["message"]
        assert value in msg and "updates[0].cost" in msg and "JSON object" not in msg, (raw, msg)
    _same_state(before, _state(e, client, pts))


def orjson_dumps_big(obj):
    """JSON bytes, integers past 64 bits included (orjson refuses them)."""
    import json

    return json.dumps(obj).encode()


# --------------------------------------------------------------------------------------------------
# /health is truthful about /customize (issue 18, minor)


def test_health_customize_is_truthful(dataset):
    e = Engine.open(dataset)
    plain = Engine(e.graph, e.ch)  # no overlay: /customize answers NotImplemented
    with TestClient(create_app(plain, allow_customize=True)) as client:
        assert client.post("/customize", json={"metric": "time"}).json()["code"] == "NotImplemented"
        assert client.get("/health").json()["customize"] is False
    with TestClient(create_app(e, allow_customize=True)) as client:
        assert client.get("/health").json()["customize"] is True


# --------------------------------------------------------------------------------------------------
# No compilation on the request path (issue 18, 10)

_COUNT_COMPILES = r'''
import collections, hashlib, json, sys, warnings
import numba.core.dispatcher as nd

compiled = collections.Counter()
_orig = nd.Dispatcher._compile_for_args


def _counting(self, *args, **kws):  # every first call of a signature: a compilation or a cache load
    compiled[f"{self.py_func.__module__}.{self.py_func.__qualname__}"] += 1
    return _orig(self, *args, **kws)


nd.Dispatcher._compile_for_args = _counting
import numpy as np
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient
from gpuroute.engine import Engine
from gpuroute.server import create_app

e = Engine.open(sys.argv[1])
g = e.graph
want = json.loads(sys.argv[2])  # the dataset's costs and a route, from the test's own process
compiled.clear()
app = create_app(e, allow_customize=True, warm_up=True)
out = {}
with TestClient(app) as c:  # the app's startup warms every service up
    out["health"] = c.get("/health").json()["status"]
    out["warm"] = sum(compiled.values())
    compiled.clear()
    xy = [f"{g.coords[i, 0]:.6f},{g.coords[i, 1]:.6f}" for i in (3, 4000, 9000, 11000)]
    ten = ";".join(f"{g.coords[i, 0]:.6f},{g.coords[i, 1]:.6f}" for i in range(100, 15000, 1490))
    cost = int(e.overlay.arc_cost[7])
    requests = [
        ("GET", f"/route/v1/driving/{xy[0]};{xy[1]}"),
        ("GET", f"/route/v1/driving/{xy[1]};{xy[2]};{xy[3]}?steps=true&annotations=true&overview=full"
                "&geometries=polyline6&continue_straight=true"),
        ("GET", f"/table/v1/driving/{';'.join(xy)}"),
        ("GET", f"/table/v1/driving/{';'.join(xy)}?annotations=duration,distance&sources=0;1"),
        ("GET", f"/nearest/v1/driving/{xy[2]}?number=3"),
        ("GET", f"/trip/v1/driving/{';'.join(xy)}"),
        ("GET", f"/trip/v1/driving/{ten}"),  # past 7 stops the tour search perturbs
        ("GET", f"/trip/v1/driving/{';'.join(xy)}?roundtrip=false&source=first&destination=last&steps=true"),
        ("GET", f"/isochrone/v1/driving/{xy[1]}?contours_minutes=1,3"),
        ("GET", f"/isochrone/v1/driving/{xy[2]}?contours_minutes=20"),
        ("GET", f"/isochrone/v1/driving/{xy[3]}?contours_meters=400,900&polygons=false"),
        ("GET", f"/route/v1/driving/{xy[2]};{xy[3]}?alternatives=2&overview=full"),
        ("GET", f"/match/v1/driving/{xy[3]};{xy[2]}?timestamps=0;60&radiuses=40;40"),
        # a long trace: past config.SERVE_MATCH_PARALLEL_JOBS transition searches (the parallel kernel)
        ("GET", f"/match/v1/driving/{';'.join([xy[1]] * 30)}?timestamps={';'.join(str(5 * i) for i in range(30))}"
                f"&radiuses={';'.join(['45'] * 30)}"),
        ("GET", want["url"]),  # (answered after the warm-up's customization: compared below)
        ("POST", {"updates": [{"arc": 7, "cost": 3 * cost}]}),
        ("POST", {"metric": "distance"}),
        ("POST", {"metric": "time"}),
    ]
    out["unchanged"] = {"cost": hashlib.sha1(np.asarray(e.overlay.arc_cost, dtype=np.int64).tobytes()).hexdigest(),
                        "metric": e.overlay.metric.name}
    per = {}
    for method, what in requests:
        r = c.get(what) if method == "GET" else c.post("/customize", json=what)
        assert r.status_code == 200, (what, r.text)
        if what == want["url"]:
            out["unchanged"]["route"] = r.json()["routes"][0]
        per[str(what)] = sorted(compiled)
        compiled.clear()
    out["per_request"] = per
print(json.dumps(out))
'''


def test_no_compilation_on_the_request_path(dataset, tmp_path):
    """In a fresh interpreter (nothing compiled yet), the app's startup warms every service: the first
    request of each service then compiles (or loads from numba's cache) no function at all; the warm-up's
    customization changed nothing."""
    import hashlib
    import json
    import subprocess
    import sys

    e = Engine.open(dataset)
    pts = _pts(e, 20, 7000)
    want = {"url": _url(pts), "metric": e.overlay.metric.name,
            "cost": hashlib.sha1(np.asarray(e.overlay.arc_cost, dtype=np.int64).tobytes()).hexdigest()}
    with TestClient(create_app(e)) as client:
        route = client.get(want["url"]).json()["routes"][0]
    script = tmp_path / "count_compiles.py"
    script.write_text(_COUNT_COMPILES)
    p = subprocess.run([sys.executable, str(script), str(dataset), json.dumps(want)], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["health"] == "ok"
    assert out["warm"] > 0  # the counting works: the warm-up compiled (or loaded) the services' functions
    # the warm-up's customization changed nothing: costs, metric name, a route's answer
    assert out["unchanged"] == {"cost": want["cost"], "metric": want["metric"], "route": route}
    late = {req: names for req, names in out["per_request"].items() if names}
    assert not late, late
