"""gpuroute.accessibility.aggregate and nearest_pois (CPU twin) against brute force (tests/naive.py: scipy
Dijkstra from every node, then pandana's definitions in NumPy): every type x decay x formulation on random
directed graphs, on the Monaco extract and on a sample of NY; nearest POIs exactly; several values per node;
a hierarchy as the index; frames in and out; the direction convention; bad input."""
from __future__ import annotations

import numpy as np
import pytest
from naive import aggregate_oracle, naive_ch, nearest_pois_oracle, random_road_graph, within_radius_oracle

import gpuroute
from gpuroute import INF, config
from gpuroute import accessibility as acc
from gpuroute.ch import ContractionHierarchy

RTOL = 1e-10  # float64 sums in another order than the oracle's


def assert_aggregates(got, want, type):
    if type in ("count", "min", "max"):
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-9)


def assert_nearest(got, want):
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def _random_case(seed, n=120, m=40):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.4)
    nodes = rng.integers(0, n, m)
    nodes[: m // 4] = nodes[m // 4: 2 * (m // 4)]  # several values at one node
    values = np.round(rng.normal(10, 5, m), 3)
    oracle = within_radius_oracle(g, 1e18)  # all distances: the radius is applied below
    dist = oracle(np.arange(n))
    reach = dist[dist < INF]
    radius = float(np.quantile(reach, 0.3)) + 0.5
    return g, nodes, values, radius, dist


@pytest.mark.parametrize("seed", [0, 1])
def test_random_graphs_every_type_decay_strategy(seed):
    g, nodes, values, radius, dist = _random_case(seed)
    d = np.where(dist[:, nodes] <= np.floor(radius), dist[:, nodes], INF)
    for type in acc.TYPES:
        for decay in acc.DECAY_NAMES:
            want = aggregate_oracle(d, values, radius, type, decay)
            for strategy in ("points", "nodes"):
                got = acc.aggregate(g, nodes, values, radius, type=type, decay=decay, device="cpu", strategy=strategy, unit="native")
                assert got.dtype == np.float64 and got.shape == (g.n_nodes,)
                assert_aggregates(got, want, type)
    for strategy in ("points", "nodes"):
        for k in (1, 3, 7):
            assert_nearest(acc.nearest_pois(g, nodes, radius, k, device="cpu", strategy=strategy, unit="native"),
                           nearest_pois_oracle(d, radius, k))


def test_direction_is_from_each_node():
    """One-way arcs: node v aggregates the values it can reach (d(v -> u)), not those that reach it."""
    g = gpuroute.RoadGraph.from_arcs(4, [0, 1, 3], [1, 2, 2], {"w": [1, 2, 1]})
    dist = within_radius_oracle(g, 3)(np.arange(4))
    for type in acc.TYPES:
        want = aggregate_oracle(dist[:, [2, 1]], [5.0, 7.0], 3, type, "flat")
        got = acc.aggregate(g, [2, 1], [5.0, 7.0], 3, type=type, device="cpu", unit="native")
        assert_aggregates(got, want, type)
    # node 2 reaches nothing but itself; node 3 reaches node 2 only
    assert acc.aggregate(g, [2, 1], [5.0, 7.0], 3, type="count", device="cpu", unit="native").tolist() == [2, 2, 1, 1]
    # the reverse direction would differ: d(u -> v) instead
    rev = aggregate_oracle(dist.T[:, [2, 1]], [5.0, 7.0], 3, "count", "flat")
    assert rev.tolist() != [2, 2, 1, 1]


def test_chunks_and_hierarchy_index(monkeypatch):
    """Private accumulators of several chunks merge to the one-chunk result; a hierarchy (with its graph) is
    an index too."""
    g, nodes, values, radius, dist = _random_case(5, n=90, m=30)
    rng = np.random.default_rng(5)
    ch = ContractionHierarchy(naive_ch(g, order=rng.permutation(g.n_nodes), core_from=70), graph=g,
                              weight=g.default_weight)
    d = np.where(dist[:, nodes] <= np.floor(radius), dist[:, nodes], INF)
    for chunks in (1, 4):
        monkeypatch.setattr(config, "ACCESS_CPU_CHUNKS", chunks)
        for type in ("sum", "std", "min"):
            assert_aggregates(acc.aggregate(ch, nodes, values, radius, type=type, decay="linear", device="cpu", unit="native"),
                              aggregate_oracle(d, values, radius, type, "linear"), type)
        assert_nearest(acc.nearest_pois(ch, nodes, radius, 4, device="cpu", unit="native"), nearest_pois_oracle(d, radius, 4))


@pytest.fixture(scope="module")
def monaco():
    return gpuroute.datasets.load("monaco")


def test_monaco(monaco):
    g = monaco
    rng = np.random.default_rng(11)
    nodes = rng.integers(0, g.n_nodes, 150)
    values = rng.uniform(0, 100, nodes.size)
    radius = 400.0  # metres
    dist = within_radius_oracle(g, radius, weight="distance")(nodes)
    for type in acc.TYPES:
        decay = {"sum": "exp", "mean": "linear"}.get(type, "flat")
        got = acc.aggregate(g, nodes, values, radius, type=type, decay=decay, weight="distance", device="cpu", unit="native")
        assert_aggregates(got, aggregate_oracle(dist, values, radius, type, decay), type)
    assert_nearest(acc.nearest_pois(g, nodes[:60], radius, 5, weight="distance", device="cpu", unit="native"),
                   nearest_pois_oracle(dist[:, :60], radius, 5))
    # the other formulation on the same data
    got = acc.aggregate(g, nodes, values, radius, type="sum", decay="linear", weight="distance", device="cpu",
                        strategy="nodes", unit="native")
    assert_aggregates(got, aggregate_oracle(dist, values, radius, "sum", "linear"), "sum")


def ny_sample(ny, lon=(-74.0, -73.9), lat=(40.65, 40.72)):
    """The subgraph of NY induced by the nodes in a box (Brooklyn, about 4,900 nodes)."""
    c = ny.coords
    keep = (c[:, 0] >= lon[0]) & (c[:, 0] <= lon[1]) & (c[:, 1] >= lat[0]) & (c[:, 1] <= lat[1])
    new = np.full(ny.n_nodes, -1)
    new[keep] = np.arange(int(keep.sum()))
    a = keep[ny.tail] & keep[ny.head]
    return gpuroute.RoadGraph.from_arcs(int(keep.sum()), new[ny.tail[a]], new[ny.head[a]],
                                        {"distance": ny.weight("distance")[a]}, units={"distance": ny.units["distance"]},
                                        coords=c[keep], name="ny-sample")


def test_ny_sample():
    g = ny_sample(gpuroute.datasets.load("ny"))
    assert 1000 < g.n_nodes < 10000
    rng = np.random.default_rng(2)
    nodes = rng.integers(0, g.n_nodes, 200)
    values = rng.integers(1, 50, nodes.size).astype(float)
    radius = 5000  # ~500 m in DIMACS units
    dist = within_radius_oracle(g, radius)(nodes)
    for type in ("sum", "mean", "count", "std", "max"):
        got = acc.aggregate(g, nodes, values, radius, type=type, decay="exponential" if type == "sum" else "flat",
                            device="cpu", unit="native")
        assert_aggregates(got, aggregate_oracle(dist, values, radius, type, "exp" if type == "sum" else "flat"), type)
    for strategy in ("points", "nodes"):
        assert_nearest(acc.nearest_pois(g, nodes, radius, 10, device="cpu", strategy=strategy, unit="native"),
                       nearest_pois_oracle(dist, radius, 10))


def test_frames_in_and_out(monaco):
    pd = pytest.importorskip("pandas")
    gpd = pytest.importorskip("geopandas")
    g = monaco
    rng = np.random.default_rng(4)
    ids = rng.integers(0, g.n_nodes, 25)
    lon, lat = g.coords[ids, 0] + 1e-6, g.coords[ids, 1] - 1e-6
    snapped = gpuroute.nearest_nodes(g, lon, lat)[0]
    df = pd.DataFrame({"lon": lon, "lat": lat, "jobs": rng.uniform(1, 9, ids.size)})
    want = acc.aggregate(g, snapped, df["jobs"].to_numpy(), 300, type="mean", weight="distance", device="cpu", unit="native")
    np.testing.assert_array_equal(acc.aggregate(g, df, "jobs", 300, type="mean", weight="distance", device="cpu", unit="native"), want)
    gdf = gpd.GeoDataFrame({"jobs": df["jobs"]}, geometry=gpd.points_from_xy(lon, lat), crs="EPSG:4326")
    out = acc.aggregate(g, gdf, "jobs", 300, type="mean", weight="distance", device="cpu", as_frame=True, unit="native")
    assert out.index.name == "node" and list(out.columns) == ["node_id", "mean"]
    np.testing.assert_array_equal(out["mean"].to_numpy(), want)
    np.testing.assert_array_equal(out["node_id"].to_numpy(), g.node_ids)
    near = acc.nearest_pois(g, gdf, 300, 2, weight="distance", device="cpu", as_frame=True, max_distance=-1, unit="native")
    d, i = acc.nearest_pois(g, snapped, 300, 2, weight="distance", device="cpu", max_distance=-1, unit="native")
    assert list(near.columns) == ["node_id", 1, 2, "poi1", "poi2"]
    np.testing.assert_array_equal(near[[1, 2]].to_numpy(), d)
    np.testing.assert_array_equal(near[["poi1", "poi2"]].to_numpy(), i)
    assert (d[i == acc.NO_POI] == -1).all()


def test_empty_values_and_fills():
    g = gpuroute.RoadGraph.from_arcs(3, [0, 1], [1, 0], {"w": [4, 4]})  # node 2 is isolated
    for type in acc.TYPES:
        got = acc.aggregate(g, [0], [3.0], 10, type=type, device="cpu", unit="native")
        assert got[2] == acc.EMPTY[type]
        assert np.isnan(acc.aggregate(g, [0], [3.0], 10, type=type, device="cpu", empty=np.nan, unit="native")[2])
    assert acc.aggregate(g, [], [], 10, type="count", device="cpu", unit="native").tolist() == [0, 0, 0]
    d, i = acc.nearest_pois(g, [0], 10, 2, device="cpu", unit="native")
    assert d.tolist() == [[0, 10], [4, 10], [10, 10]] and i.tolist() == [[0, -1], [0, -1], [-1, -1]]


@pytest.mark.parametrize("call, exc, words", [
    (lambda g: acc.aggregate(g, [0], [1.0], -1, unit="native"), ValueError, "radius"),
    (lambda g: acc.aggregate(g, [0], [1.0], float("nan"), unit="native"), ValueError, "radius"),
    (lambda g: acc.aggregate(g, [0], [1.0], 5, type="median", unit="native"), ValueError, "type"),
    (lambda g: acc.aggregate(g, [0], [1.0], 5, decay="gauss", unit="native"), ValueError, "decay"),
    (lambda g: acc.aggregate(g, [0], [1.0], 0, decay="linear", unit="native"), ValueError, "radius > 0"),
    (lambda g: acc.aggregate(g, [0, 9], [1.0, 2.0], 5, unit="native"), IndexError, "node_ids[1] = 9"),
    (lambda g: acc.aggregate(g, [0, -1], [1.0, 2.0], 5, unit="native"), IndexError, "node_ids[1] = -1"),
    (lambda g: acc.aggregate(g, [0], [1.0, 2.0], 5, unit="native"), ValueError, "one number per point"),
    (lambda g: acc.aggregate(g, [0], [np.nan], 5, unit="native"), ValueError, "values[0]"),
    (lambda g: acc.aggregate(g, [0.5], [1.0], 5, unit="native"), TypeError, "integer"),
    (lambda g: acc.aggregate(g, [0], [1.0], 5, strategy="fast", unit="native"), ValueError, "strategy"),
    (lambda g: acc.aggregate("ny", [0], [1.0], 5, unit="native"), TypeError, "index"),
    (lambda g: acc.nearest_pois(g, [0], 5, 0, unit="native"), ValueError, "k must be >= 1"),
    (lambda g: acc.nearest_pois(g, [0], 5, 1.5, unit="native"), TypeError, "k must be an integer"),
    (lambda g: acc.nearest_pois(g, [3], 5, 2, unit="native"), IndexError, "poi_node_ids[0] = 3"),
    (lambda g: acc.nearest_pois(g, [0], -2, 2, unit="native"), ValueError, "radius"),
])
def test_bad_input(call, exc, words):
    g = gpuroute.RoadGraph.from_arcs(3, [0, 1], [1, 2], {"w": [1, 1]})
    with pytest.raises(exc, match=words.replace("[", r"\[").replace("]", r"\]").replace(">", ">").replace("+", r"\+")):
        call(g)


def test_weight_of_a_hierarchy_must_match():
    rng = np.random.default_rng(0)
    g, _ = random_road_graph(rng, 20)
    ch = ContractionHierarchy(naive_ch(g), graph=g, weight="distance")
    with pytest.raises(ValueError, match="differs from the hierarchy"):
        acc.aggregate(ch, [0], [1.0], 5, weight="travel_time", device="cpu", unit="native")
    loaded = ContractionHierarchy(ch.h, graph=None, weight="distance")
    with pytest.raises(ValueError, match="loaded without it"):
        acc.aggregate(loaded, [0], [1.0], 5, device="cpu", unit="native")
