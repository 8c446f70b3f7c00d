"""The short parse of ``GET /route`` (:mod:`gpuroute.server.fastpath`): every answer it gives is the general
parse's, byte for byte (status, headers, body), on random requests, errors included."""
from __future__ import annotations

import random

import pytest

import gpuroute.server.fastpath as fp
from gpuroute.server import create_app
from gpuroute.server.fastpath import MAX_TEMPLATES, TEMPLATE_OPTIONS, RouteTemplates

# inside Monaco, and around it
LON, LAT = (7.40, 7.44), (43.72, 43.75)


@pytest.fixture(scope="module")
def apps():
    """Two applications over one engine: with the short parse, and with the general parse only."""
    from gpuroute.engine import Engine

    eng = Engine.open("monaco")
    fast, general = create_app(eng), create_app(eng)
    general.state.adapter.route_templates = None
    return fast, general


def _scope(url):
    path, _, query = url.partition("?")
    return {"type": "http", "method": "GET", "http_version": "1.1", "path": path, "raw_path": path.encode(),
            "query_string": query.encode(), "headers": []}


def _answer(app, scope):
    """``(status, headers, body)`` of a GET: the direct answer, or (a request for a worker thread) the one
    the worker thread gives."""
    got = app.direct(dict(scope))
    if got is not None or not app.fast(scope):  # answered, or Starlette's router's (not an OSRM service's path)
        return got
    server = app.state.adapter
    status, body, call = server.answer_get(dict(scope))
    assert call is not None
    return server.work(call)


def _number(rng, lo, hi):
    x = rng.uniform(lo, hi)
    form = rng.random()
    if form < 0.6:
        return f"{x:.{rng.randint(0, 8)}f}"
    # other spellings: the general grammar's (sign, exponent, leading dot or zeros), or none at all
    return rng.choice([f"+{x:.5f}", f"{x:.3e}", f"0{x:.4f}", f"{x:.4f}0", f"{x:.0f}.", "-0.0", f"{x:.5f}x",
                       f".{rng.randint(0, 99)}", f"{x + 180:.3f}", f"-{x:.6f}", "nan", f"{x:.2f}E1"])


def _coords(rng, n):
    return ";".join(f"{_number(rng, *LON)},{_number(rng, *LAT)}" for _ in range(n))


_VALUES = {"alternatives": ["true", "false", "0", "1", "2", "-1", "x"], "steps": ["true", "false", "maybe"],
           "annotations": ["true", "false", "duration,distance", "nodes", "speed,weight", "bogus"],
           "geometries": ["polyline", "polyline6", "geojson", "wkt"], "overview": ["full", "simplified", "false", "x"],
           "continue_straight": ["default", "true", "false", "2"], "generate_hints": ["true", "false"],
           "skip_waypoints": ["true", "false"], "radiuses": ["50;50", "unlimited;20", "5"],
           "bearings": ["90,20;", "0,180;10,10"], "hints": [";", ""], "exclude": ["motorway", ""],
           "approaches": ["curb;curb", "unrestricted;"], "x": ["1"]}


def _query(rng):
    names = rng.sample(sorted(_VALUES), rng.randint(0, 4))
    pairs = [f"{k}={rng.choice(_VALUES[k])}" for k in names]
    if pairs and rng.random() < 0.05:
        pairs.append(pairs[0])  # an option given twice
    if rng.random() < 0.05:
        pairs.append("overview=%66ull")  # percent-encoded
    return "&".join(pairs)


