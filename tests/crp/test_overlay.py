"""Customizable Route Planning on the CPU: every query equals a naive turn-aware Dijkstra on the arc-based
graph (same restrictions, same penalties), after full customization and after traffic updates; paths are
real and cost what they claim; bad input changes nothing."""
import os

import numpy as np
import pytest
from crp_oracle import PEN, assert_all_pairs_exact, assert_path_ok, oracle, with_restrictions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive import random_road_graph

import gpuroute
from gpuroute import INF, Overlay, Partition, RoadGraph
from gpuroute.backend import GPUUnavailableError, probe_gpu
from gpuroute.crp import FORBIDDEN, KIND_NAMES


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("method", ["kahip", "inertial"])
def test_random_graphs_exact_with_turn_costs(seed, method):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, 60, one_way=0.3)
    g = with_restrictions(g, rng, 12)
    part = Partition.build(g, cell_sizes=(6, 18, 40), method=method, seed=seed)
    ov = Overlay.build(g, part)
    for metric in ("distance", (g.weight("travel_time"), PEN)):
        ov.customize(metric)
        assert_all_pairs_exact(ov, sources=range(0, 60, 3))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), n=st.integers(2, 30), levels=st.integers(1, 3), k=st.integers(0, 10))
def test_hypothesis_exact(seed, n, levels, k):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=float(rng.choice([0.0, 0.3, 0.8])))
    g = with_restrictions(g, rng, k)
    sizes = (3, 8, 20)[:levels]
    ov = Overlay.build(g, Partition.build(g, cell_sizes=sizes, seed=seed % 7))
    costs = rng.integers(1, 50, g.n_arcs)
    pen = {name: int(rng.integers(0, 30)) for name in ("straight", "left", "right", "uturn")}
    ov.customize((costs, pen))
    assert_all_pairs_exact(ov)


@pytest.fixture(scope="module")
def monaco():
    g = gpuroute.datasets.load("monaco")
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(64, 512, 4096)))
    return g, ov


def test_monaco_restrictions_and_uturn_penalty(monaco):
    g, ov = monaco
    assert g.turns is not None and g.turns.in_arc.size > 0
    ov.customize("time-uturn")
    assert int(ov.turns.counts()["restricted"]) > 0
    rng = np.random.default_rng(3)
    for s in rng.integers(0, g.n_nodes, 6):
        exp = oracle(ov, int(s))
        targets = rng.integers(0, g.n_nodes, 300)
        np.testing.assert_array_equal(ov.distances(np.full(targets.size, s), targets), exp[targets])
        for t in targets[:15]:
            res = ov.route(int(s), int(t))
            assert res.distance == exp[t]
            assert_path_ok(ov, int(s), int(t), res)


def test_monaco_without_turn_costs_equals_node_dijkstra_where_no_restriction_binds(monaco):
    """With the plain travel time the overlay is never shorter than Dijkstra on nodes (restrictions only
    remove paths), and equal for most pairs."""
    g, ov = monaco
    ov.customize("time")
    from naive import scipy_dijkstra

    rng = np.random.default_rng(5)
    src = rng.integers(0, g.n_nodes, 4)
    d = scipy_dijkstra(g, src, weight="travel_time")
    for i, s in enumerate(src):
        got = ov.distances(np.full(g.n_nodes, s), np.arange(g.n_nodes))
        assert (got >= d[i]).all()
        assert (got == d[i]).mean() > 0.9


def test_update_equals_full_customization_and_is_atomic(monaco):
    g, ov = monaco
    ov.customize("time-uturn")
    rng = np.random.default_rng(11)
    ids = rng.integers(0, g.n_arcs, 300)
    new = (ov.arc_cost[ids] * rng.integers(1, 6, ids.size)).astype(np.int64)
    before = (ov.arc_cost.copy(), ov.turn_cost.copy(), ov._state.clique.copy())
    info = ov.update(ids, new)
    assert sum(info["cells"]) > 0
    ref = Overlay.build(g, ov.partition)
    arc = before[0].copy()
    arc[ids] = new
    from gpuroute.crp.metric import UTURN_PENALTY_S

    pen = {"uturn": int(UTURN_PENALTY_S * 10)}
    ref.customize((arc, pen))
    np.testing.assert_array_equal(ov.arc_cost, ref.arc_cost)
    np.testing.assert_array_equal(ov.turn_cost, ref.turn_cost)
    np.testing.assert_array_equal(ov._state.clique, ref._state.clique)
    s = int(rng.integers(0, g.n_nodes))
    exp = oracle(ov, s)
    np.testing.assert_array_equal(ov.distances(np.full(g.n_nodes, s), np.arange(g.n_nodes)), exp)
    # bad updates change nothing
    state = ov._state
    with pytest.raises(IndexError, match=r"arc_ids\[1\] = -1"):
        ov.update([0, -1], [5, 5])
    with pytest.raises(IndexError, match="outside the arc range"):
        ov.update([g.n_arcs], [5])
    with pytest.raises(ValueError, match=r"costs\[1\]"):
        ov.update([0, 1], [5, 0])
    with pytest.raises(ValueError, match="not a finite integer"):
        ov.update([0, 1], [5.0, np.nan])
    with pytest.raises(ValueError, match="one length"):
        ov.update([0, 1], [5])
    assert ov._state is state


