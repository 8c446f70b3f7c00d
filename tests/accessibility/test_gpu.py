"""Accessibility on the GPU (both methods: bounded ball searches on the reverse graph, and blocks of PHAST
trees of the reverse hierarchy; folded by access.cu) against the CPU twin and brute force: every type and
decay, several blocks, chunks that overflow, PHAST passes, hierarchies with and without a core; nearest POIs
exactly; Monaco contracted on the GPU from a bare graph; the travel-time matrix and the
distributed table on the GPU.

Exactness: the CPU twin run as one chunk folds the points in the GPU's order with the same float64
operations (no fused multiply-add on either side), so sums with flat and linear decay, means and standard
deviations are equal bit for bit; with exponential decay only ``exp`` itself may differ in its last bit
(rtol 1e-13). Counts, min, max and nearest POIs are exact."""
from __future__ import annotations

import numpy as np
import pytest
from naive import aggregate_oracle, naive_ch, nearest_pois_oracle, random_road_graph, within_radius_oracle

import gpuroute
from gpuroute import INF, config
from gpuroute import accessibility as acc
from gpuroute.backend import gpu_available
from gpuroute.ch import ContractionHierarchy

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]


def assert_twins(gpu, cpu, decay):
    if decay == "exp":
        np.testing.assert_allclose(gpu, cpu, rtol=1e-13, atol=1e-13)
    else:
        np.testing.assert_array_equal(gpu, cpu)


def _case(seed, n=120, core_from=None):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.4)
    ch = ContractionHierarchy(naive_ch(g, order=rng.permutation(n), core_from=core_from), graph=g,
                              weight="distance")
    nodes = rng.integers(0, n, 50)
    nodes[:10] = nodes[10:20]  # several values at one node
    values = rng.normal(5, 3, nodes.size)
    dist = within_radius_oracle(g, 1e18)(np.arange(n))
    radius = float(np.quantile(dist[dist < INF], 0.3)) + 0.5
    return g, ch, nodes, values, radius, dist


@pytest.mark.parametrize("method, core_from", [("phast", None), ("phast", 95), ("phast", 0), ("ball", None)])
@pytest.mark.parametrize("seed", [0, 1])
def test_gpu_equals_cpu_twin_and_oracle(seed, method, core_from, monkeypatch):
    g, ch, nodes, values, radius, dist = _case(seed, core_from=core_from)
    n = g.n_nodes
    monkeypatch.setattr(config, "ACCESS_GPU_METHOD", method)
    monkeypatch.setattr(config, "ACCESS_GPU_BLOCK_ITEMS", 7 * n)  # phast: blocks of 7 point nodes
    monkeypatch.setattr(config, "CH_PHAST_BATCH_ITEMS", 3 * n)  # phast: passes of 3 sources inside a block
    monkeypatch.setattr(config, "ACCESS_GPU_BALL_BYTES", 3 * 20 * n)  # ball: 3 search blocks, many sources each
    monkeypatch.setattr(config, "ACCESS_GPU_BALL_ITEMS", n)  # ball: chunks overflow and run again, smaller
    monkeypatch.setattr(config, "ACCESS_GPU_THREADS", 32)  # several thread blocks
    monkeypatch.setattr(config, "ACCESS_CPU_CHUNKS", 1)  # the GPU's fold order
    d = np.where(dist[:, nodes] <= np.floor(radius), dist[:, nodes], INF)
    for type in acc.TYPES:
        for decay in acc.DECAY_NAMES:
            gpu = acc.aggregate(ch, nodes, values, radius, type=type, decay=decay, device="gpu", unit="native")
            cpu = acc.aggregate(ch, nodes, values, radius, type=type, decay=decay, device="cpu", strategy="points", unit="native")
            assert_twins(gpu, cpu, decay)
            want = aggregate_oracle(d, values, radius, type, decay)
            np.testing.assert_allclose(gpu, want, rtol=1e-10, atol=1e-9)
    for k in (1, 4):
        gd, gi = acc.nearest_pois(ch, nodes, radius, k, device="gpu", unit="native")
        cd, ci = acc.nearest_pois(ch, nodes, radius, k, device="cpu", unit="native")
        np.testing.assert_array_equal(gd, cd)
        np.testing.assert_array_equal(gi, ci)
        wd, wi = nearest_pois_oracle(d, radius, k)
        np.testing.assert_array_equal(gd, wd)
        np.testing.assert_array_equal(gi, wi)


