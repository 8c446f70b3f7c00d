"""``Overlay.customized_state``: a whole customization into a separate state that is not installed (what
``exclude=`` searches, :mod:`gpuroute.engine.exclude`), and :func:`gpuroute.engine.exclude.excluded_metric`
(the current metric with every turn into an excluded arc forbidden).

Oracles: the naive turn-aware Dijkstra (``tests/naive.py``) with the turns into excluded arcs left out,
computed from the base metric's own turn costs (not from the excluded metric); the overlay's own
``customize`` of the same metric (bit for bit). With a GPU (``gpu`` marker): the GPU's state equals the
CPU's, and the device copy that traffic updates start from stays the installed customization's."""
from __future__ import annotations

import numpy as np
import pytest
from crp_oracle import PEN, with_restrictions
from naive import random_road_graph, turn_aware_distances

from gpuroute import INF, Overlay, Partition
from gpuroute.backend import gpu_available
from gpuroute.crp import FORBIDDEN, decode_turn_costs
from gpuroute.crp.metric import Metric
from gpuroute.engine.exclude import excluded_metric


def _overlay(seed, n=60):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.3)
    g = with_restrictions(g, rng, 12)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), method="inertial", seed=seed))
    excluded = rng.random(g.n_arcs) < 0.15
    return g, ov, excluded


def _base_metrics(g, ov, rng):
    """A metric with type penalties only, and one with per-turn costs (some closed)."""
    tc = rng.integers(0, 30, ov.turns.n_turns)
    tc[rng.random(tc.size) < 0.05] = FORBIDDEN
    return [Metric.resolve(g, (g.weight("travel_time"), PEN), turns=ov.turns),
            Metric(g.weight("travel_time"), turn_cost=tc, name="per-turn", units="ds")]


@pytest.mark.parametrize("seed", range(3))
def test_excluded_metric_closes_exactly_the_turns_into_excluded_arcs(seed):
    g, ov, excluded = _overlay(seed)
    for base in _base_metrics(g, ov, np.random.default_rng(seed)):
        want = decode_turn_costs(base, ov.turns)
        want = np.where(excluded[ov.turns.out_arc], FORBIDDEN, want)
        got = decode_turn_costs(excluded_metric(base, ov.turns, excluded), ov.turns)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", range(3))
def test_customized_state_is_exact_and_not_installed(seed):
    """The separate state answers the graph without the excluded arcs exactly (node queries: a search may
    still leave its source by an excluded arc, as the oracle's), and the overlay keeps its own metric."""
    g, ov, excluded = _overlay(seed)
    base = _base_metrics(g, ov, np.random.default_rng(seed))[1]
    ov.customize(base, device="cpu")
    installed = ov._state
    st = ov.customized_state(excluded_metric(base, ov.turns, excluded), device="cpu")
    assert ov._state is installed and ov.metric is base and st is not installed
    base_tc = decode_turn_costs(base, ov.turns)
    # bit for bit what customize() of the same metric gives
    ref = Overlay(g, ov.partition, ov.turns)
    ref.customize(st.metric, device="cpu")
    np.testing.assert_array_equal(st.clique, ref._state.clique)
    np.testing.assert_array_equal(st.turn_cost, ref._state.turn_cost)

    def cost(a, b):
        if excluded[b]:
            return None
        t = int(ov.turns.turn_index([a], [b])[0])
        c = int(base_tc[t])
        return None if c == FORBIDDEN else c

    n = g.n_nodes
    ov._state = st  # queried through the overlay's query object, then put back
    try:
        for s in range(0, n, 7):
            d = turn_aware_distances(g, s, base.arc_cost, cost)
            want = np.array([0 if v == s else INF if x is None else x for v, x in enumerate(d)], dtype=np.int64)
            np.testing.assert_array_equal(ov.distances(np.full(n, s), np.arange(n)), want, err_msg=f"source {s}")
    finally:
        ov._state = installed


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("seed", range(3))
def test_gpu_customized_state_equals_cpu_and_keeps_the_device_copy(seed):
    """On the GPU: the same cliques as the CPU's; the overlay's state and the device copy its traffic updates
    start from are the installed customization's (a GPU update after it equals the CPU update)."""
    g, ov, excluded = _overlay(seed)
    base = _base_metrics(g, ov, np.random.default_rng(seed))[0]
    ex = excluded_metric(base, ov.turns, excluded)
    cpu = ov.customized_state(ex, device="cpu")
    ov.customize(base, device="gpu")
    installed = ov._state
    st = ov.customized_state(ex, device="gpu")
    assert ov._state is installed
    np.testing.assert_array_equal(st.clique, cpu.clique)  # (trees may pick other parents on ties)
    assert np.asarray(st.tree).shape == np.asarray(cpu.tree).shape
    rng = np.random.default_rng(seed + 10)
    ids, costs = rng.integers(0, g.n_arcs, 12), rng.integers(1, 400, 12)
    ov.update(ids, costs, device="gpu")  # from the device copy: must be the installed customization's
    got = ov._state.clique.copy()
    ov.customize(base, device="cpu")
    ov.update(ids, costs, device="cpu")
    np.testing.assert_array_equal(got, ov._state.clique)
