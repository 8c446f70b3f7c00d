"""The web page at ``/`` (:mod:`gpuroute.server.web`) in Debian's headless Chromium, driven by
playwright, against uvicorn on loopback serving a Monaco dataset directory (overlay, so traffic works):
two clicks on roads give the route leaflet-routing-machine got from ``/route/v1``, and the page shows
what the server answers for the same points; the traffic slider customizes (travel times x2 on every
road: the duration doubles) and the page shows the server's new route and customization time; the
isochrone rings drawn are the server's. Screenshots go to ``out/artefacts/web/``. Without the browser
or the fetched assets the test fails (``make test`` installs both: ``.ci/install_chromium.sh``,
``make web-assets``). Also, without a browser: ``/network`` against a brute-force segment list, its
thinning, the page when the assets are missing, and the vendor route's refusals."""
from __future__ import annotations

import os
import socket
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("osmium")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

import httpx  # noqa: E402

with warnings.catch_warnings():  # newer Starlette asks for httpx2; httpx works the same
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.pipeline import build_dataset  # noqa: E402
from gpuroute.server import create_app, web  # noqa: E402

#: Debian's Chromium (.ci/install_chromium.sh); playwright downloads no browser of its own.
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTEFACTS = Path(__file__).resolve().parents[2] / "out" / "artefacts" / "web"
#: Place du Casino and Fontvieille (lon, lat); the page is clicked where the server snaps them.
CASINO = (7.4282, 43.7396)
FONTVIEILLE = (7.4168, 43.7283)
WAIT_MS = 60000  # generous: the machine may be busy; a ready page answers in well under a second


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    d = tmp_path_factory.mktemp("web") / "monaco"
    build_dataset("monaco", d, cell_sizes=(64, 1024))
    return Engine.open(d)


@pytest.fixture(scope="module")
def base_url(engine):
    """uvicorn in a thread on a free loopback port, serving ``create_app(engine)`` with customize on."""
    import uvicorn

    app = create_app(engine, allow_customize=True)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    th = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    th.start()
    t0 = time.monotonic()
    while not server.started:
        assert th.is_alive() and time.monotonic() - t0 < 10, "uvicorn did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    th.join(10)
    sock.close()


@pytest.fixture(scope="module")
def browser():
    """Chromium through playwright; fails (never skips) when the browser, playwright or the page's
    third-party assets are missing: CI installs all three."""
    missing = web.missing_assets(web.assets_dir())
    if missing:
        pytest.fail(f"the web page's assets are missing in {web.assets_dir()} ({', '.join(missing)}): run "
                    "`make web-assets` (.ci/fetch_web.sh)")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run `bash .ci/install_chromium.sh` (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        pytest.fail(f"playwright is not installed ({e}): pip install -e '.[dev]'")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, base_url):
    """The page loaded and ready (network drawn); page errors are collected and must stay empty."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = ctx.new_page()
    pg.errors = []
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.goto(base_url + "/")
    pg.wait_for_selector("body[data-ready='1']", timeout=WAIT_MS)
    yield pg
    ctx.close()
    assert pg.errors == []


def _road_point(engine, lonlat):
    """Where the engine snaps ``lonlat``: a point on a road (lon, lat)."""
    return tuple(engine.nearest(lonlat)["waypoints"][0]["location"])


def _click(pg, lonlat):
    x, y = pg.evaluate("([lon, lat]) => { const p = gpuroute.map.latLngToContainerPoint([lat, lon]);"
                       " const r = document.getElementById('map').getBoundingClientRect();"
                       " return [p.x + r.left, p.y + r.top]; }", list(lonlat))
    pg.mouse.click(x, y)


def _shown_route(pg):
    """(distance m, duration s) the page shows."""
    return (float(pg.get_attribute("#route-distance", "data-meters")),
            float(pg.get_attribute("#route-duration", "data-seconds")))


def _wait_attr(pg, name, value):
    pg.wait_for_selector(f"body[data-{name}='{value}']", timeout=WAIT_MS)


def _set_slider(pg, value):
    pg.evaluate("(v) => { const s = document.getElementById('traffic'); s.value = v;"
                " s.dispatchEvent(new Event('input')); s.dispatchEvent(new Event('change')); }", str(value))


def assert_page_shows_server_route(pg, base_url, response_json, shown):
    """The page shows the route the server answered it, and the server answers the same again for the
    snapped points; returns the server's route."""
    got = response_json["routes"][0]
    assert response_json["code"] == "Ok"
    assert shown == (got["distance"], got["duration"])
    snapped = pg.evaluate("gpuroute.route.snapped")
    want = [w["location"] for w in response_json["waypoints"]]
    assert np.allclose(snapped, want, rtol=0, atol=1e-9)
    again = httpx.get(f"{base_url}/route/v1/driving/" + ";".join(f"{lon},{lat}" for lon, lat in snapped)
                      + "?overview=false", timeout=30).json()["routes"][0]
    # the waypoints' locations are rounded to 1e-6 degrees (~0.1 m): re-snapped, they move by that much
    assert again["distance"] == pytest.approx(got["distance"], abs=0.3)
    assert again["duration"] == pytest.approx(got["duration"], abs=0.3)
    return got