def _urls(seed, n):
    rng = random.Random(seed)
    queries = [_query(rng) for _ in range(12)] + ["", "overview=full", "overview=false&steps=false"]
    plain = ["", "overview=full", "overview=false&steps=false", "geometries=geojson&overview=full",
             "steps=true&annotations=true", "generate_hints=false&overview=simplified", "alternatives=false"]
    out = []
    for _ in range(n):
        if rng.random() < 0.6:  # what clients send: plain decimals, the same few option strings
            k = rng.choice([2, 2, 2, 3])
            pts = ";".join(f"{rng.uniform(*LON):.{rng.randint(4, 7)}f},{rng.uniform(*LAT):.{rng.randint(4, 7)}f}"
                           for _ in range(k))
            q = rng.choice(plain)
            out.append(f"/route/v1/driving/{pts}" + ("?" + q if q else ""))
            continue
        k = rng.choice([2, 2, 2, 2, 3, 4, 1, 0, 30])
        profile = rng.choice(["driving", "driving", "car", "a_b-c", "dr!ving", "a.b"])
        suffix = rng.choice(["", "", "", ".json", ".xml", "/"])
        service = rng.choice(["route"] * 8 + ["table", "nearest", "Route"])
        version = "v1" if rng.random() < 0.97 else "v2"
        url = f"/{service}/{version}/{profile}/{_coords(rng, k)}{suffix}"
        q = rng.choice(queries)
        out.append(url + ("?" + q if q else ""))
    return out


def test_the_short_parse_answers_as_the_general_one(apps):
    fast, general = apps
    tpl = fast.state.adapter.route_templates
    taken = 0
    answers = set()
    for url in _urls(20, 600):
        scope = _scope(url)
        if tpl.templates and tpl.call(scope) is not None:
            taken += 1
        got, want = _answer(fast, scope), _answer(general, scope)
        assert got == want, url
        if want is not None:
            answers.add((want[0], want[-1][:40]))
    # the comparison covered both paths, answers and errors
    assert taken >= 100 and len(tpl.templates) >= 5
    assert {s for s, _ in answers} >= {200, 400}


def test_the_short_parse_keeps_only_option_only_records(apps):
    fast, _ = apps
    tpl = RouteTemplates(fast.state.adapter)
    base = "/route/v1/driving/7.4206,43.7384;7.4246,43.7335"
    assert tpl.call(_scope(base + "?overview=full")) is not None  # kept, then used
    assert tpl.call(_scope(base + "?overview=full")).params.overview == "full"
    for query in ("radiuses=5;5", "overview=full&hints=;", "steps=maybe", "bearings=90,10;"):
        assert tpl.call(_scope(f"{base}?{query}")) is None, query  # the general parse's
    for path in (base.replace("7.4206", "7.42e0"), base.replace("7.4206", "+7.4206"), base + ".xml",
                 base.replace("43.7384", "91.5"), base.replace("driving", "dr%21ving")):
        assert tpl.call(_scope(path)) is None, path
    assert {k[1] for k, v in tpl.templates.items() if v is not fp._GENERAL} == {b"overview=full"}
    assert tpl.templates[(b"driving", b"radiuses=5;5", 2)] is fp._GENERAL  # known: the general parse's at once
    assert {"overview", "steps"} <= TEMPLATE_OPTIONS and not TEMPLATE_OPTIONS & {"radiuses", "bearings", "hints"}


def test_the_templates_are_bounded(apps, monkeypatch):
    fast, general = apps
    monkeypatch.setattr(fp, "MAX_TEMPLATES", 2)
    tpl = RouteTemplates(fast.state.adapter)
    urls = [f"/route/v1/driving/7.4206,43.7384;7.4246,43.7335?overview={o}" for o in ("full", "false", "simplified")]
    assert [tpl.call(_scope(u)) is not None for u in urls] == [True, True, False]
    assert len(tpl.templates) == 2 <= MAX_TEMPLATES
    for u in urls:  # past the bound: the general parse, the same answer
        assert _answer(fast, _scope(u)) == _answer(general, _scope(u))


def test_the_templates_follow_the_limits(apps):
    """A limit changed after a template was made (a test, an embedding program) is applied: the templates are
    made again, and the answer is the general parse's."""
    fast, general = apps
    url = "/route/v1/driving/7.4206,43.7384;7.4246,43.7335?alternatives=2&overview=false"
    assert _answer(fast, _scope(url))[0] == 200
    before = [app.state.adapter.limits["max_alternatives"] for app in (fast, general)]
    for app in (fast, general):
        app.state.adapter.limits["max_alternatives"] = 1
    try:
        got, want = _answer(fast, _scope(url)), _answer(general, _scope(url))
        assert got == want and want[0] == 400 and b"TooBig" in want[-1]
    finally:
        for app, v in zip((fast, general), before, strict=True):
            app.state.adapter.limits["max_alternatives"] = v
