"""The web page at ``/`` (:mod:`gpuroute.server.web`) in Debian's headless Chromium, driven by
playwright, against uvicorn on loopback serving a Monaco dataset directory (overlay, so traffic works):
two clicks on roads give the route leaflet-routing-machine got from ``/route/v1``, and the page shows
what the server answers for the same points; the traffic slider customizes (travel times x2 on every
road: the duration doubles) and the page shows the server's new route and customization time; the
isochrone rings drawn are the server's; an area drawn with leaflet-geoman (mouse clicks) goes out as
``avoid_polygons`` and the route drawn then stays out of it (shapely); the departure slider sends
``depart_at`` when the server has a time profile (and is hidden otherwise); the page draws one line per
route of the server's answer and a click selects an alternative; another site cannot frame the page.
Screenshots go to ``out/artefacts/web/``. Without the browser or the fetched assets the test fails
(``make test`` installs both: ``.ci/install_chromium.sh``, ``make web-assets``). Also, without a
browser: ``/network`` against a brute-force segment list, its thinning, the page when the assets are
missing, and the vendor route's refusals."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
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
def dataset(tmp_path_factory):
    """The Monaco dataset directory, and an untouched copy of it (a served engine saves its traffic in
    its directory, and an engine opened later there restores it)."""
    d = tmp_path_factory.mktemp("web") / "monaco"
    build_dataset("monaco", d, cell_sizes=(64, 1024))
    shutil.copytree(d, d.parent / "monaco-copy")
    return d


@pytest.fixture(scope="module")
def engine(dataset):
    return Engine.open(dataset)


@contextlib.contextmanager
def _serving(app):
    """uvicorn in a thread on a free loopback port serving ``app``; yields its base URL."""
    import uvicorn

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
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        th.join(10)
        sock.close()


@pytest.fixture(scope="module")
def base_url(engine):
    """The server of ``create_app(engine)`` with customize on (no time profile)."""
    with _serving(create_app(engine, allow_customize=True)) as url:
        yield url


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


@contextlib.contextmanager
def _open_page(browser, url):
    """The page at ``url`` loaded and ready (network drawn); page errors and console errors (a script or
    a style the page's Content-Security-Policy refused among them) are collected and must stay empty,
    but for the failed route requests a test provokes."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = ctx.new_page()
    pg.errors = []
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" and
          "/route/v1/" not in ((m.location or {}).get("url") or "") + m.text else None)
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready='1']", timeout=WAIT_MS)
    try:
        yield pg
    finally:
        ctx.close()
    assert pg.errors == []


@pytest.fixture
def page(browser, base_url):
    with _open_page(browser, base_url) as pg:
        yield pg


def _road_point(engine, lonlat):
    """Where the engine snaps ``lonlat``: a point on a road (lon, lat)."""
    return tuple(engine.nearest(lonlat)["waypoints"][0]["location"])


def _xy(pg, lonlat):
    """The page (viewport) pixel of ``lonlat`` on the map."""
    return pg.evaluate("([lon, lat]) => { const p = gpuroute.map.latLngToContainerPoint([lat, lon]);"
                       " const r = document.getElementById('map').getBoundingClientRect();"
                       " return [p.x + r.left, p.y + r.top]; }", list(lonlat))


def _click(pg, lonlat):
    pg.mouse.click(*_xy(pg, lonlat))


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
    assert "steps=true" in url  # leaflet-routing-machine's OSRM v1 request, with the page's alternatives
    most = httpx.get(f"{base_url}/health", timeout=30).json()["limits"]["max_alternatives"]
    n_alt = min(2, most)
    assert f"&alternatives={ {0: 'false', 1: 'true'}.get(n_alt, n_alt)}&" in url
    assert "avoid_polygons" not in url and "depart_at" not in url  # nothing drawn; no time profile
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


def _route_to(pg, engine, a, b):
    """Click ``a`` then ``b`` (lon/lat); the route request's response once the page shows its route."""
    _click(pg, _road_point(engine, a))
    with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
        _click(pg, _road_point(engine, b))
    _wait_attr(pg, "route-seq", 1)
    return resp.value


def _query(url):
    from urllib.parse import parse_qs, urlsplit

    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}