def test_route_and_traffic(page, engine, base_url):
    pg = page
    a, b = _road_point(engine, CASINO), _road_point(engine, FONTVIEILLE)
    _click(pg, a)
    with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
        _click(pg, b)
    _wait_attr(pg, "route-seq", 1)
    url = resp.value.url
    assert "steps=true" in url and "alternatives=true" in url  # leaflet-routing-machine's OSRM v1 request
    before = assert_page_shows_server_route(pg, base_url, resp.value.json(), _shown_route(pg))
    assert before["distance"] > 500  # across Monaco, not a zero route
    assert httpx.get(url, timeout=30).json()["routes"][0]["duration"] == before["duration"]
    assert pg.locator(".leaflet-routing-alt").count() >= 1  # the itinerary leaflet-routing-machine drew
    input_pts = pg.evaluate("gpuroute.route.input")
    assert np.hypot(*np.subtract(input_pts[0], a)) < 1e-3 and np.hypot(*np.subtract(input_pts[1], b)) < 1e-3
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(ARTEFACTS / "route.png"))

    # traffic: travel times x2 on every road drawn (all of Monaco): the same route, twice as long
    pg.select_option("#traffic-scope", "all")
    answers = []
    pg.on("response", lambda r: answers.append(r.json()) if r.url.endswith("/customize") else None)
    with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
        _set_slider(pg, 2)
    _wait_attr(pg, "traffic-seq", 1)
    _wait_attr(pg, "route-seq", 2)
    after = assert_page_shows_server_route(pg, base_url, resp.value.json(), _shown_route(pg))
    assert after["duration"] == pytest.approx(2 * before["duration"], abs=0.16)  # each rounded to 0.1 s
    assert after["distance"] == pytest.approx(before["distance"], abs=0.3)
    assert [x["code"] for x in answers] == ["Ok"] * len(answers) and len(answers) >= 2  # reset, then updates
    assert sum(x["arcs"] for x in answers[1:]) == engine.graph.n_arcs
    shown_s = float(pg.get_attribute("#traffic-status", "data-seconds"))
    assert shown_s == pytest.approx(sum(x["seconds"] for x in answers), rel=1e-9)
    assert "customization" in pg.inner_text("#traffic-status")
    pg.screenshot(path=str(ARTEFACTS / "traffic.png"))

    # back to x1: the server resets to the time metric and the page shows the first route again
    with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
        _set_slider(pg, 1)
    _wait_attr(pg, "route-seq", 3)
    assert _shown_route(pg) == (before["distance"], before["duration"])
    assert resp.value.json()["routes"][0]["duration"] == before["duration"]

    # x3 on the roads in a smaller view around the route: exactly the arcs whose segment's middle is in
    # the view are re-costed (counted here from /network's arrays), and the page shows the server's route
    pg.select_option("#traffic-scope", "view")
    pg.evaluate("([a, b]) => gpuroute.map.fitBounds([[a[1], a[0]], [b[1], b[0]]], {animate: false})",
                [list(a), list(b)])
    w, s_, e, n = map(float, pg.evaluate("gpuroute.map.getBounds().toBBoxString()").split(","))
    net = httpx.get(f"{base_url}/network", timeout=30).json()
    nodes = np.asarray(net["nodes"]).reshape(-1, 2)
    mid = nodes[np.asarray(net["edges"]).reshape(-1, 2)].mean(axis=1)
    inside = (mid[:, 0] >= w) & (mid[:, 0] <= e) & (mid[:, 1] >= s_) & (mid[:, 1] <= n)
    want_arcs = int((np.asarray(net["arcs"]).reshape(-1, 2)[inside] >= 0).sum())
    assert 0 < want_arcs < engine.graph.n_arcs
    answers.clear()
    with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
        _set_slider(pg, 3)
    _wait_attr(pg, "route-seq", 4)
    assert sum(x["arcs"] for x in answers) == want_arcs
    slowed = assert_page_shows_server_route(pg, base_url, resp.value.json(), _shown_route(pg))
    assert before["duration"] < slowed["duration"] < 3 * before["duration"] + 0.16