def test_single_level_and_trivial_queries():
    rng = np.random.default_rng(2)
    g, _ = random_road_graph(rng, 25)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(5,)))
    with pytest.raises(RuntimeError, match="customize"):
        ov.route(0, 1)
    ov.customize()
    assert ov.route(3, 3).distance == 0 and list(ov.route(3, 3).nodes) == [3]
    assert ov.distances([4], [4])[0] == 0
    assert_all_pairs_exact(ov)
    with pytest.raises(IndexError, match=r"targets\[1\] = 25"):
        ov.distances([0, 1], [1, 25])
    with pytest.raises(IndexError, match="source"):
        ov.route(-1, 2)
    with pytest.raises(ValueError, match="pair up"):
        ov.distances([0, 1], [1])


def test_unreachable_gives_named_inf():
    # two one-way components: 0 -> 1 -> 2, and 3 <-> 4
    g = RoadGraph.from_arcs(5, [0, 1, 3, 4], [1, 2, 4, 3], {"distance": [2, 3, 4, 5]},
                            coords=np.array([[0, 0], [1, 0], [2, 0], [5, 5], [6, 5]], float) * 1e-3 + 10)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(2, 4)))
    ov.customize()
    assert ov.route(0, 2).distance == 5
    r = ov.route(2, 0)
    assert r.distance == INF and r.nodes.size == 0
    assert ov.distances([0, 0], [3, 2]).tolist() == [INF, 5]


def test_customize_errors_keep_the_metric(monaco):
    g, ov = monaco
    ov.customize("time")
    state = ov._state
    with pytest.raises(ValueError):
        ov.customize("no-such-metric")
    with pytest.raises(ValueError):
        ov.customize(np.zeros(g.n_arcs, np.int64))
    with pytest.raises(ValueError, match="device"):
        ov.customize("time", device="tpu")
    if not probe_gpu()[0]:
        with pytest.raises(GPUUnavailableError, match="gpu"):
            ov.customize("time", device="gpu")
    assert ov._state is state


def test_save_load_round_trip_and_refusals(monaco, tmp_path):
    g, ov = monaco
    ov.customize("time-uturn")
    d = tmp_path / "ov"
    ov.save(d)
    back = Overlay.load(d, g)
    np.testing.assert_array_equal(back._state.clique, ov._state.clique)
    back2 = Overlay.load(d)  # the graph reopened from the manifest (shipped dataset name)
    rng = np.random.default_rng(0)
    s, t = rng.integers(0, g.n_nodes, 50), rng.integers(0, g.n_nodes, 50)
    np.testing.assert_array_equal(back2.distances(s, t), ov.distances(s, t))
    other, _ = random_road_graph(rng, 30)
    with pytest.raises(ValueError, match="another graph"):
        Overlay.load(d, other)
    # a truncated file is refused (the overlay's own files are in overlay/: Overlay.save writes the layout of
    # gpuroute partition/customize)
    path = d / "overlay" / "clique.npy"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="clique.npy"):
        Overlay.load(d, g)
    os.remove(path)
    with pytest.raises(ValueError, match="missing"):
        Overlay.load(d, g)
    with pytest.raises(ValueError, match="missing"):
        Overlay.load(d / "overlay", g)
    with pytest.raises(ValueError, match="not a saved overlay"):
        Overlay.load(tmp_path / "nothing-here", g)


def test_partition_of_another_graph_refused():
    rng = np.random.default_rng(4)
    g1, _ = random_road_graph(rng, 20)
    g2, _ = random_road_graph(rng, 20)
    p1 = Partition.build(g1, cell_sizes=(5,))
    with pytest.raises(ValueError):
        Overlay.build(g2, p1)
    with pytest.raises(TypeError, match="Partition"):
        Overlay(g1, np.zeros((1, 20), np.int32))


def test_kind_names_cover_penalty_keys():
    assert set(PEN) <= set(KIND_NAMES.values())