def _square_on_route(coords, half_m):
    """A square (lon/lat corners, counter-clockwise) of side ``2 half_m`` metres centred on the point
    halfway along the polyline ``coords`` (lon/lat (k, 2))."""
    from shapely.geometry import LineString

    c = np.asarray(coords)
    mid = LineString(c).interpolate(0.5, normalized=True)
    dlat = half_m / 111_195.0
    dlon = dlat / np.cos(np.radians(mid.y))
    return [(mid.x - dlon, mid.y - dlat), (mid.x + dlon, mid.y - dlat), (mid.x + dlon, mid.y + dlat),
            (mid.x - dlon, mid.y + dlat)]


def _draw_polygon(pg, corners, start):
    """Draw the polygon ``corners`` (lon/lat) by mouse: ``start`` (a selector) enables geoman's polygon
    tool, a click per corner, then the first corner again closes it; the map is first zoomed onto it so
    that the corners lie many pixels apart, clear of the toolbars (top left) and of the itinerary (top
    right: a click there zooms onto a step). Returns the route request's response."""
    _fit(pg, corners)
    pg.click(start)
    for x in corners:
        _click(pg, x)
    with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
        _click(pg, corners[0])
    return resp.value


def _fit(pg, corners):
    c = np.asarray(corners)
    pg.evaluate("(b) => gpuroute.map.fitBounds(b, {animate: false, paddingTopLeft: [80, 380],"
                " paddingBottomRight: [360, 40]})", [[c[:, 1].min(), c[:, 0].min()], [c[:, 1].max(), c[:, 0].max()]])


def test_avoid_area_drawn_on_the_route(page, engine, base_url):
    """An area drawn with leaflet-geoman's polygon tool (mouse clicks) across the route: the next route
    request carries it as avoid_polygons, the route drawn does not touch it (shapely), the server
    answers that same route for that URL; removing the area routes as before."""
    from shapely.geometry import LineString, Polygon, shape

    pg = page
    first = _route_to(pg, engine, CASINO, FONTVIEILLE).json()["routes"][0]
    route0 = pg.evaluate("gpuroute.route")
    line0 = LineString(route0["coordinates"])
    corners = _square_on_route(route0["coordinates"], 60.0)
    assert line0.intersects(Polygon(corners))  # the area is across the first route
    assert not Polygon(corners).buffer(1e-4).contains(LineString(route0["snapped"]))  # not at its ends
    resp = _draw_polygon(pg, corners, ".leaflet-pm-icon-polygon")  # geoman's toolbar: draw a polygon
    _wait_attr(pg, "route-seq", 2)
    _wait_attr(pg, "avoid-seq", 1)
    assert pg.locator("path.gpuroute-avoid").count() == 1
    sent = shape(json.loads(_query(resp.url)["avoid_polygons"]))
    assert sent.geom_type == "Polygon" and sent.is_valid and len(sent.exterior.coords) == 5
    drawn = Polygon(corners)
    # clicked at whole pixels: the corners are where they were clicked within a pixel (< 1 m here)
    assert sent.symmetric_difference(drawn).area < 0.05 * drawn.area
    answer = resp.json()
    assert answer["code"] == "Ok"
    route1 = pg.evaluate("gpuroute.route")
    assert route1["url"] == resp.url
    line1 = LineString(route1["coordinates"])
    assert not line1.intersects(sent), "the route drawn enters the avoided area"
    shown = _shown_route(pg)
    assert shown == (answer["routes"][0]["distance"], answer["routes"][0]["duration"])
    assert answer["routes"][0]["duration"] > first["duration"]  # the first route was the fastest
    again = httpx.get(resp.url, timeout=30).json()["routes"][0]
    assert (again["distance"], again["duration"]) == shown
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(ARTEFACTS / "avoid.png"))

    # removed with geoman's eraser (a click on the area): the next request has no area and the first
    # route comes back; the click set no waypoint
    pg.click(".leaflet-pm-icon-delete")
    with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
        _click(pg, (sent.centroid.x, sent.centroid.y))
    _wait_attr(pg, "route-seq", 3)
    assert pg.evaluate("gpuroute.route.input") == route0["input"]
    assert "avoid_polygons" not in resp.value.url
    assert _shown_route(pg) == (first["distance"], first["duration"])
    assert pg.locator("path.gpuroute-avoid").count() == 0


