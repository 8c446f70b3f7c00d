"""The one phantom-level search interface (:mod:`gpuroute.engine.algorithms`): CH and CRP each answer
``many_to_many(sources, targets)`` and ``route(waypoints)`` on PhantomSets. Oracles: scipy's Dijkstra on
the graph (the hierarchy, every turn free) and the turn-aware Dijkstra of ``tests/turn_oracle.py`` (the
overlay), both fed each option's fraction-weighted offsets; a route leg equals its table cell; the choice
of implementation per request; the device dispatch."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from naive import random_road_graph
from phantoms import point
from scipy.sparse.csgraph import dijkstra
from turn_oracle import phantom_cost, turn_graph

from gpuroute import ContractionHierarchy, Overlay, Partition
from gpuroute.backend import GPUUnavailableError, gpu_available
from gpuroute.engine import Engine
from gpuroute.engine.algorithms import CH, CRP, route_search, table_search


@pytest.fixture(scope="module")
def engine():
    rng = np.random.default_rng(3)
    g, _ = random_road_graph(rng, 70, one_way=0.25)
    ch = ContractionHierarchy.build(g, "travel_time", progress=False)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 24), seed=1))
    ov.customize("time")
    return Engine(g, ch, overlay=ov)


def _phantoms(e, k, seed):
    """A PhantomSet of ``k`` coordinates: inside random segments and on their end nodes (junction ties)."""
    s = e.segments
    rng = np.random.default_rng(seed)
    seg = rng.integers(0, s.n_segments, k)
    f = np.where(rng.random(k) < 0.3, 0.0, rng.uniform(0.1, 0.9, k))
    return s.snap_batch(s.lon_u[seg] + f * (s.lon_v[seg] - s.lon_u[seg]), s.lat_u[seg] + f * (s.lat_v[seg] - s.lat_u[seg]))


def _ch_oracle(e, ps_s, ps_t):
    """Least ``(1 - fa) w(a) + d(head a, tail b) + fb w(b)`` (or ``(fb - fa) w(a)`` on one arc, target ahead)
    over every option pair, by scipy's Dijkstra on the routing weight."""
    w = e._w
    d = dijkstra(e.graph.to_scipy(e.weight), indices=np.arange(e.graph.n_nodes))
    out = np.full((ps_s.n_points, ps_t.n_points), math.inf)
    for i, j in itertools.product(range(ps_s.n_points), range(ps_t.n_points)):
        for a, fa in point(ps_s, i).all_arcs:
            for b, fb in point(ps_t, j).all_arcs:
                v = (1 - fa) * w[a] + d[e._head[a], e._tail[b]] + fb * w[b]
                if a == b and fa <= fb:
                    v = min(v, (fb - fa) * w[a])
                out[i, j] = min(out[i, j], v)
    return out


def test_ch_many_to_many_equals_the_oracle(engine):
    src, dst = _phantoms(engine, 9, 1), _phantoms(engine, 7, 2)
    got = CH(engine).many_to_many(src, dst, device="cpu").cost
    np.testing.assert_allclose(got, _ch_oracle(engine, src, dst), rtol=1e-12, atol=1e-9)


def test_crp_many_to_many_equals_the_turn_aware_oracle(engine):
    e = engine
    e.customize(metric="time-uturn")  # a U-turn penalty: the hierarchy could not answer this
    try:
        ps = _phantoms(e, 8, 3)
        search = table_search(e)
        assert isinstance(search, CRP) and search.snap is not None
        cost = search.many_to_many(ps, ps, device="cpu").cost
        tg = turn_graph(e.overlay)
        for i, j in itertools.product(range(ps.n_points), repeat=2):
            # the oracle takes every option of both points (their ties too), as the search does
            a, b = point(ps, i), point(ps, j)
            a.arcs, b.arcs = a.all_arcs, b.all_arcs
            want = phantom_cost(e.overlay, a, b, tg) * search.snap.scale / e._w_scale
            assert cost[i, j] == pytest.approx(want, rel=1e-9, abs=1e-6), (i, j)
    finally:
        e.customize(metric="time")


@pytest.mark.parametrize("impl", ["ch", "crp"])
def test_a_route_leg_is_its_table_cell(engine, impl):
    """``route`` of two points costs what ``many_to_many`` says for them, on both implementations."""
    e = engine
    search = CH(e) if impl == "ch" else CRP(e)
    ps = _phantoms(e, 10, 4)
    cost = search.many_to_many(ps, ps, device="cpu").cost
    w = e._w if impl == "ch" else e._traffic.snapshot().cost
    checked = 0
    for i, j in itertools.product(range(ps.n_points), repeat=2):
        if i == j or not math.isfinite(cost[i, j]):
            continue
        plan, _ = search.route(ps.take([i, j]), continue_straight=False)
        (a, fa), (b, fb), path = plan[0]
        if path is None:
            leg = (fb - fa) * w[a]
        elif impl == "ch":
            leg = (1 - fa) * w[a] + float(path.distance) + fb * w[b]
        else:
            leg = path.distance
        assert leg == pytest.approx(cost[i, j], rel=1e-9, abs=1e-6), (i, j)
        checked += 1
    assert checked >= 50


def test_the_search_each_request_runs(engine):
    e = engine
    assert isinstance(route_search(e), CRP)
    assert isinstance(table_search(e), CH)  # the overlay's metric is the hierarchy's, every turn free
    e.customize([{"arc": 0, "cost": int(e.overlay.arc_cost[0]) * 5}])
    try:
        assert isinstance(table_search(e), CRP)  # traffic: only the overlay has it
    finally:
        e.customize(metric="time")
    plain = Engine(e.graph, e.ch)
    assert isinstance(route_search(plain), CH) and isinstance(table_search(plain), CH)


def test_device_dispatch(engine):
    e = engine
    ps = _phantoms(e, 5, 5)
    for search in (CH(e), CRP(e, e._traffic.snapshot())):
        cpu = search.many_to_many(ps, ps, device="cpu").cost
        # "auto": the GPU twin where one is usable (its results are the CPU twin's)
        np.testing.assert_allclose(search.many_to_many(ps, ps).cost, cpu, rtol=1e-12, atol=1e-9)
        with pytest.raises(ValueError, match="device must be one of"):
            search.many_to_many(ps, ps, device="tpu")
        if not gpu_available():
            with pytest.raises(GPUUnavailableError):
                search.many_to_many(ps, ps, device="gpu")
