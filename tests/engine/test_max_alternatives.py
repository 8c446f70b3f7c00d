"""``alternatives`` has ONE limit, ``config.SERVE_MAX_ALTERNATIVES``, applied by
:class:`gpuroute.engine.params.RouteParams` to the Python API and to the HTTP server alike (TooBig above it),
and reported by ``/health``'s ``limits.max_alternatives``."""
from __future__ import annotations

import numpy as np
import pytest
from naive import random_road_graph

from gpuroute import ContractionHierarchy, config
from gpuroute.engine import Engine, EngineError
from gpuroute.geo.snap import largest_scc_mask

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from gpuroute.server.app import create_app  # noqa: E402


@pytest.fixture(scope="module")
def parts():
    g, _ = random_road_graph(np.random.default_rng(3), 40, one_way=0.0)
    return g, ContractionHierarchy.build(g, "travel_time", progress=False)


def _coords(g):
    v = np.flatnonzero(largest_scc_mask(g))[:2]
    return [tuple(map(float, g.coords[x])) for x in v]


def _http(client, coords, alternatives):
    r = client.get("/route/v1/driving/" + ";".join(f"{x},{y}" for x, y in coords) + f"?alternatives={alternatives}")
    return r.status_code, r.json()["code"]


@pytest.mark.parametrize("top", [None, 5])
def test_one_alternatives_limit(parts, monkeypatch, top):
    """At the limit both paths answer; one above it both refuse with TooBig; /health says the limit."""
    if top is not None:
        monkeypatch.setattr(config, "SERVE_MAX_ALTERNATIVES", top)
    top = int(config.SERVE_MAX_ALTERNATIVES)
    g, ch = parts
    e = Engine(g, ch)
    client = TestClient(create_app(e))
    coords = _coords(g)
    assert client.get("/health").json()["limits"]["max_alternatives"] == top
    assert e.limits["max_alternatives"] == top
    assert e.route(coords, alternatives=top)["code"] == "Ok"
    assert _http(client, coords, top) == (200, "Ok")
    with pytest.raises(EngineError) as err:
        e.route(coords, alternatives=top + 1)
    assert err.value.code == "TooBig" and str(top) in str(err.value)
    assert _http(client, coords, top + 1) == (400, "TooBig")
    assert e.route(coords, alternatives=True)["code"] == "Ok"  # true: one alternative, within any limit


@pytest.mark.parametrize("top", [0, 1])
def test_max_alternatives_as_osrm_routed(parts, monkeypatch, top):
    """osrm-routed 26.10 (measured: ``--max-alternatives 0`` / ``1``, ``alternatives=true|1|2``): the limit is the
    most alternatives a request may ask for, 0 refuses every alternative -- ``true`` counts as one -- with TooBig;
    ``alternatives=false``/``0`` always pass. The same from Python and over HTTP; /health says the limit."""
    monkeypatch.setattr(config, "SERVE_MAX_ALTERNATIVES", top)
    g, ch = parts
    e = Engine(g, ch)
    client = TestClient(create_app(e))
    coords = _coords(g)
    assert client.get("/health").json()["limits"]["max_alternatives"] == top
    route_caps = [c for c in e.capabilities if c["service"] == "route"]
    assert route_caps and route_caps[0]["alternatives"] == top
    for ok in (False, 0, *range(1, top + 1), *((True,) if top >= 1 else ())):
        assert e.route(coords, alternatives=ok)["code"] == "Ok"
        word = "true" if ok is True else "false" if ok is False else ok
        assert _http(client, coords, word) == (200, "Ok")
    for bad in ((True,) if top == 0 else ()) + (top + 1, top + 2):
        with pytest.raises(EngineError) as err:
            e.route(coords, alternatives=bad)
        assert err.value.code == "TooBig" and f"({top})" in str(err.value)
        assert _http(client, coords, "true" if bad is True else bad) == (400, "TooBig")


def test_max_alternatives_none_is_no_limit(parts):
    """A limit of None (or < 0, which osrm-routed cannot be given) lifts it; /health and the capabilities say so
    (null), not a number that is not in force."""
    g, ch = parts
    e = Engine(g, ch)
    e.limits["max_alternatives"] = None
    client = TestClient(create_app(e))
    coords = _coords(g)
    assert e.route(coords, alternatives=7)["code"] == "Ok"
    assert _http(client, coords, 7) == (200, "Ok")
    assert client.get("/health").json()["limits"]["max_alternatives"] is None
    assert [c for c in e.capabilities if c["service"] == "route"][0]["alternatives"] is None