def test_two_areas_are_one_multipolygon(page, engine, base_url):
    """Two areas (the panel's button, then geoman's rectangle tool) go out as one MultiPolygon; an area
    the server refuses shows the server's message, and no route."""
    from shapely.geometry import LineString, Polygon, shape

    pg = page
    _route_to(pg, engine, CASINO, FONTVIEILLE)
    coords = pg.evaluate("gpuroute.route.coordinates")
    sq = _square_on_route(coords, 40.0)
    _draw_polygon(pg, sq, "#avoid-draw")
    _wait_attr(pg, "route-seq", 2)
    # a rectangle across the new route, by its two opposite corners
    sq2 = _square_on_route(pg.evaluate("gpuroute.route.coordinates"), 40.0)
    assert not Polygon(sq2).intersects(Polygon(sq))
    _fit(pg, sq2)
    pg.click(".leaflet-pm-icon-rectangle")
    _click(pg, sq2[0])
    with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
        _click(pg, sq2[2])
    _wait_attr(pg, "avoid-seq", 2)
    sent = shape(json.loads(_query(resp.value.url)["avoid_polygons"]))
    assert sent.geom_type == "MultiPolygon" and len(sent.geoms) == 2
    assert sent.geoms[0].symmetric_difference(Polygon(sq)).area < 0.05 * Polygon(sq).area
    assert sent.geoms[1].symmetric_difference(Polygon(sq2)).area < 0.05 * Polygon(sq2).area
    assert pg.locator("path.gpuroute-avoid").count() == 2
    if resp.value.json()["code"] == "Ok":
        _wait_attr(pg, "route-seq", 3)
        assert not LineString(pg.evaluate("gpuroute.route.coordinates")).intersects(sent)
    assert "2 areas avoided" in pg.inner_text("#avoid-status")
    with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
        pg.click("#avoid-clear")
    assert "avoid_polygons" not in resp.value.url
    assert pg.locator("path.gpuroute-avoid").count() == 0 and "no area avoided" in pg.inner_text("#avoid-status")


def test_route_error_shows_the_servers_message(page, engine, base_url):
    """An area around the destination: every road there is avoided; the page shows the server's
    answer (its code and message), not leaflet-routing-machine's bare status."""
    pg = page
    _route_to(pg, engine, CASINO, FONTVIEILLE)
    b = _road_point(engine, FONTVIEILLE)
    # an avoided area around the whole network: no road is left to snap to
    c = np.asarray(engine.graph.coords)
    w, s_ = c.min(axis=0) - 0.002
    e, n = c.max(axis=0) + 0.002
    resp = _draw_polygon(pg, [(w, s_), (e, s_), (e, n), (w, n)], "#avoid-draw")
    _wait_attr(pg, "route-errors", 1)
    body = resp.json()
    assert resp.status >= 400 and body["code"] != "Ok"
    text = pg.inner_text("#route-error")
    assert body["code"] in text and body["message"][:40] in text, (text, body)
    assert b  # the destination was a road point


#: The time profile of the departure test: every road twice as slow on weekdays 08:00-09:00 (its own zone).
PROFILE_ZONE = "Europe/Monaco"


@pytest.fixture(scope="module")
def timed_url(dataset, tmp_path_factory):
    """A second server on the same dataset with a time profile: each road class at factor 1 all week,
    2 on weekdays from 08:00 to 09:00 (15-minute slots)."""
    eng = Engine.open(dataset.parent / "monaco-copy")  # no traffic customized by other tests
    names = eng.graph.meta["road_classes"]
    f = tmp_path_factory.mktemp("profile") / "rush.csv"
    f.write_text(f"# timezone: {PROFILE_ZONE}\n# slot_minutes: 15\nday,start,end,road_class,factor\n"
                 + "".join(f"all,00:00,24:00,{c},1\nweekday,08:00,09:00,{c},2\n" for c in names))
    eng.set_time_profile(f)
    with _serving(create_app(eng)) as url:
        yield url


