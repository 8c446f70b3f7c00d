"""Many-to-many tables on the customized overlay (:mod:`gpuroute.crp.many_to_many`): every cell equals the
turn-aware oracle between phantom nodes (tests/turn_oracle.py ``phantom_cost``: scipy's Dijkstra on the
turn-expanded graph) and the route between the same points (:meth:`gpuroute.engine.traffic.TrafficRouter.plan`),
on random graphs with turn costs and restrictions over multi-level partitions, on Monaco (restrictions,
U-turn penalties; and with OSRM's car.lua), after traffic updates; quantities summed along the chosen
paths equal their sums along the oracle's (or the route's) path; bad input is named."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from crp_oracle import with_restrictions
from naive import random_road_graph
from osrm_peer import osrm_bin_dir, osrm_profiles_dir
from phantoms import from_options, option_point, random_options
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra
from turn_oracle import phantom_cost, turn_graph

import gpuroute
from gpuroute import Overlay, Partition, RoadGraph, config
from gpuroute.crp import many_to_many as mm
from gpuroute.crp.many_to_many import NO_OPTION, table
from gpuroute.engine.traffic import TrafficRouter
from gpuroute.partition.multilevel import topology_fingerprint

ROOT = Path(__file__).resolve().parents[2]
PARTS = [((2, 4, 8, 16), "inertial"), ((3, 9), "kahip"), ((6, 30, 60), "inertial"), ((4,), "kahip")]


def _leg(sa, sf, ta, tf):
    """The two waypoints of a one-leg route as the router takes them (a PhantomSet of their options)."""
    return from_options([option_point(sa, sf).arcs, option_point(ta, tf).arcs])


def _same_arcs(sa, sf, ta, tf, rng, k):
    """The first ``k`` targets on the first sources' arcs, at other fractions (ahead of them or behind)."""
    ta[:k], tf[:k] = sa[:k], rng.random(sf[:k].shape)