def test_isochrone_rings(page, engine, base_url):
    pg = page
    _click(pg, _road_point(engine, CASINO))
    pg.fill("#iso-minutes", "1,2,4")
    with pg.expect_response(lambda r: "/isochrone/v1/driving/" in r.url) as resp:
        pg.click("#iso-button")
    _wait_attr(pg, "iso-seq", 1)
    fc = resp.value.json()
    assert fc["code"] == "Ok" and [f["properties"]["contour"] for f in fc["features"]] == [240.0, 120.0, 60.0]
    assert httpx.get(resp.value.url, timeout=30).json()["features"] == fc["features"]
    rings = pg.locator("path.gpuroute-iso")
    assert rings.count() == len(fc["features"]) == 3
    for i in range(rings.count()):
        assert len(rings.nth(i).get_attribute("d") or "") > 20  # a drawn outline, not an empty path
    assert pg.locator("#iso-legend li").count() == 3
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(ARTEFACTS / "isochrone.png"))


# --------------------------------------------------------------------------------------------------
# Without a browser


def assert_network_is_the_graph(net, g, keep=None):
    """Every segment of ``net`` is a node pair joined by an arc of ``g``, with the arcs of its two
    directions and their travel times; ``keep`` (default: all) is the set of segments there must be."""
    coords = np.asarray(g.coords)
    nodes = np.asarray(net["nodes"]).reshape(-1, 2)
    edges = np.asarray(net["edges"]).reshape(-1, 2)
    arcs = np.asarray(net["arcs"]).reshape(-1, 2)
    costs = np.asarray(net["costs"]).reshape(-1, 2)
    tail, head = np.asarray(g.tail), np.asarray(g.head)
    tt = np.asarray(g.weight("travel_time"))
    pairs = {}
    for a in range(g.n_arcs):
        pairs.setdefault((min(tail[a], head[a]), max(tail[a], head[a])), []).append(a)
    assert net["edges_total"] == len(pairs) and net["edges_returned"] == len(edges)
    seen = set()
    for (u, v), (fwd, bwd), (cf, cb) in zip(edges, arcs, costs, strict=True):
        for a, c in ((fwd, cf), (bwd, cb)):
            if a >= 0:
                assert c == tt[a]
                assert np.allclose(nodes[[u, v]], coords[[tail[a], head[a]]] if a == fwd
                                   else coords[[head[a], tail[a]]], atol=6e-7)
        key = (min(tail[max(fwd, bwd)], head[max(fwd, bwd)]), max(tail[max(fwd, bwd)], head[max(fwd, bwd)]))
        assert sorted(x for x in (fwd, bwd) if x >= 0) == sorted(pairs[key])
        seen.add(key)
    assert seen == (set(pairs) if keep is None else keep)


def test_network_endpoint(engine):
    g = engine.graph
    with TestClient(create_app(engine, allow_customize=True)) as c:
        net = c.get("/network").json()
        assert net["code"] == "Ok" and not net["thinned"] and net["cost_unit"] == "ds"
        assert_network_is_the_graph(net, g)
        # thinned: the 500 segments of the best road classes (ties: the longest)
        k = 500
        small = c.get(f"/network?max_edges={k}").json()
        assert small["thinned"] and small["edges_returned"] == k and "500 of" in small["note"]
        rc = np.asarray(g.arc_attrs["road_class"])
        length = np.asarray(g.arc_attrs["length_m"])
        best = {}
        for a in range(g.n_arcs):
            key = (min(g.tail[a], g.head[a]), max(g.tail[a], g.head[a]))
            r, neg_len = best.get(key, (99, 0.0))
            best[key] = (min(r, int(rc[a])), min(neg_len, -float(length[a])))
        ranked = sorted(best, key=lambda s: best[s])
        assert_network_is_the_graph(small, g, keep=set(ranked[:k]))
        for bad in ("0", "x", "-3"):
            r = c.get(f"/network?max_edges={bad}")
            assert r.status_code == 400 and r.json()["code"] == "InvalidValue" and "max_edges" in r.json()["message"]
        assert c.get("/network?foo=1").status_code == 400
    with TestClient(create_app(engine)) as c:  # no customize: no arcs to update
        assert "arcs" not in c.get("/network?max_edges=10").json()


