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
