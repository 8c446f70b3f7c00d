"""One input rule across every service (the scipy.csgraph model; issue 19, deliverable 5): each bad input of
:data:`RULES` is refused with the same OSRM code and the same message whether it comes as an OSRM URL
(``GET /{service}/v1/...``, :mod:`gpuroute.server.parse`) or as the Python API's arguments
(:class:`gpuroute.engine.Engine`), because both build the same parameter record
(:mod:`gpuroute.engine.params`), the one place that checks; and a request is checked once: one record and
one coordinate check per request, none in the trip's legs.
"""
from __future__ import annotations

import warnings

import pytest

pytest.importorskip("starlette")
pytest.importorskip("orjson")
pytest.importorskip("polyline")

with warnings.catch_warnings():  # newer Starlette asks for httpx2; httpx works the same
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.engine import params as P  # noqa: E402
from gpuroute.server import create_app  # noqa: E402
from gpuroute.server.parse import OSRMError, coordinate_array, parse_request  # noqa: E402

CASINO = (7.4282, 43.7396)
PORT = (7.4233, 43.7347)
PALACE = (7.4206, 43.7314)
BEACH = (7.4367, 43.7441)
#: The limits of this module's engine (and so of its server): small, so that TooBig is cheap to reach.
LIMITS = {"max_locations_route": 3, "max_locations_trip": 3, "max_locations_table": 4, "max_locations_nearest": 2,
          "max_isochrone_contours": 2, "max_isochrone_duration_s": 600.0, "max_isochrone_distance_m": 5000.0}
ALL = ("route", "table", "trip", "nearest", "isochrone")
SNAPPED = ALL  # every service snaps its coordinates with the per-coordinate options


def _two(service):
    """The coordinates a service takes at its smallest: one for nearest and isochrone, else two."""
    return [CASINO] if service in ("nearest", "isochrone") else [CASINO, PORT]


#: ``(rule, services, coordinates(service) or None, Python keywords, code)``: one bad input each.
RULES = [
    ("coordinate out of range", ALL, lambda s: [(7.42, 95.0)] if s in ("nearest", "isochrone") else
     [CASINO, (7.42, 95.0)], {}, "InvalidValue"),
    ("longitude out of range", ALL, lambda s: [(181.0, 43.7)], {}, "InvalidValue"),
    ("one coordinate where two are needed", ("route", "trip"), lambda s: [CASINO], {}, "InvalidOptions"),
    ("two coordinates where one is taken", ("nearest", "isochrone"), lambda s: [CASINO, PORT], {}, "InvalidOptions"),
    ("too many coordinates", ("route", "trip"), lambda s: [CASINO, PORT, PALACE, BEACH], {}, "TooBig"),
    ("too many table cells", ("table",), lambda s: [CASINO, PORT, PALACE], {}, "TooBig"),
    ("radiuses of another length", SNAPPED, None, {"radiuses": [5.0, 5.0, 5.0]}, "InvalidOptions"),
    ("approaches of another length", SNAPPED, None, {"approaches": ["curb"] * 3}, "InvalidOptions"),
    ("negative radius", SNAPPED, None, {"radiuses": [-1.0]}, "InvalidOptions"),
    ("bearing value over 360", SNAPPED, None, {"bearings": [(400, 20)]}, "InvalidOptions"),
    ("bearing range over 180", SNAPPED, None, {"bearings": [(90, 200)]}, "InvalidOptions"),
    ("unknown approach", SNAPPED, None, {"approaches": ["left"]}, "InvalidOptions"),
    ("unknown geometries", ("route", "trip"), None, {"geometries": "wkt"}, "InvalidOptions"),
    ("unknown overview", ("route", "trip"), None, {"overview": "some"}, "InvalidOptions"),
    ("unknown route annotation", ("route", "trip"), None, {"annotations": ["duration", "colour"]}, "InvalidOptions"),
    ("unknown table annotation", ("table",), None, {"annotations": ["duration", "speed"]}, "InvalidOptions"),
    ("negative alternatives", ("route",), None, {"alternatives": -1}, "InvalidOptions"),
    ("source index out of range", ("table",), None, {"sources": [2]}, "InvalidOptions"),
    ("destination index out of range", ("table",), None, {"destinations": [0, 5]}, "InvalidOptions"),
    ("zero fallback speed", ("table",), None, {"fallback_speed": 0.0}, "InvalidValue"),
    ("negative scale factor", ("table",), None, {"scale_factor": -2.0}, "InvalidValue"),
    ("unknown trip source", ("trip",), None, {"source": "middle"}, "InvalidOptions"),
    ("unknown trip destination", ("trip",), None, {"destination": "first"}, "InvalidOptions"),
    ("number zero", ("nearest",), None, {"number": 0}, "InvalidOptions"),
    ("number over the limit", ("nearest",), None, {"number": 3}, "TooBig"),
    ("contour not > 0", ("isochrone",), None, {"contours": [-300.0]}, "InvalidValue"),
    ("too many contours", ("isochrone",), None, {"contours": [60.0, 120.0, 180.0]}, "TooBig"),
    ("contour over the limit", ("isochrone",), None, {"contours": [660.0]}, "TooBig"),
    ("distance contour over the limit", ("isochrone",), None, {"contours": [6000.0], "metric": "distance"},
     "TooBig"),
    ("denoise over 1", ("isochrone",), None, {"denoise": 1.5}, "InvalidOptions"),
    ("negative generalize", ("isochrone",), None, {"generalize": -1.0}, "InvalidOptions"),
    ("colour not rrggbb", ("isochrone",), None, {"colors": ["red"]}, "InvalidOptions"),
    ("colours of another count", ("isochrone",), None, {"contours": [60.0, 120.0], "colors": ["ff0000"]},
     "InvalidOptions"),
]
CASES = [(rule, service, coords, kw, code) for rule, services, coords, kw, code in RULES for service in services]