def _next_date(weekday, zone):
    """The next date (today in ``zone`` included) on ``weekday`` (Monday 0), ISO text."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    today = dt.datetime.now(ZoneInfo(zone)).date()
    return (today + dt.timedelta(days=(weekday - today.weekday()) % 7)).isoformat()


def test_depart_slider_sends_depart_at(browser, timed_url, engine):
    """With a time profile loaded the departure box shows; the slider and the day sent as depart_at (the
    next Wednesday at the chosen time, in the profile's zone), and the page shows the server's route for
    it: in the weekday rush hour (x2 on every road) twice as long as at noon."""
    with _open_page(browser, timed_url) as pg:
        assert pg.locator("#depart-box").is_visible()
        days = pg.eval_on_selector_all("#depart-day option", "os => os.map(o => o.textContent)")
        assert days == ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
        assert pg.get_attribute("#depart-time", "step") == "15"
        resp = _route_to(pg, engine, CASINO, FONTVIEILLE)
        assert "depart_at" not in resp.url  # not ticked yet: the base metric
        base = resp.json()["routes"][0]
        pg.select_option("#depart-day", "2")  # Wednesday: ticks the box, routes again
        _wait_attr(pg, "route-seq", 2)
        seq = 2
        for minute, factor in ((8 * 60 + 15, 2), (12 * 60, 1), (8 * 60, 2), (9 * 60, 1)):
            with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
                pg.evaluate("(v) => { const s = document.getElementById('depart-time'); s.value = v;"
                            " s.dispatchEvent(new Event('input')); s.dispatchEvent(new Event('change')); }", str(minute))
            seq += 1
            _wait_attr(pg, "route-seq", seq)
            want = f"{_next_date(2, PROFILE_ZONE)}T{minute // 60:02d}:{minute % 60:02d}"
            assert _query(resp.value.url)["depart_at"] == want
            assert pg.inner_text("#depart-value") == want[-5:]
            got = resp.value.json()["routes"][0]
            assert _shown_route(pg) == (got["distance"], got["duration"])
            again = httpx.get(f"{timed_url}/route/v1/driving/" + ";".join(
                f"{x},{y}" for x, y in pg.evaluate("gpuroute.route.snapped")) + f"?depart_at={want}", timeout=30).json()
            assert again["routes"][0]["duration"] == pytest.approx(got["duration"], abs=0.3)
            assert got["duration"] == pytest.approx(factor * base["duration"], abs=0.16 * factor)
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(ARTEFACTS / "depart.png"))
        with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
            pg.uncheck("#depart-on")
        assert "depart_at" not in resp.value.url


def test_depart_hidden_without_a_time_profile(page, engine, base_url):
    """This server has no time profile: the departure box stays hidden and no request says depart_at."""
    pg = page
    resp = _route_to(pg, engine, CASINO, FONTVIEILLE)
    assert pg.locator("#depart-box").is_hidden()
    assert "depart_at" not in resp.url


#: Places in Monaco whose pairs have alternative routes (lon, lat).
PLACES = [CASINO, FONTVIEILLE, (7.4360, 43.7460), (7.4130, 43.7310), (7.4180, 43.7370), (7.4230, 43.7350)]


def test_alternatives_drawn(page, engine, base_url):
    """The page draws one line per route in the server's answer (the chosen one solid, the others
    dashed), for each number of alternatives it offers, on the pair of places with the most alternatives;
    selecting an alternative (as a touch on its line does) shows it."""
    pg = page
    most = httpx.get(f"{base_url}/health", timeout=30).json()["limits"]["max_alternatives"]
    options = pg.eval_on_selector_all("#alternatives option", "os => os.map(o => Number(o.value))")
    assert options == list(range(0, min(3, most) + 1))

    def count(a, b):
        pts = ";".join(f"{x},{y}" for x, y in (_road_point(engine, a), _road_point(engine, b)))
        return len(httpx.get(f"{base_url}/route/v1/driving/{pts}?overview=false&alternatives={options[-1]}",
                             timeout=30).json()["routes"])

    a, b = max(((a, b) for a in PLACES for b in PLACES if a != b), key=lambda ab: count(*ab))
    assert count(a, b) > 1, "the engine found no alternative between any two places"
    _route_to(pg, engine, a, b)
    seq, drawn = 1, []
    for k in options:
        with pg.expect_response(lambda r: "/route/v1/driving/" in r.url) as resp:
            pg.select_option("#alternatives", str(k))
        seq += 1
        _wait_attr(pg, "route-seq", seq)
        answer = resp.value.json()
        assert _query(resp.value.url)["alternatives"] == {0: "false", 1: "true"}.get(k, str(k))
        n = len(answer["routes"])
        assert 1 <= n <= k + 1
        assert pg.locator("path.gpuroute-route").count() == 1
        assert pg.locator("path.gpuroute-alt").count() == n - 1
        drawn.append(n)
        assert _shown_route(pg) == (answer["routes"][0]["distance"], answer["routes"][0]["duration"])
        if n > 1:  # choose the last alternative as a touch on its line does (a mouse click: the next test)
            target = answer["routes"][-1]
            pg.evaluate("() => { const alts = gpuroute.control._alternatives, l = alts[alts.length - 1];"
                        " l.fire('linetouched', {latlng: l._route.coordinates[1]}); }")
            seq += 1
            _wait_attr(pg, "route-seq", seq)
            assert _shown_route(pg) == (target["distance"], target["duration"])
            assert f"route {n} of {n}" in pg.inner_text("#route-alts")
    assert max(drawn) > 1
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(ARTEFACTS / "alternatives.png"))


def test_alternative_selected_by_click(page, engine, base_url):
    """Two routes in one answer (the server's route, and the server's route avoiding an area across it,
    as an alternative: real routes in OSRM's shape, whatever the engine's own alternatives find): one
    solid line and one dashed; a mouse click on the dashed line selects it (the panel shows its distance
    and duration) and sets no new destination."""
    from urllib.parse import quote

    from shapely.geometry import LineString, Point, Polygon

    pg = page
    first = _route_to(pg, engine, CASINO, FONTVIEILLE)
    answer = first.json()
    snapped = pg.evaluate("gpuroute.route.snapped")
    coords = pg.evaluate("gpuroute.route.coordinates")
    area = Polygon(_square_on_route(coords, 60.0))
    avoid = quote(json.dumps({"type": "Polygon", "coordinates": [list(map(list, area.exterior.coords))]}), safe="")
    other = httpx.get(f"{base_url}/route/v1/driving/" + ";".join(f"{x},{y}" for x, y in snapped)
                      + f"?overview=false&steps=true&avoid_polygons={avoid}", timeout=30).json()
    assert other["code"] == "Ok", other
    assert other["routes"][0]["duration"] > answer["routes"][0]["duration"]
    both = {**answer, "routes": [answer["routes"][0], other["routes"][0]]}
    pg.route("**/route/v1/driving/**", lambda route: route.fulfill(json=both))
    pg.select_option("#alternatives", "1")
    _wait_attr(pg, "route-seq", 2)
    assert pg.locator("path.gpuroute-route").count() == 1 and pg.locator("path.gpuroute-alt").count() == 1
    assert "route 1 of 2" in pg.inner_text("#route-alts")
    alt = pg.evaluate("gpuroute.control._alternatives[0]._route.coordinates.map(c => [c.lng, c.lat])")
    main = LineString(coords)
    far = max(alt, key=lambda c: main.distance(Point(c)))  # the alternative's point farthest from the route
    assert main.distance(Point(far)) > 1e-4
    pg.evaluate("([lon, lat]) => gpuroute.map.setView([lat, lon], 17, {animate: false})", far)
    waypoints = pg.evaluate("gpuroute.control.getWaypoints().map(w => [w.latLng.lng, w.latLng.lat])")
    _click(pg, far)
    _wait_attr(pg, "route-seq", 3)
    want = other["routes"][0]
    assert _shown_route(pg) == (want["distance"], want["duration"])
    assert "route 2 of 2" in pg.inner_text("#route-alts")
    assert pg.evaluate("gpuroute.control.getWaypoints().map(w => [w.latLng.lng, w.latLng.lat])") == waypoints
    assert pg.locator("path.gpuroute-route").count() == 1 and pg.locator("path.gpuroute-alt").count() == 1


def test_other_sites_cannot_frame_the_page(browser, base_url):
    """A page of another origin (another loopback port) that frames ours, to have the traffic slider moved
    or an area drawn through a decoy (clickjacking: a write from our own origin), gets nothing: the
    browser refuses to render the frame (``frame-ancestors 'none'``), so none of its scripts run and it
    asks the server for nothing more than the refused page."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    r = httpx.get(base_url + "/", timeout=30)
    csp = r.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and r.headers["x-frame-options"] == "DENY"

    async def decoy_page(request):
        return HTMLResponse(f'<iframe id="f" src="{base_url}/" width="800" height="600"></iframe>')

    with _serving(Starlette(routes=[Route("/", decoy_page)])) as decoy:
        ctx = browser.new_context()
        try:
            pg = ctx.new_page()
            asked = []
            pg.on("request", lambda q: asked.append(q.url) if q.url.startswith(base_url) else None)
            pg.goto(decoy + "/")
            pg.wait_for_load_state("load")  # the frame's own scripts load before this (were it rendered)
            assert asked == [base_url + "/"], asked
            assert [f.url for f in pg.frames][1].startswith("chrome-error:")
        finally:
            ctx.close()


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
