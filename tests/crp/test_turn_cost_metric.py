"""Metrics with a cost per turn (a Lua profile's turn costs: ``Metric(arc_cost, turn_cost=...)``) on the
overlay: exact against the turn-aware Dijkstra oracle, kept when a customized overlay is saved and loaded
again (so that a later traffic update decodes the same turns on either device), and customized on the GPU
to the CPU's cliques bit for bit (``gpu`` marker).

Oracle: tests/crp_oracle.py (naive turn-aware Dijkstra on the overlay's current costs) and
:func:`gpuroute.crp.metric.decode_turn_costs` of the metric as given."""
from __future__ import annotations

import numpy as np
import pytest
from crp_oracle import assert_all_pairs_exact, with_restrictions
from naive import random_road_graph

from gpuroute import Overlay, Partition
from gpuroute.backend import gpu_available
from gpuroute.crp import FORBIDDEN
from gpuroute.crp.metric import RESTRICTED, Metric, TurnTable, decode_turn_costs


def _case(seed, n=60):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.3)
    g = with_restrictions(g, rng, 8)
    table = TurnTable.build(g)
    tc = rng.integers(0, 60, table.n_turns)
    tc[rng.random(table.n_turns) < 0.05] = FORBIDDEN  # turns a profile does not form
    tc[table.kind == RESTRICTED] = FORBIDDEN
    met = Metric(g.weight("travel_time"), turn_cost=tc, name="routability", units="routability/10")
    part = Partition.build(g, cell_sizes=(6, 18, 40), seed=seed, method="inertial")
    return g, part, met


@pytest.mark.parametrize("seed", [1, 2])
def test_per_turn_costs_exact_and_kept_by_save_and_load(seed, tmp_path):
    g, part, met = _case(seed)
    ov = Overlay.build(g, part)
    ov.customize(met, device="cpu")
    want = decode_turn_costs(met, ov.turns)
    np.testing.assert_array_equal(ov.turn_cost, want)
    assert_all_pairs_exact(ov)
    ov.save(tmp_path / "ov")
    back = Overlay.load(tmp_path / "ov", g)
    # the loaded metric decodes to the saved turn costs: the per-turn part travelled with it
    np.testing.assert_array_equal(decode_turn_costs(back.metric, back.turns), want)
    assert back.metric.name == "routability" and back.metric.units == "routability/10"
    arc = int(np.argmax(np.asarray(back.arc_cost)))
    back.update(np.array([arc]), np.array([int(back.arc_cost[arc]) + 17]), device="cpu")
    np.testing.assert_array_equal(decode_turn_costs(back.metric, back.turns), np.asarray(back.turn_cost))
    assert_all_pairs_exact(back)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("seed", [3, 4])
def test_gpu_customizes_per_turn_costs_like_the_cpu(seed, tmp_path):
    """customize(device="gpu") with per-turn costs gives the CPU's cliques; after save and load, an
    update on the GPU gives the CPU update's cliques and exact routes (the per-turn costs are decoded on
    the device from the loaded metric)."""
    g, part, met = _case(seed, n=80)
    ov = Overlay.build(g, part)
    ov.customize(met, device="cpu")
    ref = ov._state.clique.copy()
    ov.customize(met, device="gpu")
    np.testing.assert_array_equal(ov._state.clique, ref)
    ov.save(tmp_path / "ov")
    arcs = np.array([0, int(g.n_arcs // 2)])
    cpu = Overlay.load(tmp_path / "ov", g)
    cpu.update(arcs, np.asarray(cpu.arc_cost)[arcs] * 3, device="cpu")
    gpu = Overlay.load(tmp_path / "ov", g)
    gpu.update(arcs, np.asarray(gpu.arc_cost)[arcs] * 3, device="gpu")
    np.testing.assert_array_equal(gpu._state.clique, cpu._state.clique)
    np.testing.assert_array_equal(np.asarray(gpu.turn_cost), np.asarray(cpu.turn_cost))
    assert_all_pairs_exact(gpu)
