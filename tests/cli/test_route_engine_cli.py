"""``gpuroute route --alternatives N`` and ``--depart-at ISO8601`` (issue 22): the route through the engine, on a
Monaco dataset directory. Oracle: the Python API's answer (:meth:`gpuroute.engine.Engine.route` with the same
arguments) -- the same routes, geometries, durations and distances; bad input: one error line, exit 2, nothing on
stdout (the HTTP API's codes and messages)."""
from __future__ import annotations

import contextlib
import io
import json
import textwrap

import numpy as np
import pytest

pytest.importorskip("osmium")

from gpuroute.cli.main import main  # noqa: E402

#: Weekday rush on primary and secondary roads; Saturday is outside its calendar.
RUSH = """\
# timezone: Europe/Monaco
# slot_minutes: 15
day,start,end,road_class,way_id,arc,speed_kmh,factor
weekday,07:00,09:30,primary,,,12,
weekday,07:00,09:30,secondary,,,,2.5
weekday,07:00,09:30,tertiary,,,,1.75
"""
THU_0800 = "2026-11-26T08:00"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds") / "monaco"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["build", "monaco", "-o", str(d), "--cell-sizes", "64,1024"]) == 0
    return d


@pytest.fixture(scope="module")
def rush(tmp_path_factory):
    p = tmp_path_factory.mktemp("tp") / "rush.csv"
    p.write_text(textwrap.dedent(RUSH))
    return p


@pytest.fixture(scope="module")
def pairs(dataset):
    """Seeded pairs of points inside snappable segments (the engine's index), 6 decimals."""
    from gpuroute.engine import Engine

    e = Engine.open(dataset)
    s = e.segments
    rng = np.random.default_rng(22)
    ok = np.flatnonzero(s.length_m >= 5.0)
    pick = rng.choice(ok, 16)
    f = rng.uniform(0.2, 0.8, 16)
    lon = np.round(s.lon_u[pick] + f * (s.lon_v[pick] - s.lon_u[pick]), 6)
    lat = np.round(s.lat_u[pick] + f * (s.lat_v[pick] - s.lat_u[pick]), 6)
    pts = list(zip(lon.tolist(), lat.tolist(), strict=True))
    return [(pts[2 * i], pts[2 * i + 1]) for i in range(8)]


