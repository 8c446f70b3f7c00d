"""Tables as arrays: ``Engine.table(matrices="arrays")`` holds the values of the nested lists, and the HTTP
answer (which asks the engine for arrays and lets orjson write them) is byte for byte the JSON of the
lists, ``null`` for unreachable pairs included (Monaco, snapping onto every component)."""
import functools
import math

import numpy as np
import pytest

pytest.importorskip("osmium")
pytest.importorskip("starlette")
orjson = pytest.importorskip("orjson")

from starlette.testclient import TestClient  # noqa: E402

from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.engine.osrm import matrix_array, matrix_json, matrix_or_none  # noqa: E402
from gpuroute.geo.segments import SegmentIndex  # noqa: E402
from gpuroute.geo.snap import largest_scc_mask  # noqa: E402
from gpuroute.server import create_app  # noqa: E402
from gpuroute.server.app import encode  # noqa: E402


@pytest.fixture(scope="module")
def engine():
    """Monaco snapping onto every component: points on small components make unreachable pairs."""
    e = Engine.open("monaco")
    return Engine(e.graph, e.ch, segments=SegmentIndex(e.graph, component="any"))


@pytest.fixture(scope="module")
def points(engine):
    """Midpoints of segments: 25 inside the largest strongly connected component, 5 outside it."""
    ix, g = engine.segments, engine.graph
    scc = largest_scc_mask(g)
    inside = scc[ix.u] & scc[ix.v]
    rng = np.random.default_rng(0)
    s = np.concatenate([rng.choice(np.flatnonzero(inside), 25, replace=False),
                        rng.choice(np.flatnonzero(~scc[ix.u] & ~scc[ix.v]), 5, replace=False)])
    s = s[rng.permutation(s.size)]
    lon = 0.5 * (ix.lon_u[s] + ix.lon_v[s])
    lat = 0.5 * (ix.lat_u[s] + ix.lat_v[s])
    return np.column_stack([lon, lat]).tolist()


def assert_same_matrix_values(arr, lists):
    """An array (NaN: no route) holds the values of nested lists (None: no route), exactly."""
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float64 and arr.flags.c_contiguous
    assert arr.shape == (len(lists), len(lists[0]))
    for i, row in enumerate(lists):
        for j, v in enumerate(row):
            assert (v is None and math.isnan(arr[i, j])) or arr[i, j] == v, (i, j, arr[i, j], v)


def test_arrays_hold_the_values_of_the_lists(engine, points):
    kw = dict(annotations=("duration", "distance"), sources=list(range(0, 30, 2)), destinations=list(range(25)))
    lists = engine.table(points, **kw)
    arrays = engine.table(points, matrices="arrays", **kw)
    n_null = sum(v is None for row in lists["durations"] for v in row)
    assert 0 < n_null < 15 * 25  # unreachable pairs, and reachable ones
    for key in ("durations", "distances"):
        assert_same_matrix_values(arrays[key], lists[key])
    assert {k: v for k, v in arrays.items() if k not in ("durations", "distances")} == \
        {k: v for k, v in lists.items() if k not in ("durations", "distances")}
    assert encode(arrays) == encode(lists)
    with pytest.raises(EngineError, match="matrices") as ei:
        engine.table(points[:2], matrices="numpy")
    assert ei.value.code == "InvalidOptions"


def test_matrix_array_writes_the_json_of_matrix_or_none():
    rng = np.random.default_rng(1)
    m = np.concatenate([rng.exponential(600.0, 300), rng.uniform(0, 1e6, 300), rng.uniform(-1, 1, 300)])
    m = m.reshape(30, 30).T  # not C-contiguous
    m[3, 4], m[5, 6], m[7, 8] = math.inf, math.nan, -0.04  # -0.0 after rounding
    a = matrix_array(m)
    lists = matrix_or_none(m)
    assert_same_matrix_values(a, lists)
    assert orjson.dumps(a, option=orjson.OPT_SERIALIZE_NUMPY) == orjson.dumps(lists)
    for threads in (1, 3):
        assert matrix_json(a, threads=threads) == orjson.dumps(lists)


@pytest.mark.parametrize("shape", [(1, 1), (7, 300), (300, 7), (0, 4), (3, 0)])
def test_matrix_json_writes_orjson_bytes(shape, monkeypatch):
    """The compiled writer against orjson on the lists, values of every size; orjson itself only where a
    value is not one decimal below 1e14."""
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    n = shape[0] * shape[1]
    m = (rng.uniform(-1, 1, n) * 10.0 ** rng.integers(-1, 14, n)).reshape(shape)
    edge = [0.0, -0.0, 0.1, -0.1, 0.05, 0.95, 9.95, 99999999999999.9, 99999999999999.94, 5e-324, math.inf,
            -math.inf, math.nan]
    flat = m.reshape(-1)
    flat[: min(n, len(edge))] = edge[: min(n, len(edge))]
    rounded = matrix_array(m)
    want = orjson.dumps(matrix_or_none(m))
    big = rounded.copy()
    if n:
        big.reshape(-1)[-1] = 1e14
    want_big = orjson.dumps(matrix_or_none(big))
    raw = m.astype(object)
    raw[~np.isfinite(m)] = None
    want_raw = orjson.dumps(raw.tolist())
    dumps = orjson.dumps
    used = []
    monkeypatch.setattr(orjson, "dumps", lambda *a, **kw: used.append(1) or dumps(*a, **kw))
    assert matrix_json(rounded, threads=4) == want
    assert matrix_json(rounded, threads=1) == want
    assert not used  # the compiled writer
    if n:  # beyond 1e14, or more than one decimal: orjson writes it (the same bytes as the lists)
        assert matrix_json(big, threads=2) == want_big
        assert matrix_json(m, threads=2) == want_raw
        assert used


def test_http_table_is_byte_for_byte_the_lists_json(engine, points, monkeypatch):
    asked = []
    table, run = engine.table, engine.run

    @functools.wraps(run)
    def spy(p):  # the server hands the engine the checked record (gpuroute.engine.params.TableParams)
        asked.append(p.matrices)
        return run(p)

    monkeypatch.setattr(engine, "run", spy)
    client = TestClient(create_app(engine))
    for kw, body in (({}, {}),
                     ({"annotations": ("duration", "distance"), "sources": [0, 3, 29], "destinations": [1, 2, 28]},
                      {"annotations": "duration,distance", "sources": "0;3;29", "destinations": "1;2;28"}),
                     ({"scale_factor": 2.0}, {"scale_factor": 2.0})):
        r = client.post("/table/v1/driving", json={"coordinates": points, **body})
        assert r.status_code == 200, r.text
        assert asked[-1] == "arrays"  # the server asks for arrays
        want = table(points, **kw)
        assert r.content == encode(want)
        assert any(v is None for row in r.json()["durations"] for v in row)