def _query(service, kw):
    """The OSRM query string of the Python keywords ``kw`` (the URL a client would send)."""
    out = []
    for k, v in kw.items():
        if k == "radiuses":
            out.append("radiuses=" + ";".join("" if r is None else str(r) for r in v))
        elif k == "bearings":
            out.append("bearings=" + ";".join("" if b is None else f"{b[0]},{b[1]}" for b in v))
        elif k == "approaches":
            out.append("approaches=" + ";".join(a or "" for a in v))
        elif k in ("sources", "destinations"):
            out.append(f"{k}=" + ";".join(map(str, v)))
        elif k == "annotations":
            out.append("annotations=" + ",".join(v))
        elif k == "contours":
            minutes = kw.get("metric", "duration") == "duration"
            vals = [c / 60.0 for c in v] if minutes else v
            out.append(("contours_minutes=" if minutes else "contours_meters=") + ",".join(map(str, vals)))
        elif k == "colors":
            out.append("contours_colors=" + ",".join(v))
        elif k == "metric":
            continue
        else:
            out.append(f"{k}={v}")
    if service == "isochrone" and "contours" not in kw:
        out.append("contours_minutes=5")
    return "&".join(out)


def _call(engine, service, coords, kw):
    kw = dict(kw)
    if service in ("nearest", "isochrone"):
        coord = coords[0] if len(coords) == 1 else coords
        if service == "isochrone":
            return engine.isochrone(coord, kw.pop("contours", [300.0]), **kw)
        return engine.nearest(coord, **kw)
    return getattr(engine, service)(coords, **kw)


@pytest.fixture(scope="module")
def engine():
    e = Engine.open("monaco")
    e.limits = {**e.limits, **LIMITS}
    return e


@pytest.fixture(scope="module")
def client(engine):
    return TestClient(create_app(engine))


@pytest.mark.parametrize(("rule", "service", "coords", "kw", "code"), CASES,
                         ids=[f"{s}-{r.replace(' ', '_')}" for r, s, *_ in CASES])