def cli(capsys, argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _route_argv(dataset, a, b, *extra):
    return ["route", "--graph", dataset, "--from", f"{a[0]},{a[1]}", "--to", f"{b[0]},{b[1]}", *extra]


def _same_routes(fc, api):
    lines = [f for f in fc["features"] if f["geometry"]["type"] == "LineString"]
    assert len(lines) == len(api["routes"])
    for i, (f, r) in enumerate(zip(lines, api["routes"], strict=True)):
        p = f["properties"]
        assert p["route"] == i and p["alternative"] == (i > 0)
        assert f["geometry"]["coordinates"] == r["geometry"]["coordinates"]
        assert (p["duration"], p["distance"], p["weight"]) == (r["duration"], r["distance"], r["weight"])
    points = [f for f in fc["features"] if f["geometry"]["type"] == "Point"]
    assert [f["geometry"]["coordinates"] for f in points] == [list(w["location"]) for w in api["waypoints"]]


def test_alternatives_equal_the_python_api(dataset, pairs, capsys):
    from gpuroute.engine import Engine

    e = Engine.open(dataset)
    found = 0
    for a, b in pairs:
        api = e.route([a, b], alternatives=2, geometries="geojson", overview="full")
        code, out, err = cli(capsys, _route_argv(dataset, a, b, "--alternatives", 2, "--json"))
        assert code == 0, err
        fc = json.loads(out)
        _same_routes(fc, api)
        assert fc["properties"]["alternatives_asked"] == 2
        found += len(api["routes"]) - 1
        code, text, err = cli(capsys, _route_argv(dataset, a, b, "--alternatives", 2))
        assert code == 0, err
        for i, r in enumerate(api["routes"]):
            label = "route" if i == 0 else f"alternative {i}"
            assert any(line.startswith(label) and f"{r['duration']:,.1f} s" in line for line in text.splitlines())
        assert f"{len(api['routes']) - 1} of up to 2 alternatives found" in text
    assert found > 0  # the pairs exercise alternatives (the API found some), not only the main route


def test_depart_at_equals_the_python_api(dataset, rush, pairs, capsys):
    from gpuroute.engine import Engine

    e = Engine.open(dataset, time_profile=rush)
    differs = 0
    for a, b in pairs[:4]:
        api = e.route([a, b], depart_at=THU_0800, alternatives=1, geometries="geojson", overview="full")
        plain = e.route([a, b], geometries="geojson", overview="full")
        differs += api["routes"][0]["duration"] != plain["routes"][0]["duration"]
        code, out, err = cli(capsys, _route_argv(dataset, a, b, "--depart-at", THU_0800, "--time-profile", rush,
                                                 "--alternatives", 1, "--json"))
        assert code == 0, err
        fc = json.loads(out)
        _same_routes(fc, api)
        assert fc["properties"]["depart_at"].startswith(THU_0800)
        code, text, err = cli(capsys, _route_argv(dataset, a, b, "--depart-at", THU_0800, "--time-profile", rush))
        assert code == 0, err
        assert f"{api['routes'][0]['duration']:,.1f} s" in text and "depart" in text
    assert differs  # the rush slot changes some of these routes (so equality above is not the plain metric's)


@pytest.mark.parametrize("extra, code_, words", [
    (["--alternatives", 4], 2, ["TooBig", "(3)"]),  # config.SERVE_MAX_ALTERNATIVES, as the HTTP API
    (["--alternatives", "two"], 2, ["--alternatives", "two"]),
    (["--alternatives", "-1"], 2, ["--alternatives"]),
    (["--depart-at", "2026-11-26"], 2, ["depart_at", "2026-11-26", "ISO 8601"]),
    (["--depart-at", "tomorrow"], 2, ["tomorrow"]),
    (["--depart-at", THU_0800], 2, ["--depart-at needs a time profile"]),
    (["--depart-at", "2026-11-28T08:00", "--time-profile", "RUSH"], 2, ["InvalidValue", "calendar", "Saturday"]),
    (["--alternatives", 1, "--ch", "x"], 2, ["--ch does not apply"]),
    (["--alternatives", 1, "--snapping", "any"], 2, ["--snapping any"]),
    (["--depart-at", THU_0800, "--time-profile", "BAD"], 2, ["--time-profile", "bad.csv:3", "day"]),
    (["--depart-at", THU_0800, "--time-profile", "MISSING"], 2, ["no such file"]),
])
def test_bad_input(dataset, rush, pairs, capsys, tmp_path, extra, code_, words):
    bad = tmp_path / "bad.csv"
    bad.write_text("# timezone: UTC\nday,start,end,arc,factor\nsomeday,07:00,08:00,1,2\n")
    subst = {"RUSH": rush, "BAD": bad, "MISSING": tmp_path / "missing.csv"}
    a, b = pairs[0]
    code, out, err = cli(capsys, _route_argv(dataset, a, b, *[subst.get(x, x) for x in extra]))
    assert code == code_
    assert out == ""  # nothing printed half
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("gpuroute route: error:")
    for w in words:
        assert w in lines[-1], (w, lines[-1])


def test_trip_depart_at_shares_the_parsing(capsys, tmp_path):
    """``trip --depart-at`` reads the value as ``route --depart-at`` and the HTTP API (one parser): a bad one is
    refused before anything is opened."""
    stops = tmp_path / "s.csv"
    stops.write_text("7.4282,43.7396\n7.4233,43.7347\n")
    code, out, err = cli(capsys, ["trip", "--stops", stops, "--depart-at", "2026-11-26"])
    assert code == 2 and out == ""
    assert "depart_at '2026-11-26' is not an ISO 8601 date and time" in err


def _serve(monkeypatch, argv):
    """``gpuroute serve ARGV`` up to the point it would listen, without the warm-up: its app (tests/cli/
    test_build_serve.py's stub)."""
    import argparse

    pytest.importorskip("uvicorn")
    pytest.importorskip("starlette")
    import gpuroute.server
    from gpuroute.cli import serve
    from gpuroute.server import http as server_http

    def no_warm_up(app):  # compiling every service is not what these tests are about (tests/server/ check it)
        app.state.ready = True
        return {"seconds": 0.0, "failed": []}

    ran = {}
    monkeypatch.setattr(server_http, "run", lambda app, sock, **kw: ran.update(app=app) or True)
    monkeypatch.setattr(gpuroute.server, "warm_up", no_warm_up)
    p = argparse.ArgumentParser()
    serve.add_parser(p.add_subparsers(), argparse.ArgumentParser(add_help=False))
    args = p.parse_args(["serve", *map(str, argv)])
    args.verbose = 0
    args.workers = 1
    assert serve.run(args) == 0
    return ran["app"]


@pytest.mark.parametrize("top", [0, 1, -1])
def test_serve_max_alternatives_as_osrm_routed(dataset, pairs, monkeypatch, capsys, top):
    """``gpuroute serve --max-alternatives N`` (osrm-routed's option, its meaning: 0 refuses every alternative,
    ``true`` included; here < 0 lifts the limit, /health says null)."""
    pytest.importorskip("httpx")
    from starlette.testclient import TestClient

    app = _serve(monkeypatch, [dataset, "--port", 0, "--max-alternatives", top])
    capsys.readouterr()
    c = TestClient(app)
    assert c.get("/health").json()["limits"]["max_alternatives"] == (None if top < 0 else top)
    a, b = pairs[0]
    url = f"/route/v1/driving/{a[0]},{a[1]};{b[0]},{b[1]}?overview=false&alternatives="
    for ask in ("true", "1", "2", "5"):
        n = 1 if ask == "true" else int(ask)
        r = c.get(url + ask)
        want = 200 if top < 0 or n <= top else 400
        assert r.status_code == want and r.json()["code"] == ("Ok" if want == 200 else "TooBig"), (ask, r.json())
    assert c.get(url + "false").status_code == 200


def test_serve_loads_the_stored_profile_and_the_option_overrides_it(dataset, rush, pairs, monkeypatch, capsys,
                                                                    tmp_path):
    import shutil

    from gpuroute.engine.timeslots import STORED, store_profile

    d = tmp_path / "ds"
    shutil.copytree(dataset, d)
    store_profile(d, rush)
    assert _serve(monkeypatch, [d, "--port", 0]).state.engine.info["time_profile"]["file"] == str(d / STORED)
    other = tmp_path / "other.csv"
    other.write_text("# timezone: UTC\nday,start,end,road_class,factor\nall,00:00,24:00,residential,2\n")
    e = _serve(monkeypatch, [d, "--port", 0, "--time-profile", other]).state.engine
    assert e.info["time_profile"]["file"] == str(other)
    (d / STORED).write_text("edited by hand\n")  # a stored profile that no longer reads: the option does not read it
    assert _serve(monkeypatch, [d, "--port", 0, "--time-profile", other]).state.engine.info["time_profile"]["file"] \
        == str(other)
    capsys.readouterr()