@pytest.mark.parametrize("timed", [False, True])
def test_network_thinning_without_road_classes(timed):
    """A graph without road classes keeps its fastest segments (with a travel time), else its longest."""
    from types import SimpleNamespace

    from naive import random_road_graph

    from gpuroute.geo import haversine_m

    g, _ = random_road_graph(np.random.default_rng(7), 80, two_weights=timed)
    c = np.asarray(g.coords)
    best = {}
    for a in range(g.n_arcs):
        u, v = int(g.tail[a]), int(g.head[a])
        length = float(haversine_m(c[u, 0], c[u, 1], c[v, 0], c[v, 1]))
        value = length / (float(g.weight("travel_time")[a]) * 0.1) if timed else length
        key = (min(u, v), max(u, v))
        best[key] = max(best.get(key, (0.0, 0.0)), (value, length))
    k = 25
    want = set(sorted(best, key=lambda s: best[s], reverse=True)[:k])
    net = web.network(SimpleNamespace(graph=g, overlay=None), k)
    assert net["edges_returned"] == k and net["thinned"] and ("speed" if timed else "length") in net["note"]
    assert "arcs" not in net
    nodes = np.asarray(net["nodes"]).reshape(-1, 2)
    ids = {tuple(np.round(c[i], 6)): i for i in range(g.n_nodes)}
    got = {tuple(sorted((ids[tuple(nodes[u])], ids[tuple(nodes[v])]))) for u, v in
           np.asarray(net["edges"]).reshape(-1, 2)}
    assert got == want


def test_page_without_assets(engine, tmp_path):
    with TestClient(create_app(engine, web_assets=tmp_path)) as c:
        r = c.get("/")
        assert r.status_code == 200 and "text/html" in r.headers["content-type"]
        assert "make web-assets" in r.text and "leaflet/dist/leaflet.js" in r.text and str(tmp_path) in r.text
        assert c.get("/vendor/leaflet/dist/leaflet.js").status_code == 404
        notice = c.get("/THIRD-PARTY")
        assert notice.status_code == 200 and "Leaflet 1.9.4" in notice.text and "ISC" in notice.text
        assert c.get("/web/app.js").status_code == 200 and c.get("/web/nothing.js").status_code == 404
        assert c.post("/").json()["code"] == "InvalidUrl"  # POST / is still an OSRM request


def test_vendor_serves_only_dist_and_licences(engine, tmp_path):
    (tmp_path / "leaflet" / "dist").mkdir(parents=True)
    (tmp_path / "leaflet" / "dist" / "leaflet.js").write_text("// js")
    (tmp_path / "leaflet" / "LICENSE").write_text("BSD")
    (tmp_path / "leaflet" / "package.json").write_text("{}")
    (tmp_path / "leaflet" / "src").mkdir()
    (tmp_path / "leaflet" / "src" / "Leaflet.js").write_text("no")
    (tmp_path / "secret.js").write_text("no")
    with TestClient(create_app(engine, web_assets=tmp_path)) as c:
        assert c.get("/vendor/leaflet/dist/leaflet.js").text == "// js"
        assert c.get("/vendor/leaflet/LICENSE").text == "BSD"
        for path in ("/vendor/leaflet/package.json", "/vendor/other/dist/x.js", "/vendor/leaflet/dist/../../secret.js",
                     "/vendor/leaflet/dist/%2e%2e/%2e%2e/secret.js", "/vendor/leaflet/dist/missing.js",
                     "/vendor/leaflet/dist/%2e%2e/src/Leaflet.js"):
            r = c.get(path)  # the client folds a literal '..' (then the OSRM route answers 400)
            assert r.status_code in (400, 404) and "no" != r.text, path
        assert "Leaflet 1.9.4" in c.get("/THIRD-PARTY").text and "BSD" in c.get("/THIRD-PARTY").text


def test_vendor_404_when_the_assets_are_installed(engine, tmp_path):
    """With every asset in place, a missing vendor file is just not found: no advice to fetch the assets."""
    for name, (_, needed, licence) in web.VENDOR.items():
        for f in (*needed, licence):
            (tmp_path / name / f).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / f).write_text("x")
    assert web.missing_assets(tmp_path) == []
    with TestClient(create_app(engine, web_assets=tmp_path)) as c:
        r = c.get("/vendor/leaflet/dist/missing.js")
        assert r.status_code == 404 and "make web-assets" not in r.text and "missing.js" in r.text, r.text
        r = c.get("/vendor/leaflet/package.json")
        assert r.status_code == 404 and "make web-assets" not in r.text, r.text
    with TestClient(create_app(engine, web_assets=tmp_path / "none")) as c:  # not installed: say how
        assert "make web-assets" in c.get("/vendor/leaflet/dist/leaflet.js").text


def test_network_max_edges_takes_ascii_digits_only(engine):
    with TestClient(create_app(engine)) as c:
        assert c.get("/network?max_edges=5").status_code == 200
        for bad in ("%D9%A5", "%EF%BC%95", "5.0", "-5"):  # Arabic-Indic and fullwidth 5: int() reads them
            r = c.get(f"/network?max_edges={bad}")
            assert r.status_code == 400 and r.json()["code"] == "InvalidValue", (bad, r.text)