def test_one_rule_one_answer(engine, client, rule, service, coords, kw, code):
    """The same bad input gives the same OSRM code and message over HTTP and from Python."""
    pts = _two(service) if coords is None else coords(service)
    if len(pts) == 2:  # a one-entry per-coordinate option of the rule: its value at the first coordinate
        kw = {k: v + [None] if k in ("radiuses", "bearings", "approaches") and len(v) == 1 else v
              for k, v in kw.items()}
    url = f"/{service}/v1/driving/" + ";".join(f"{lon},{lat}" for lon, lat in pts)
    q = _query(service, kw)
    r = client.get(url + ("?" + q if q else ""))
    assert r.status_code == 400, (rule, r.text)
    http = r.json()
    with pytest.raises(EngineError) as ei:
        _call(engine, service, pts, kw)
    assert (http["code"], ei.value.code) == (code, code), (rule, http, ei.value)
    assert http["message"] == " ".join(ei.value.message.split()), rule
    assert "size" not in http["message"] or "length" in rule  # the rule itself, not a list length


@pytest.mark.parametrize("service", ALL)
def test_valid_requests_pass(engine, client, service):
    """The good counterpart of the table's requests is answered (the rules refuse only what they name)."""
    pts = _two(service)
    url = f"/{service}/v1/driving/" + ";".join(f"{lon},{lat}" for lon, lat in pts)
    q = _query(service, {"radiuses": [500.0] * len(pts), "bearings": [None] * len(pts),
                         "approaches": ["unrestricted"] * len(pts)})
    r = client.get(url + "?" + q)
    assert r.status_code == 200, r.text
    assert r.json()["code"] == "Ok"


def test_grammar_errors_are_the_parser_s(client):
    """What only a URL can get wrong is InvalidQuery (syntax) and never reaches a record."""
    for url in ("/route/v1/driving/7.42,43.73;abc,43.7", f"/route/v1/driving/{CASINO[0]},{CASINO[1]};"
                f"{PORT[0]},{PORT[1]}?radiuses=abc;5", f"/nearest/v1/driving/{CASINO[0]},{CASINO[1]}?number=two",
                f"/route/v1/driving/{CASINO[0]},{CASINO[1]};{PORT[0]},{PORT[1]}?steps=maybe"):
        assert client.get(url).json()["code"] == "InvalidQuery", url
    with pytest.raises(OSRMError) as ei:
        coordinate_array("7.42,43.73;7.41")
    assert ei.value.code == "InvalidQuery"


def test_records_hold_arrays_with_named_sentinels():
    p = P.RouteParams.from_kwargs([CASINO, PORT, PALACE], radiuses=[5, "unlimited", None],
                                  bearings=[(90, 20), None, (0, 180)], approaches=["curb", None, "unrestricted"],
                                  annotations="distance,duration")
    assert p.coords.dtype.name == "float64" and p.coords.shape == (3, 2) and not p.coords.flags.writeable
    assert p.radiuses.tolist() == [5.0, P.UNLIMITED, P.UNLIMITED]
    assert p.bearings[0].tolist() == [90.0, 20.0] and all(x != x for x in p.bearings[1])  # NO_BEARING: NaN
    assert p.approaches.tolist() == [P.APPROACHES.index("curb"), P.NO_APPROACH, P.APPROACHES.index("unrestricted")]
    assert p.annotations == ("duration", "distance")  # the vocabulary's order
    t = P.TableParams.from_kwargs([CASINO, PORT], sources="all", destinations=[1])
    assert t.sources is None and t.source_indices().tolist() == [0, 1] and t.destination_indices().tolist() == [1]