@pytest.mark.parametrize("method", ["ball", "phast"])
def test_monaco_from_a_bare_graph(method, monkeypatch):
    """A graph index: searched as it is ("ball"), or contracted on the GPU once and kept on the graph."""
    monkeypatch.setattr(config, "ACCESS_GPU_METHOD", method)
    g = gpuroute.datasets.load("monaco")
    rng = np.random.default_rng(4)
    nodes = rng.integers(0, g.n_nodes, 300)
    values = rng.uniform(0, 10, nodes.size)
    radius = 400.0
    dist = within_radius_oracle(g, radius, weight="distance")(nodes)
    for type, decay in (("sum", "linear"), ("mean", "exp"), ("std", "flat"), ("count", "flat"), ("min", "flat")):
        got = acc.aggregate(g, nodes, values, radius, type=type, decay=decay, weight="distance", device="gpu", unit="native")
        np.testing.assert_allclose(got, aggregate_oracle(dist, values, radius, type, decay), rtol=1e-10, atol=1e-9)
    d, i = acc.nearest_pois(g, nodes, radius, 10, weight="distance", device="gpu", unit="native")
    wd, wi = nearest_pois_oracle(dist, radius, 10)
    np.testing.assert_array_equal(d, wd)
    np.testing.assert_array_equal(i, wi)
    assert (("access-ch", "distance") in g._derived) == (method == "phast")  # contracted once, kept


def test_matrix_and_distributed_table_on_the_gpu():
    g, ch, nodes, values, radius, dist = _case(3, core_from=100)
    o, t = np.arange(0, 120, 7), np.arange(3, 120, 5)
    df = acc.travel_time_matrix(ch, o, t, device="gpu", block=4)
    want = dist[o][:, t]
    got = df["travel_time"].to_numpy().reshape(want.shape)
    reach = want < INF
    np.testing.assert_array_equal(got[reach], want[reach])
    assert np.isnan(got[~reach]).all()
    pytest.importorskip("distributed.client")  # dask's package, not tests/distributed (tests/ is on sys.path)
    import distributed

    from gpuroute import distributed as gdist

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        np.testing.assert_array_equal(gdist.table(client, ch, o, t, block=5, device="gpu"), ch.table(o, t, device="cpu"))
        a = gdist.aggregate(client, ch, nodes, values, radius, type="count", block=9, device="gpu")
        np.testing.assert_array_equal(a, acc.aggregate(ch, nodes, values, radius, type="count", device="cpu", unit="native"))


def test_gpu_overflow_and_large_balls(monkeypatch):
    g = gpuroute.RoadGraph.from_arcs(4, [0, 1, 2], [1, 2, 3], {"w": [2**31 - 1] * 3})
    ch = ContractionHierarchy(naive_ch(g), graph=g, weight="w")
    monkeypatch.setattr(config, "ACCESS_GPU_METHOD", "phast")
    with pytest.raises(OverflowError):  # PHAST's 32-bit distances
        acc.aggregate(ch, [3], [1.0], 10, device="gpu", unit="native")
    monkeypatch.setattr(config, "ACCESS_GPU_METHOD", "ball")  # pruned at the radius (< 2^32 - 1): exact
    assert acc.aggregate(ch, [3], [1.0], 2**32 - 2, type="count", device="gpu", unit="native").tolist() == [0, 1, 1, 1]
    with pytest.raises(OverflowError, match="32-bit"):
        acc.aggregate(ch, [3], [1.0], 2**32, type="count", device="gpu", unit="native")
    monkeypatch.setattr(config, "ACCESS_GPU_BALL_ITEMS", 2)
    with pytest.raises(MemoryError, match="ACCESS_GPU_BALL_ITEMS"):
        acc.aggregate(ch, [3], [1.0], 2**32 - 2, type="count", device="gpu", unit="native")