def test_route_between_phantom_arcs(monaco):
    """``OverlayQuery.route_arcs`` (segment snapping's phantom nodes) against scipy Dijkstra on the
    turn-expanded graph from the source arc, and the node query as the special case of arc sets."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra

    g, ov = monaco
    ov.customize("time-uturn")
    q = ov.query()
    tr = ov.turns
    ok = ov.turn_cost != FORBIDDEN
    A = sp.csr_matrix((ov.turn_cost[ok].astype(float), (tr.in_arc()[ok], tr.out_arc[ok])), shape=(g.n_arcs,) * 2)
    rng = np.random.default_rng(8)
    src = rng.integers(0, g.n_arcs, 12)
    D = dijkstra(A, indices=src)
    for i, a in enumerate(src):
        for b in rng.integers(0, g.n_arcs, 10):
            ca, cb = int(ov.arc_cost[a]) // 3, -(int(ov.arc_cost[b]) // 2)
            d, arcs = q.route_arcs([a], [ca], [b], [cb])
            exp = INF if not np.isfinite(D[i, b]) else ca + int(D[i, b]) + cb
            assert d == exp
            if d != INF:
                assert arcs[0] == a and arcs[-1] == b
                tid = tr.turn_index(arcs[:-1], arcs[1:])
                assert ca + int(ov.turn_cost[tid].sum()) + cb == d
    for s, t in rng.integers(0, g.n_nodes, (30, 2)):
        so = np.arange(g.first_out[s], g.first_out[s + 1])
        ti = g.rev_arc[g.rev_first_out[t]:g.rev_first_out[t + 1]]
        if so.size and ti.size and s != t:
            assert q.route_arcs(so, ov.arc_cost[so], ti, np.zeros(ti.size))[0] == ov.route(int(s), int(t)).distance
    with pytest.raises(IndexError, match="dst_arcs"):
        q.route_arcs([0], [0], [g.n_arcs], [0])


# ---------------------------------------------------------------------------------------------- issue 18, item 7
def test_one_name_one_layout(monaco, tmp_path, capsys):
    """``Overlay.load("monaco.crp")`` works on the directory ``gpuroute partition``/``customize`` write
    (before: "not a gpuroute-overlay manifest"), ``Overlay.save`` writes that same layout (so ``gpuroute
    route --overlay`` reads a Python-saved overlay), and the inner ``overlay/`` still loads as before."""
    from gpuroute.cli.main import main
    from gpuroute.pipeline.overlay_dir import check_overlay

    g, ov = monaco
    d = tmp_path / "monaco.crp"
    assert main(["partition", "monaco", "-o", str(d), "--cell-sizes", "64,512,4096"]) == 0
    assert main(["customize", str(d), "--metric", "time"]) == 0
    capsys.readouterr()
    rng = np.random.default_rng(11)
    s, t = rng.integers(0, g.n_nodes, 40), rng.integers(0, g.n_nodes, 40)
    a = Overlay.load(d, g)  # the stage directory itself
    b = Overlay.load(d)  # the graph reopened from the stage manifest
    inner = Overlay.load(d / "overlay", g)  # the inner directory, as before
    ref = Overlay.build(g, Partition.load(d / "partition", graph=g))
    ref.customize("time")
    want = ref.distances(s, t)
    for x in (a, b, inner):
        assert x.metric.name == "time"
        np.testing.assert_array_equal(x.distances(s, t), want)
    # Python: save then load under one name; the CLI routes on it too
    ov.customize("distance")
    p = tmp_path / "py.crp"
    ov.save(p)
    assert sorted(os.listdir(p)) == ["manifest.json", "overlay", "partition"]
    assert check_overlay(p)["metric"] == "distance" and check_overlay(p)["unit"] == g.units["distance"]
    back = Overlay.load(p)
    np.testing.assert_array_equal(back.distances(s, t), ov.distances(s, t))
    r = ov.route(int(s[0]), int(t[0]))
    lon, lat = g.coords[r.nodes[0]]
    lon2, lat2 = g.coords[r.nodes[-1]]
    assert main(["route", "--overlay", str(p), "--from", f"{lon},{lat}", "--to", f"{lon2},{lat2}", "--snapping",
                 "any", "--json"]) == 0
    fc = __import__("json").loads(capsys.readouterr().out)
    line = next(f for f in fc["features"] if f["geometry"]["type"] == "LineString")
    assert line["properties"]["distance"] == r.distance and line["properties"]["weight"] == "distance"
    assert main(["customize", str(p), "--metric", "time"]) == 0  # the next CLI stage takes it as its own
    assert Overlay.load(p).metric.name == "time"
    ov.save(p)  # saving again replaces it
    # anything else is never replaced
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not an overlay directory"):
        ov.save(other)
    assert (other / "keep.txt").read_text() == "x"


def test_route_unit_is_a_unit(monaco):
    """``Overlay.route(...).unit`` is the :class:`~gpuroute.Unit` ``shortest_path`` gives (it was the symbol)."""
    from gpuroute.graph.units import Unit
    from gpuroute.query import shortest_path

    g, ov = monaco
    for metric, weight in (("time", "travel_time"), ("distance", "distance")):
        ov.customize(metric)
        r = ov.route(5, 900)
        sp = shortest_path(g, 5, 900, weight=weight)
        assert isinstance(r.unit, Unit) and r.unit == sp.unit == g.units[weight]
        assert isinstance(ov.route(5, 5).unit, Unit)
    ov.customize((g.weight("travel_time") * 3, {"uturn": 7}))  # costs of its own: no graph unit fits
    assert isinstance(ov.route(5, 900).unit, Unit) and ov.route(5, 900).unit.scale is None