def test_limits_come_from_config(monkeypatch):
    from gpuroute import config

    monkeypatch.setattr(config, "SERVE_MAX_LOCATIONS_ROUTE", 2)
    with pytest.raises(EngineError) as ei:
        P.RouteParams.from_kwargs([CASINO, PORT, PALACE])
    assert ei.value.code == "TooBig"
    assert P.RouteParams.from_kwargs([CASINO, PORT, PALACE], limits={"max_locations_route": 0}).n == 3  # 0: none


# ---------------------------------------------------------------------------------------- checked once
@pytest.fixture
def counted(monkeypatch):
    """Counts of every record construction (``from_kwargs``) and coordinate check during a test."""
    counts = {}

    def wrap(name, fn):
        def counting(*a, **kw):
            counts[name] = counts.get(name, 0) + 1
            return fn(*a, **kw)
        return counting

    for name, cls in P.RECORDS.items():
        monkeypatch.setattr(cls, "from_kwargs", classmethod(wrap(name, cls.from_kwargs.__func__)))
    monkeypatch.setattr(P, "check_coordinates", wrap("coordinates", P.check_coordinates))
    return counts


REQUESTS = {"route": f"/route/v1/driving/{CASINO[0]},{CASINO[1]};{PORT[0]},{PORT[1]}?steps=true",
            "table": f"/table/v1/driving/{CASINO[0]},{CASINO[1]};{PORT[0]},{PORT[1]}?sources=0",
            "trip": f"/trip/v1/driving/{CASINO[0]},{CASINO[1]};{PORT[0]},{PORT[1]};{PALACE[0]},{PALACE[1]}",
            "nearest": f"/nearest/v1/driving/{CASINO[0]},{CASINO[1]}?number=2",
            "isochrone": f"/isochrone/v1/driving/{CASINO[0]},{CASINO[1]}?contours_minutes=2"}
PYTHON = {"route": lambda e: e.route([CASINO, PORT], steps=True),
          "table": lambda e: e.table([CASINO, PORT], sources=[0]),
          "trip": lambda e: e.trip([CASINO, PORT, PALACE]),
          "nearest": lambda e: e.nearest(CASINO, number=2),
          "isochrone": lambda e: e.isochrone(CASINO, [120])}


@pytest.mark.parametrize("service", ALL)
def test_a_request_is_checked_once(engine, client, counted, service):
    """One record and one coordinate check per request, over HTTP and from Python; a trip's legs are
    routed from its record (no second check)."""
    r = client.get(REQUESTS[service])
    assert r.status_code == 200, r.text
    assert counted == {service: 1, "coordinates": 1}, counted
    counted.clear()
    assert PYTHON[service](engine)["code"] == "Ok"
    assert counted == {service: 1, "coordinates": 1}, counted


def test_customize_record_once(engine, counted):
    with pytest.raises(EngineError) as ei:  # no overlay: the record is made, then the engine says why
        engine.customize([{"arc": 0, "cost": 5}])
    assert ei.value.code == "NotImplemented" and counted == {"customize": 1}
    with pytest.raises(EngineError) as ei:
        engine.customize([{"arc": 0, "cost": 5}], metric="time")
    assert ei.value.code == "InvalidOptions" and "not both" in ei.value.message


def test_run_takes_records_only(engine):
    with pytest.raises(TypeError):
        engine.run({"coords": [CASINO, PORT]})
    p = P.RouteParams.from_kwargs([CASINO, PORT], snapping="any")
    with pytest.raises(EngineError) as ei:  # accepted by the vocabulary, not done by this engine: refused
        engine.run(p)
    assert ei.value.code == "InvalidValue"


def test_parse_request_builds_the_record():
    call = parse_request("route", "car", f"{CASINO[0]},{CASINO[1]};{PORT[0]},{PORT[1]}",
                         {"radiuses": "5;", "continue_straight": "default", "generate_hints": "false"},
                         {"default_radius": 250})
    p = call.params
    assert isinstance(p, P.RouteParams) and not call.generate_hints
    assert p.radiuses.tolist() == [5.0, 250.0] and p.continue_straight is None  # the server's default radius
