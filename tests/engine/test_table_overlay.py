"""Tables and trips over the customized overlay (:mod:`gpuroute.engine.table`): turn restrictions and
traffic (``/customize``) reach every cell. Oracles: the route between the same points (a cell equals
``/route``'s duration and distance of the same pair, before and after a customization), the turn-aware
Dijkstra of tests/turn_oracle.py, and the best visiting order by brute force over the table."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

pytest.importorskip("osmium")

from phantoms import point, random_points  # noqa: E402
from turn_oracle import phantom_cost, turn_graph  # noqa: E402

from gpuroute.engine.algorithms import CRP, table_search  # noqa: E402

_points = random_points


@pytest.fixture
def dataset(monaco_overlay_dir):
    return monaco_overlay_dir


@pytest.fixture
def engine(overlay_engine):
    return overlay_engine


def _cells_equal_routes(e, pts, tb, k=20):
    """``k`` cells of ``tb`` against ``/route`` of the same pair (duration and distance, 0.1 rounding)."""
    n = len(pts)
    rng = np.random.default_rng(5)
    for i, j in rng.integers(0, n, (k, 2)):
        r = e.route([pts[i], pts[j]], overview="false")["routes"][0]
        assert tb["durations"][i][j] == pytest.approx(r["duration"], abs=0.11), (i, j)
        assert tb["distances"][i][j] == pytest.approx(r["distance"], abs=0.11), (i, j)


def test_table_cells_equal_routes_before_and_after_traffic(engine):
    e = engine
    pts = _points(e, 12, 1)
    assert isinstance(table_search(e), CRP)  # Monaco's turn restrictions: the overlay answers tables
    before = e.table(pts, annotations=["duration", "distance"])
    _cells_equal_routes(e, pts, before)
    # traffic: every arc within ~400 m of the first point is 20x slower
    g = e.graph
    c = g.coords
    near = np.flatnonzero(np.hypot((c[g.tail, 0] - pts[0][0]) * 0.72, c[g.tail, 1] - pts[0][1]) < 400 / 111_000)
    cost = np.asarray(e.overlay.arc_cost)
    upd = [{"arc": int(a), "cost": int(cost[a]) * 20} for a in near]
    assert e.customize(upd)["code"] == "Ok"
    after = e.table(pts, annotations=["duration", "distance"])
    _cells_equal_routes(e, pts, after)
    d0, d1 = np.array(before["durations"]), np.array(after["durations"])
    assert (d1[0, 1:] > d0[0, 1:] + 1).all() and (d1[1:, 0] > d0[1:, 0] + 1).all()  # to and from the slow area
    assert (d1 >= d0 - 0.11).all()


def test_table_cells_equal_the_turn_aware_oracle(engine):
    e = engine
    pts = _points(e, 8, 2)
    e.customize(metric="time-uturn")  # a U-turn penalty: the hierarchy could not answer this
    ov = e.overlay
    tg = turn_graph(ov)
    ps = e.segments.snap_many(pts)
    tb = e.table(pts, annotations=["duration"])
    search = table_search(e)
    assert isinstance(search, CRP)
    snap = search.snap
    cost = search.many_to_many(ps, ps).cost
    ph = [point(ps, i) for i in range(len(pts))]
    for i, j in itertools.product(range(len(pts)), repeat=2):
        want = phantom_cost(ov, ph[i], ph[j], tg)
        assert cost[i, j] * e._w_scale / snap.scale == pytest.approx(want, rel=1e-9, abs=1e-6), (i, j)
    assert np.isfinite(np.array(tb["durations"], dtype=float)).all()


def test_trip_follows_traffic(engine):
    """The trip's order is the best one over the table of the current metric (brute force), and its
    duration the table's along that order."""
    e = engine
    pts = _points(e, 6, 3)
    cost = np.asarray(e.overlay.arc_cost)
    rng = np.random.default_rng(9)
    arcs = rng.choice(e.graph.n_arcs, e.graph.n_arcs // 3, replace=False)
    e.customize([{"arc": int(a), "cost": int(cost[a]) * 7} for a in arcs])
    d = np.array(e.table(pts)["durations"], dtype=float)
    best = math.inf
    for perm in itertools.permutations(range(1, len(pts))):
        order = (0, *perm, 0)
        best = min(best, sum(d[a, b] for a, b in itertools.pairwise(order)))
    trip = e.trip(pts)
    assert trip["trips"][0]["duration"] == pytest.approx(best, abs=0.1 * len(pts) + 1e-6)


def test_auto_device_of_the_overlay_table_is_the_config(engine, monkeypatch):
    """``device="auto"`` runs the twin ``config.CRP_TABLE_AUTO_DEVICE`` names (the CPU's by measurement), whether or
    not a GPU is usable: naming the GPU on a machine without one fails as device="gpu" does, not silently."""
    import importlib

    from gpuroute import config
    from gpuroute.backend import gpu_available

    e = engine
    ph = e._snap(_points(e, 4, 3))
    cpu = importlib.import_module("gpuroute.crp.many_to_many")
    ran = []
    real = cpu.table
    monkeypatch.setattr(cpu, "table", lambda *a, **k: ran.append(1) or real(*a, **k))
    crp = table_search(e)
    want = crp.many_to_many(ph, ph, device="cpu").cost
    ran.clear()
    np.testing.assert_array_equal(crp.many_to_many(ph, ph, device="auto").cost, want)
    assert ran == [1]  # the CPU twin answered "auto"
    if not gpu_available():
        from gpuroute.backend import GPUUnavailableError

        monkeypatch.setattr(config, "CRP_TABLE_AUTO_DEVICE", "gpu")
        with pytest.raises(GPUUnavailableError):
            crp.many_to_many(ph, ph, device="auto")