def _overlay(seed, n=70, max_cost=1000, mezzanine=None):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=float(rng.choice([0.0, 0.3, 0.6])))
    g = with_restrictions(g, rng, 15)
    sizes, method = PARTS[seed % len(PARTS)]
    ov = Overlay.build(g, Partition.build(g, cell_sizes=sizes, method=method, seed=seed), mezzanine=mezzanine)
    costs = rng.integers(1, max_cost, g.n_arcs)
    pen = {name: int(rng.integers(0, max_cost // 3)) for name in ("straight", "left", "right", "uturn")}
    ov.customize((costs, pen))
    return g, ov, rng


def _oracle(ov, sa, sf, ta, tf):
    tg = turn_graph(ov)
    return np.array([[phantom_cost(ov, option_point(sa[s], sf[s]), option_point(ta[t], tf[t]), tg)
                      for t in range(ta.shape[0])] for s in range(sa.shape[0])])


def _oracle_path_sums(ov, a, fa, b, fb, quantities):
    """Each quantity along the oracle's least path from ``a`` at ``fa`` (leaving it) to ``b`` at ``fb``."""
    rows, cols, w, c = turn_graph(ov)
    m = ov.graph.n_arcs
    sel = rows == a
    g = csr_matrix((np.concatenate([w, w[sel] + (1.0 - fa) * c[a] + 1.0]),
                    (np.concatenate([rows, np.full(int(sel.sum()), m)]), np.concatenate([cols, cols[sel]]))),
                   shape=(m + 1, m + 1))
    _, pred = dijkstra(g, indices=m, return_predecessors=True)
    states = [b]
    while pred[states[-1]] != m:
        states.append(int(pred[states[-1]]))
    states = [a] + states[::-1]
    tid = ov.turns.turn_index(np.array(states[:-1]), np.array(states[1:]))
    return [(1.0 - fa) * qa[a] + sum(qt[t] + qa[y] for t, y in zip(tid, states[1:], strict=True)) - (1.0 - fb) * qa[b]
            for qa, qt in quantities]


def _route_table(router, sa, sf, ta, tf, quantities=()):
    """Cost of the route between every source and target (``TrafficRouter.plan``, one leg), inf where none, and
    each quantity along the route's arcs (per-turn parts by the turn ids between them)."""
    S, T = sa.shape[0], ta.shape[0]
    cost = np.full((S, T), np.inf)
    sums = np.full((len(quantities), S, T), np.inf)
    turns = router.overlay.turns
    for s in range(S):
        for t in range(T):
            try:
                plan, snap = router.plan(_leg(sa[s], sf[s], ta[t], tf[t]), False)
            except gpuroute.engine.EngineError:
                continue
            (a, fa), (b, fb), path = plan[0]
            c = snap.cost
            if path is None:
                cost[s, t] = (fb - fa) * c[a]
                sums[:, s, t] = [(fb - fa) * qa[a] for qa, _ in quantities]
                continue
            cost[s, t] = path.distance
            arcs = np.concatenate([[a], np.asarray(path.arcs, np.int64), [b]])
            tid = turns.turn_index(arcs[:-1], arcs[1:])
            sums[:, s, t] = [(1.0 - fa) * qa[a] + (qt[tid].sum() + qa[arcs[1:]].sum()) - (1.0 - fb) * qa[b]
                             for qa, qt in quantities]
    return cost, sums


def _check_choice(ov, res, sa, sf, ta, tf):
    """The chosen options reproduce each cell's cost; no options where there is no path."""
    c = ov.arc_cost.astype(np.float64)
    tg = turn_graph(ov)
    reach = np.isfinite(res.cost)
    assert ((res.src_option == NO_OPTION) == ~reach).all() and ((res.dst_option == NO_OPTION) == ~reach).all()
    assert not res.same_arc[~reach].any()
    for s, t in zip(*np.nonzero(reach), strict=True):
        j, k = res.src_option[s, t], res.dst_option[s, t]
        a, fa, b, fb = sa[s, j], sf[s, j], ta[t, k], tf[t, k]
        assert a >= 0 and b >= 0
        if res.same_arc[s, t]:
            assert a == b and fa <= fb and res.cost[s, t] == (fb - fa) * c[a]
        else:
            one = phantom_cost(ov, option_point([a], [fa]), option_point([b], [fb]), tg)
            assert res.cost[s, t] == pytest.approx(one, abs=1e-6)


# ------------------------------------------------------------------------------------------ random graphs
@pytest.mark.parametrize("seed", range(4))
def test_random_graphs_equal_the_turn_oracle(seed):
    g, ov, rng = _overlay(seed)
    sa, sf = random_options(g, rng, 14)
    ta, tf = random_options(g, rng, 12)
    _same_arcs(sa, sf, ta, tf, rng, 5)
    res = table(ov, sa, sf, ta, tf)
    want = _oracle(ov, sa, sf, ta, tf)
    np.testing.assert_allclose(res.cost, want, rtol=0, atol=1e-6)
    assert np.isfinite(want).any()
    assert res.cost.dtype == np.float64 and res.src_option.dtype == np.int64
    assert res.metric is ov.metric
    _check_choice(ov, res, sa, sf, ta, tf)


@pytest.mark.parametrize("variant", ["trees", "no trees", "mezzanine"])
@pytest.mark.parametrize("seed", range(2))
def test_along_sums_equal_the_oracle_path(seed, variant, monkeypatch):
    """Costs up to 10^6 (ties unlikely): quantities along the chosen path equal their sums along the oracle's
    path of the chosen options; the metric's own costs as a quantity give the cost. Clique edges are unpacked
    from the kept trees, by searching the cells, and through mezzanine levels."""
    if variant == "no trees":
        monkeypatch.setattr(config, "CRP_KEEP_TREES", False)
    sizes = PARTS[(seed + 2) % len(PARTS)][0]
    g, ov, rng = _overlay(seed + 10, n=60, max_cost=10**6, mezzanine={sizes[0]: (2,)} if variant == "mezzanine" else None)
    assert ov._plan.identity == (variant != "mezzanine")
    assert (ov._tree_first[-1] == 0) == (variant == "no trees")
    sa, sf = random_options(g, rng, 10)
    ta, tf = random_options(g, rng, 9)
    _same_arcs(sa, sf, ta, tf, rng, 3)
    tr = ov.turns
    pen = np.where(ov.turn_cost >= 0, ov.turn_cost - ov.arc_cost[tr.out_arc], 0).astype(np.float64)
    qs = [(rng.random(g.n_arcs), rng.random(tr.out_arc.size)), (rng.random(g.n_arcs) * 100, None),
          (ov.arc_cost.astype(np.float64), pen)]
    res = table(ov, sa, sf, ta, tf, along=qs)
    np.testing.assert_allclose(res.cost, _oracle(ov, sa, sf, ta, tf), rtol=0, atol=1e-6)
    np.testing.assert_allclose(res.along[2], res.cost, rtol=1e-12, atol=1e-6)
    assert res.stats["clique_edges_unpacked"] > 0
    zero = np.zeros(tr.out_arc.size)
    full = [(qa, zero if qt is None else qt) for qa, qt in qs]
    for s, t in np.ndindex(res.cost.shape):
        if not np.isfinite(res.cost[s, t]):
            assert all(np.isinf(x[s, t]) for x in res.along)
            continue
        j, k = res.src_option[s, t], res.dst_option[s, t]
        a, fa, b, fb = sa[s, j], sf[s, j], ta[t, k], tf[t, k]
        if res.same_arc[s, t]:
            want = [(fb - fa) * qa[a] for qa, _ in full]
        else:
            want = _oracle_path_sums(ov, a, fa, b, fb, full)
        np.testing.assert_allclose([x[s, t] for x in res.along], want, rtol=1e-9, atol=1e-6, err_msg=f"cell {s}, {t}")


@pytest.mark.parametrize("variant", ["trees", "mezzanine"])
def test_per_state_items_are_made_again_after_a_customization(variant):
    """What a table keeps per overlay state (label scale, arc costs, the checked ``along`` arrays, the
    microcode trees) is that of the state it reads: the same quantity arrays before and after
    ``overlay.update``, and on the old state again, give each state's oracle costs and oracle path sums."""
    g, ov, rng = _overlay(21, n=60, max_cost=10**6, mezzanine={3: (2,)} if variant == "mezzanine" else None)
    assert ov._plan.identity == (variant != "mezzanine")
    sa, sf = random_options(g, rng, 8)
    ta, tf = random_options(g, rng, 7)
    _same_arcs(sa, sf, ta, tf, rng, 2)
    tr = ov.turns
    qs = [(rng.random(g.n_arcs), rng.random(tr.out_arc.size)), (rng.random(g.n_arcs) * 100, None)]
    zero = np.zeros(tr.out_arc.size)
    full = [(qa, zero if qt is None else qt) for qa, qt in qs]

    def check(res):
        np.testing.assert_allclose(res.cost, _oracle(ov, sa, sf, ta, tf), rtol=0, atol=1e-6)
        assert res.stats["scale"] == mm._label_scale(ov._state)
        for s, t in zip(*np.nonzero(np.isfinite(res.cost) & ~res.same_arc), strict=True):
            j, k = res.src_option[s, t], res.dst_option[s, t]
            want = _oracle_path_sums(ov, sa[s, j], sf[s, j], ta[t, k], tf[t, k], full)
            np.testing.assert_allclose([x[s, t] for x in res.along], want, rtol=1e-9, atol=1e-6)

    first = table(ov, sa, sf, ta, tf, along=qs)
    check(first)
    old = ov._state
    arcs = np.unique(rng.integers(0, g.n_arcs, g.n_arcs // 2))
    ov.update(arcs, rng.integers(1, 10**6, arcs.size))
    second = table(ov, sa, sf, ta, tf, along=qs)
    check(second)
    assert not np.array_equal(second.cost, first.cost)
    again = table(ov, sa, sf, ta, tf, along=qs, state=old)
    np.testing.assert_array_equal(again.cost, first.cost)
    for x, y in zip(again.along, first.along, strict=True):
        np.testing.assert_array_equal(x, y)


# ------------------------------------------------------------------------------------------ hand-made cases
def _ring():
    """A one-way ring 0 -> 1 -> 2 -> 3 -> 0 (arcs 0..3, costs 10, 20, 30, 40) and an isolated one-way arc
    4 -> 5 (arc 4, cost 50); level-0 cells {0, 1}, {2, 3}, {4, 5}: arc 3 leaves one cell for another."""
    g = RoadGraph.from_arcs(6, [0, 1, 2, 3, 4], [1, 2, 3, 0, 5], {"travel_time": np.array([10, 20, 30, 40, 50])})
    cells = np.array([[0, 0, 1, 1, 2, 2], [0, 0, 0, 0, 1, 1]])
    ov = Overlay.build(g, Partition(cells, (2, 4), "manual", topology_fingerprint(g)))
    ov.customize(np.array([10, 20, 30, 40, 50]))
    return g, ov


def test_a_target_behind_the_source_leaves_the_arc_and_comes_back():
    """Source at 0.8 of arc 3, target at 0.3 of the same arc: round the ring (the rest of arc 3, arcs 0, 1, 2,
    and 0.3 of arc 3 again) -- never the source's seed label joined with the target's (that would be
    (0.3 - 0.8) * 40 < 0). Arc 3 crosses from one cell into another: the way back comes through a clique."""
    g, ov = _ring()
    sa = np.array([[3], [3], [4], [4]])
    sf = np.array([[0.8], [0.2], [0.9], [0.2]])
    ta = np.array([[3, -1], [4, -1]])
    tf = np.array([[0.3, 0.0], [0.7, 0.0]])
    ones = (np.ones(g.n_arcs), np.ones(ov.turns.out_arc.size))
    res = table(ov, sa, sf, ta, tf, along=[ones])
    want = np.array([[0.2 * 40 + 100 - 0.7 * 40, np.inf],
                     [0.1 * 40, np.inf],
                     [np.inf, np.inf],  # behind on the isolated arc: no way back
                     [np.inf, 0.5 * 50]])
    np.testing.assert_allclose(res.cost, want, rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.cost, _oracle(ov, sa, sf, ta, tf), rtol=0, atol=1e-9)
    assert res.same_arc.tolist() == [[False, False], [True, False], [False, False], [False, True]]
    # 0.2 + 3 + 0.3 arcs and the 4 turns 3 -> 0 -> 1 -> 2 -> 3
    np.testing.assert_allclose(res.along[0], [[7.5, np.inf], [0.1, np.inf], [np.inf, np.inf], [np.inf, 0.5]])
    _check_choice(ov, res, sa, sf, ta, tf)


def test_a_u_turn_into_a_state_settled_by_another_seed():
    """A two-way street 0 <-> 1 (arcs 0 -> 1 and 1 -> 0, 40 each, U-turns 5). The source's options: 0.25 of
    arc 0 and 0.75 of arc 1; the target's: 0.1 of arc 0 and 0.6 of arc 1, each behind the source's option on
    its arc. Best: leave by arc 1 (10), U-turn into arc 0 (45), stop at 0.1 (-36) = 19. Arc 0 is settled by
    the source's seed and the backward search settles arc 1 by the target's seed, so only the U-turn edge
    into arc 0, relaxed after arc 0 was settled, sees this path."""
    g = RoadGraph.from_arcs(2, [0, 1], [1, 0], {"travel_time": np.array([40, 40])})
    ov = Overlay.build(g, Partition(np.array([[0, 1]]), (2,), "manual", topology_fingerprint(g)))
    ov.customize((np.array([40, 40]), {"uturn": 5}))
    sa, sf = np.array([[0, 1]]), np.array([[0.25, 0.75]])
    ta, tf = np.array([[0, 1]]), np.array([[0.1, 0.6]])
    res = table(ov, sa, sf, ta, tf, along=[(np.ones(2), None)])
    assert res.cost[0, 0] == pytest.approx(19.0) == _oracle(ov, sa, sf, ta, tf)[0, 0]
    assert res.src_option[0, 0] == 1 and res.dst_option[0, 0] == 0 and not res.same_arc[0, 0]
    assert res.along[0][0, 0] == pytest.approx(0.25 + 0.1)
    _check_choice(ov, res, sa, sf, ta, tf)


def test_unused_option_slots_and_unreachable_cells():
    g, ov = _ring()
    sa = np.array([[-1, 0], [-1, -1], [4, -1]])
    sf = np.array([[0.0, 0.5], [0.0, 0.0], [0.5, 0.0]])
    ta = np.array([[-1, 2, -1], [4, -1, 1], [-1, -1, -1]])
    tf = np.array([[0.0, 0.25, 0.0], [0.9, 0.0, 0.5], [0.0, 0.0, 0.0]])
    res = table(ov, sa, sf, ta, tf, along=[(np.arange(5.0), None)])
    want = np.array([[0.5 * 10 + 20 + 30 - 0.75 * 30, 0.5 * 10 + 20 - 0.5 * 20, np.inf],
                     [np.inf, np.inf, np.inf],
                     [np.inf, 0.4 * 50, np.inf]])
    np.testing.assert_allclose(res.cost, want, rtol=0, atol=1e-9)
    assert res.src_option.tolist() == [[1, 1, -1], [-1, -1, -1], [-1, 0, -1]]
    assert res.dst_option.tolist() == [[1, 2, -1], [-1, -1, -1], [-1, 0, -1]]
    np.testing.assert_allclose(res.along[0], [[0.5 * 0 + 1 + 0.25 * 2, 0.5 * 0 + 0.5 * 1, np.inf],
                                              [np.inf, np.inf, np.inf], [np.inf, 0.4 * 4, np.inf]])
    _check_choice(ov, res, sa, sf, ta, tf)


def test_empty_tables():
    g, ov = _ring()
    a, f = np.zeros((0, 2), np.int64), np.zeros((0, 2))
    res = table(ov, a, f, np.array([[1, -1]]), np.array([[0.5, 0.0]]), along=[(np.ones(5), None)])
    assert res.cost.shape == (0, 1) and res.src_option.shape == (0, 1) and res.along[0].shape == (0, 1)
    res = table(ov, np.array([[1]]), np.array([[0.5]]), a, f)
    assert res.cost.shape == (1, 0)


def test_every_round_of_a_full_buffer_gives_the_same_table(monkeypatch):
    """Room for one bucket entry per target and one tree node per source: the chunks stop, and the targets
    (sources) left run again with more room; the table is the same."""
    g, ov, rng = _overlay(5)
    sa, sf = random_options(g, rng, 9)
    ta, tf = random_options(g, rng, 11)
    q = [(rng.random(g.n_arcs), None)]
    ref = table(ov, sa, sf, ta, tf, along=q)
    assert ref.stats["rounds"] == (1, 1)
    monkeypatch.setattr(mm, "_EST_ENTRIES", 1)
    monkeypatch.setattr(mm, "_EST_NODES", 1)
    res = table(ov, sa, sf, ta, tf, along=q)
    assert res.stats["rounds"][0] > 1 and res.stats["rounds"][1] > 1
    np.testing.assert_array_equal(res.cost, ref.cost)
    np.testing.assert_array_equal(res.src_option, ref.src_option)
    np.testing.assert_array_equal(res.dst_option, ref.dst_option)
    np.testing.assert_allclose(res.along[0], ref.along[0], rtol=1e-12)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"src_arcs": np.array([1, 2])}, ValueError, "src_arcs must be 2-D"),
    ({"src_frac": np.zeros((1, 3))}, ValueError, "src_frac has shape"),
    ({"dst_arcs": np.array([[0, 5]])}, IndexError, r"dst_arcs\[0, 1\] = 5"),
    ({"dst_arcs": np.array([[-2, 1]])}, IndexError, r"dst_arcs\[0, 0\] = -2"),
    ({"src_arcs": np.array([[0.0, 1.0]])}, TypeError, "src_arcs must be integers"),
    ({"src_frac": np.array([[0.5, np.nan]])}, ValueError, r"src_frac\[0, 1\] = nan \(arc 1\)"),
    ({"dst_frac": np.array([[1.5, 0.0]])}, ValueError, r"dst_frac\[0, 0\] = 1.5 \(arc 2\)"),
    ({"along": [(np.ones(4), None)]}, ValueError, r"along\[0\] per_arc has shape \(4,\)"),
    ({"along": [(np.ones(5), np.ones(2))]}, ValueError, r"along\[0\] per_turn has shape \(2,\)"),
    ({"along": [(np.r_[1.0, np.inf, 1, 1, 1], None)]}, ValueError, r"along\[0\] per_arc\[1\] = inf"),
    ({"along": [np.ones(5)]}, ValueError, r"along\[0\] must be a pair"),
])
def test_bad_input_is_named(kwargs, error, match):
    g, ov = _ring()
    args = {"src_arcs": np.array([[0, 1]]), "src_frac": np.array([[0.5, 0.5]]), "dst_arcs": np.array([[2, -1]]),
            "dst_frac": np.array([[0.5, 0.0]]), "along": ()}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        table(ov, args["src_arcs"], args["src_frac"], args["dst_arcs"], args["dst_frac"], along=args["along"])


def test_not_customized():
    g, _ = _ring()
    ov = Overlay.build(g, Partition(np.array([[0, 0, 1, 1, 2, 2]]), (2,), "manual", topology_fingerprint(g)))
    with pytest.raises(RuntimeError, match="not customized"):
        table(ov, np.array([[0]]), np.array([[0.5]]), np.array([[1]]), np.array([[0.5]]))


# ------------------------------------------------------------------------------------------ Monaco
@pytest.fixture(scope="module")
def monaco():
    g = gpuroute.datasets.load("monaco")
    return g, Overlay.build(g, Partition.build(g, cell_sizes=(64, 512, 4096), method="inertial"))


def test_monaco_equals_the_routes_and_follows_traffic(monaco):
    """Restrictions and U-turn penalties: every cell is the route's cost between the same points, before and
    after a traffic update; a table on the old state (a snapshot read before the update) stays the old one."""
    g, ov = monaco
    ov.customize("time-uturn")
    rng = np.random.default_rng(1)
    sa, sf = random_options(g, rng, 12)
    ta, tf = random_options(g, rng, 12)
    _same_arcs(sa, sf, ta, tf, rng, 4)
    router = TrafficRouter(g, ov)
    length = (g.weight("distance").astype(np.float64), None)
    zero = np.zeros(ov.turns.out_arc.size)
    before = table(ov, sa, sf, ta, tf, along=[length])
    cost, sums = _route_table(router, sa, sf, ta, tf, [(length[0], zero)])
    np.testing.assert_array_equal(before.cost, cost)
    np.testing.assert_allclose(before.along[0], sums[0], rtol=1e-9)
    assert before.same_arc.any()
    old = ov._state
    # traffic: the arcs of half the routes take three times as long
    arcs = np.unique(np.concatenate([router.plan(_leg(sa[s], sf[s], ta[s], tf[s]), False)[0][0][2].arcs
                                     for s in range(4, 10)]))
    ov.update(arcs, 3 * ov.arc_cost[arcs])
    after = table(ov, sa, sf, ta, tf)
    np.testing.assert_array_equal(after.cost, _route_table(router, sa, sf, ta, tf)[0])
    assert (after.cost > before.cost + 1).sum() >= 6
    assert after.metric is ov.metric and after.metric is not before.metric
    again = table(ov, sa, sf, ta, tf, state=old)
    np.testing.assert_array_equal(again.cost, before.cost)
    assert again.metric is before.metric


@pytest.fixture(scope="module")
def car_lua():
    pytest.importorskip("lupa", reason="lupa (pip install 'gpuroute[lua]') runs the Lua profiles")
    pytest.importorskip("osmium")
    lua = osrm_profiles_dir(osrm_bin_dir(required=False)) / "car.lua"  # skips where OSRM is absent
    from gpuroute.io.osm import load_osm
    from gpuroute.pipeline.customize import profile_metric

    g = load_osm(ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf", profile=lua, progress=False)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(64, 1024), method="inertial"))
    ov.customize(profile_metric(g, "weight", turns=ov.turns))
    return g, ov


def test_monaco_car_lua_weights_with_durations_and_distances_along(car_lua):
    """OSRM's car.lua: the table routes by ``routability`` (weights with turn weights) and reports the
    durations (segment + turn durations) and distances of the weight-optimal paths, as the routes do."""
    g, ov = car_lua
    rng = np.random.default_rng(2)
    sa, sf = random_options(g, rng, 12)
    ta, tf = random_options(g, rng, 12)
    _same_arcs(sa, sf, ta, tf, rng, 4)
    tc = g.turn_costs
    dur = (g.weight("travel_time").astype(np.float64), np.maximum(tc.duration, 0).astype(np.float64))
    dist = (np.asarray(g.arc_attrs["length_m"], np.float64), np.zeros(ov.turns.out_arc.size))
    weight = (g.weight("weight").astype(np.float64), np.maximum(tc.weight, 0).astype(np.float64))
    res = table(ov, sa, sf, ta, tf, along=[dur, dist, weight])
    cost, sums = _route_table(TrafficRouter(g, ov), sa, sf, ta, tf, [dur, dist])
    assert ov.metric.name == "routability" and np.isfinite(cost).any()
    np.testing.assert_array_equal(res.cost, cost)
    np.testing.assert_allclose(res.along[0], sums[0], rtol=1e-9)
    np.testing.assert_allclose(res.along[1], sums[1], rtol=1e-9)
    np.testing.assert_allclose(res.along[2], res.cost, rtol=1e-9)


# ------------------------------------------------------------------------------------------ per-request fixed cost
def _check_along(ov, res, sa, sf, ta, tf, full):
    """Every reached cell's quantities are their sums along the oracle's path of the chosen options."""
    for s, t in zip(*np.nonzero(np.isfinite(res.cost)), strict=True):
        j, k = res.src_option[s, t], res.dst_option[s, t]
        a, fa, b, fb = sa[s, j], sf[s, j], ta[t, k], tf[t, k]
        want = ([(fb - fa) * qa[a] for qa, _ in full] if res.same_arc[s, t]
                else _oracle_path_sums(ov, a, fa, b, fb, full))
        np.testing.assert_allclose([x[s, t] for x in res.along], want, rtol=1e-9, atol=1e-6, err_msg=f"cell {s}, {t}")


@pytest.mark.parametrize("variant", ["trees", "no trees", "mezzanine"])
def test_clique_quantities_are_unpacked_once_per_state(variant, monkeypatch):
    """Issue 20: a small table unpacked the clique edges of its paths again at every request. Now a clique
    edge's quantities are unpacked once per overlay state (customization) and ``along`` arrays: a second
    table on the same state unpacks none and gives the same sums, a table on other points only the edges not
    seen yet; after ``overlay.update`` (traffic: a new state) they are unpacked again, from the new state's
    trees, and every sum is the oracle path's of its state; a table on the old state reads the old values.
    ``along`` that is not cached (lists, not arrays) is unpacked per table, as before."""
    if variant == "no trees":
        monkeypatch.setattr(config, "CRP_KEEP_TREES", False)
    g, ov, rng = _overlay(31, n=60, max_cost=10**6, mezzanine={3: (2,)} if variant == "mezzanine" else None)
    sa, sf = random_options(g, rng, 10)
    ta, tf = random_options(g, rng, 9)
    _same_arcs(sa, sf, ta, tf, rng, 2)
    tr = ov.turns
    qs = [(rng.random(g.n_arcs), rng.random(tr.out_arc.size)), (rng.random(g.n_arcs) * 100, None)]
    full = [(qa, np.zeros(tr.out_arc.size) if qt is None else qt) for qa, qt in qs]
    first = table(ov, sa, sf, ta, tf, along=qs)
    assert first.stats["clique_edges"] > 0
    assert first.stats["clique_edges_unpacked"] == first.stats["clique_edges"]
    _check_along(ov, first, sa, sf, ta, tf, full)
    second = table(ov, sa, sf, ta, tf, along=qs)
    assert second.stats["clique_edges_unpacked"] == 0 and second.stats["clique_edges"] == first.stats["clique_edges"]
    for x, y in zip(second.along, first.along, strict=True):
        np.testing.assert_array_equal(x, y)
    sb, sfb = random_options(g, rng, 8)
    other = table(ov, sb, sfb, sa, sf, along=qs)
    assert other.stats["clique_edges_unpacked"] <= other.stats["clique_edges"]
    _check_along(ov, other, sb, sfb, sa, sf, full)
    old = ov._state
    arcs = np.unique(rng.integers(0, g.n_arcs, g.n_arcs // 2))
    ov.update(arcs, rng.integers(1, 10**6, arcs.size))
    after = table(ov, sa, sf, ta, tf, along=qs)
    assert after.stats["clique_edges_unpacked"] == after.stats["clique_edges"] > 0
    assert not np.array_equal(after.cost, first.cost)
    _check_along(ov, after, sa, sf, ta, tf, full)
    again = table(ov, sa, sf, ta, tf, along=qs, state=old)
    assert again.stats["clique_edges_unpacked"] == 0
    for x, y in zip(again.along, first.along, strict=True):
        np.testing.assert_array_equal(x, y)
    lists = [(list(qa), None if qt is None else list(qt)) for qa, qt in qs]
    for _ in range(2):
        res = table(ov, sa, sf, ta, tf, along=lists)
        assert res.stats["clique_edges_unpacked"] == res.stats["clique_edges"]
        for x, y in zip(res.along, after.along, strict=True):
            np.testing.assert_array_equal(x, y)


def test_search_scratch_is_kept_between_tables_and_left_clean(monkeypatch):
    """Issue 20: the graph-sized search records (and tree node numbers, bucket offsets) were made per table,
    their first touch the larger part of a small table's cost. Now they are kept (``mm._SCRATCH``) and every
    search leaves them as it found them: tables of changing sizes, with chunks whose output filled (rounds
    again), equal the oracle, the next table takes the same scratch, whose records are unreached and tree
    numbers -1 after each table; with a budget of 0 bytes nothing is kept and the tables are the same."""
    g, ov, rng = _overlay(6)
    m = g.n_arcs
    made = []
    real = mm._Scratch

    def counting(*a):
        made.append(a)
        return real(*a)

    monkeypatch.setattr(mm, "_Scratch", counting)
    q = [(rng.random(m), None)]
    results = []
    for k, (S, T) in enumerate([(9, 11), (1, 1), (12, 3), (2, 14)]):
        if k == 2:  # room for one entry / node per item: rounds again
            monkeypatch.setattr(mm, "_EST_ENTRIES", 1)
            monkeypatch.setattr(mm, "_EST_NODES", 1)
        sa, sf = random_options(g, rng, S)
        ta, tf = random_options(g, rng, T)
        res = table(ov, sa, sf, ta, tf, along=q)
        np.testing.assert_allclose(res.cost, _oracle(ov, sa, sf, ta, tf), rtol=0, atol=1e-6)
        results.append((sa, sf, ta, tf, res))
        with mm._SCRATCH._lock:
            kept = [sc for sc in mm._SCRATCH._free if sc.m == m]
        assert kept
        for sc in kept:
            rec = sc.records.reshape(sc.rows, m, 8)
            assert (rec[:, :, 0] == gpuroute.graph.constants.INF).all() and (rec[:, :, 2] == -1).all()
            assert (sc.nodes == -1).all()
    assert results[2][4].stats["rounds"][0] > 1
    assert len(made) <= 1  # at most the first table made one (another test's may be in the pool)
    monkeypatch.setattr(config, "CRP_TABLE_SCRATCH_KEEP_BYTES", 0)
    mm._SCRATCH.put(mm._SCRATCH.get(m, 1))  # a put under the new budget forgets every kept one
    with mm._SCRATCH._lock:
        assert not mm._SCRATCH._free
    for sa, sf, ta, tf, want in results:
        res = table(ov, sa, sf, ta, tf, along=q)
        np.testing.assert_array_equal(res.cost, want.cost)
        np.testing.assert_array_equal(res.along[0], want.along[0])
    with mm._SCRATCH._lock:
        assert not mm._SCRATCH._free


def test_monaco_car_lua_durations_after_traffic_with_kept_clique_durations(car_lua):
    """OSRM's car.lua (weight ``routability`` != duration): the durations and distances of the weight-optimal
    paths, now read from the per-state clique values, equal the routes' before and after a traffic update of
    the weights (a new state: its clique values made again), on repeated tables (the second unpacks nothing)."""
    g, ov = car_lua
    from gpuroute.pipeline.customize import profile_metric

    rng = np.random.default_rng(12)
    sa, sf = random_options(g, rng, 10)
    ta, tf = random_options(g, rng, 10)
    tc = g.turn_costs
    dur = (g.weight("travel_time").astype(np.float64), np.maximum(tc.duration, 0).astype(np.float64))
    dist = (np.asarray(g.arc_attrs["length_m"], np.float64), np.zeros(ov.turns.out_arc.size))
    router = TrafficRouter(g, ov)
    try:
        for step in range(2):
            if step == 1:  # traffic: the arcs of some routes take ~five times the weight (odd: few equal-weight ties)
                legs = [router.plan(_leg(sa[s], sf[s], ta[s], tf[s]), False)[0][0][2] for s in range(5)]
                arcs = np.unique(np.concatenate([p.arcs for p in legs if p is not None]))
                ov.update(arcs, 5 * ov.arc_cost[arcs] + rng.integers(1, 97, arcs.size))
            res = table(ov, sa, sf, ta, tf, along=[dur, dist])
            assert res.stats["clique_edges_unpacked"] == res.stats["clique_edges"] > 0
            cost, sums = _route_table(router, sa, sf, ta, tf, [dur, dist])
            np.testing.assert_array_equal(res.cost, cost)
            np.testing.assert_allclose(res.along[0], sums[0], rtol=1e-9)
            np.testing.assert_allclose(res.along[1], sums[1], rtol=1e-9)
            res2 = table(ov, sa, sf, ta, tf, along=[dur, dist])
            assert res2.stats["clique_edges_unpacked"] == 0
            for x, y in zip(res2.along, res.along, strict=True):
                np.testing.assert_array_equal(x, y)
    finally:
        ov.customize(profile_metric(g, "weight", turns=ov.turns))
