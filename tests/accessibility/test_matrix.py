"""Many origins: travel_time_matrix (long DataFrames, streamed blocks, Parquet per block) against scipy
Dijkstra; isochrones of many origins against the engine's one-origin isochrones; the PNGs of the plots."""
from __future__ import annotations

import numpy as np
import pytest
from naive import naive_ch, random_road_graph, scipy_dijkstra

import gpuroute
from gpuroute import INF
from gpuroute import accessibility as acc
from gpuroute.ch import ContractionHierarchy

pd = pytest.importorskip("pandas")


def assert_long_matrix(df, want, from_ids, to_ids, factor=1.0):
    assert list(df.columns) == ["from_id", "to_id", "travel_time"]
    assert len(df) == want.size
    np.testing.assert_array_equal(df["from_id"].to_numpy(), np.repeat(from_ids, len(to_ids)))
    np.testing.assert_array_equal(df["to_id"].to_numpy(), np.tile(to_ids, len(from_ids)))
    t = df["travel_time"].to_numpy().reshape(want.shape)
    unreachable = want == INF
    assert np.isnan(t[unreachable]).all()
    np.testing.assert_allclose(t[~unreachable], want[~unreachable] * factor, rtol=1e-12)


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(8)
    g, _ = random_road_graph(rng, 70, one_way=0.5)
    ch = ContractionHierarchy(naive_ch(g, order=rng.permutation(70), core_from=50), graph=g, weight="distance")
    return g, ch, scipy_dijkstra(g, np.arange(70))


@pytest.mark.parametrize("index", ["graph", "ch"])
def test_matrix_blocks_equal_dijkstra(case, index):
    g, ch, D = case
    ix = g if index == "graph" else ch
    o, d = np.array([3, 9, 9, 40, 2, 69, 0]), np.array([1, 5, 44, 3])
    want = D[o][:, d]
    assert_long_matrix(acc.travel_time_matrix(ix, o, d, device="cpu", block=3), want, o, d)
    blocks = list(acc.travel_time_blocks(ix, o, d, device="cpu", block=2))
    assert [len(b) for b in blocks] == [8, 8, 8, 4]
    assert_long_matrix(pd.concat(blocks, ignore_index=True), want, o, d)
    # destinations default to the origins; cutoff and dropna
    full = acc.travel_time_matrix(ix, o, device="cpu")
    assert_long_matrix(full, D[o][:, o], o, o)
    cut = float(np.median(want[want < INF]))
    kept = acc.travel_time_matrix(ix, o, d, device="cpu", cutoff=cut, dropna=True)
    assert (kept["travel_time"] <= cut).all() and len(kept) == int(((want <= cut) & (want < INF)).sum())


def test_matrix_frames_units_and_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    g = gpuroute.datasets.load("monaco")
    rng = np.random.default_rng(1)
    o_nodes, d_nodes = rng.integers(0, g.n_nodes, 6), rng.integers(0, g.n_nodes, 5)
    origins = pd.DataFrame({"id": [f"o{i}" for i in range(6)], "lon": g.coords[o_nodes, 0], "lat": g.coords[o_nodes, 1]})
    dests = pd.DataFrame({"lon": g.coords[d_nodes, 0], "lat": g.coords[d_nodes, 1]}, index=[10, 11, 12, 13, 14])
    snapped_o = gpuroute.nearest_nodes(g, origins["lon"], origins["lat"])[0]
    snapped_d = gpuroute.nearest_nodes(g, dests["lon"], dests["lat"])[0]
    want = scipy_dijkstra(g, snapped_o, weight="travel_time")[:, snapped_d]
    df = acc.travel_time_matrix(g, origins, dests, device="cpu", unit="min")  # deciseconds -> minutes
    assert_long_matrix(df, want, origins["id"].to_numpy(), dests.index.to_numpy(), factor=0.1 / 60)
    paths = acc.travel_time_matrix(g, origins, dests, device="cpu", block=4, out=str(tmp_path / "tt"))
    assert [p.rsplit("/", 1)[1] for p in paths] == ["block_000000000.parquet", "block_000000004.parquet"]
    back = pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)
    assert_long_matrix(back, want, origins["id"].to_numpy(), dests.index.to_numpy())
    with pytest.raises(ValueError, match="unit"):
        acc.travel_time_matrix(g, [0], [1], unit="furlongs")
    with pytest.raises(ValueError, match="needs a length weight"):
        acc.travel_time_matrix(g, [0], [1], unit="km", device="cpu")
    with pytest.raises(ValueError, match="block"):
        acc.travel_time_matrix(g, [0], [1], block=0, device="cpu")


def test_isochrones_of_many_origins():
    pytest.importorskip("osmium")
    pytest.importorskip("contourpy")
    shapely = pytest.importorskip("shapely")
    from shapely.geometry import shape

    from gpuroute.engine import Engine, EngineError

    e = Engine.open("monaco")
    origins = [(7.4282, 43.7396), (7.4168, 43.7283)]
    gdf = acc.isochrones(e, origins, [120, 300], ids=["casino", "fontvieille"])
    assert list(gdf.columns) == ["origin_id", "contour", "metric", "geometry"]
    assert gdf["origin_id"].tolist() == ["casino", "casino", "fontvieille", "fontvieille"]
    for i, coord in enumerate(origins):
        fc = e.isochrone(coord, [120, 300])
        for j, feat in enumerate(fc["features"]):
            row = gdf.iloc[2 * i + j]
            assert row["contour"] == feat["properties"]["contour"]
            assert shapely.equals(row["geometry"], shape(feat["geometry"]))
    with pytest.raises(EngineError, match="origin 1"):
        acc.isochrones(e, [(7.4282, 43.7396), (7.43, 95.0)], [120])


def test_plots(tmp_path):
    import matplotlib.image

    rng = np.random.default_rng(0)
    g, _ = random_road_graph(rng, 50)
    values = rng.uniform(0, 5, g.n_nodes)
    values[:5] = -1
    for max_segments in (10**6, 10):  # arcs, then dots
        p = acc.accessibility_map(g, values, tmp_path / f"map{max_segments}.png", missing=-1, max_segments=max_segments)
        rgb = (matplotlib.image.imread(p)[..., :3] * 255).astype(np.int64)
        assert np.unique(rgb[..., 0] * 65536 + rgb[..., 1] * 256 + rgb[..., 2]).size > 20  # colours, not a blank
    h = acc.travel_time_histogram(np.r_[rng.exponential(10, 500), np.nan], tmp_path / "hist.png", unit="min")
    assert matplotlib.image.imread(h).shape[0] > 100
    with pytest.raises(ValueError, match="one number per node"):
        acc.accessibility_map(g, values[:3], tmp_path / "bad.png")
