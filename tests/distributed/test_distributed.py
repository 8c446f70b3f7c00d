"""gpuroute.distributed on one in-process CPU ``distributed.LocalCluster`` (two workers, started once for the
module): tables equal ``ch.table`` exactly (gathered, or written per block as .npy / Parquet with a
manifest), aggregates and nearest POIs equal the single-process results; what is shipped to workers
survives pickling (as it must between processes); bad input."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from naive import naive_ch, random_road_graph

from gpuroute import accessibility as acc
from gpuroute import distributed as gd
from gpuroute.accessibility.index import AccessIndex
from gpuroute.ch import ContractionHierarchy

# "distributed.client": dask's package, not this tests/distributed folder (tests/ is on sys.path)
pytest.importorskip("distributed.client")
import distributed  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(21)
    g, _ = random_road_graph(rng, 90, one_way=0.4)
    ch = ContractionHierarchy(naive_ch(g, order=rng.permutation(90), core_from=75), graph=g, weight="distance")
    return g, ch, rng


def test_table_equals_single_process(client, case):
    g, ch, rng = case
    S, T = rng.integers(0, 90, 37), rng.integers(0, 90, 23)
    want = ch.table(S, T, device="cpu")
    for block in (1, 5, 100):
        got = gd.table(client, ch, S, T, block=block, device="cpu")
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(gd.table(client, ch, S, T, block=8, device="cpu", dtype="uint32"),
                                  ch.table(S, T, device="cpu", dtype="uint32"))
    assert gd.table(client, ch, [], T, device="cpu").shape == (0, 23)
    kept = gd.table(client, ch, S, T, block=6, device="cpu", gather=False)  # blocks left on the workers
    assert [lo for lo, _ in kept] == list(range(0, 37, 6))
    np.testing.assert_array_equal(np.concatenate(client.gather([f for _, f in kept])), want)
    # the hierarchy was scattered once for all these calls
    from gpuroute.distributed.api import _SCATTERED

    assert list(_SCATTERED[ch]) == [(client.id, "hierarchy")]


def test_table_written_per_block(client, case, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    g, ch, rng = case
    S, T = rng.integers(0, 90, 19), rng.integers(0, 90, 7)
    want = ch.table(S, T, device="cpu")
    recs = gd.table(client, ch, S, T, block=6, device="cpu", out=str(tmp_path / "npy"))
    assert [r["rows"] for r in recs] == [[0, 6], [6, 12], [12, 18], [18, 19]]
    np.testing.assert_array_equal(np.concatenate([np.load(r["path"]) for r in recs]), want)
    man = json.loads((tmp_path / "npy" / "manifest.json").read_text())
    assert man["shape"] == [19, 7] and len(man["blocks"]) == 4
    recs = gd.table(client, ch, S, T, block=6, device="cpu", out=str(tmp_path / "pq"), fmt="parquet")
    df = pd.concat([pd.read_parquet(r["path"]) for r in recs], ignore_index=True)
    np.testing.assert_array_equal(df["from_id"].to_numpy(), np.repeat(S, 7))
    np.testing.assert_array_equal(df["to_id"].to_numpy(), np.tile(T, 19))
    d = df["distance"].to_numpy().reshape(19, 7)
    reach = want < np.iinfo(np.int64).max
    np.testing.assert_array_equal(d[reach], want[reach])
    assert np.isnan(d[~reach]).all()


def test_accessibility_equals_single_process(client, case):
    g, ch, rng = case
    nodes = rng.integers(0, 90, 45)
    values = rng.normal(3, 2, nodes.size)
    radius = 2.5e4
    for index in (g, ch):
        for type in acc.TYPES:
            got = gd.aggregate(client, index, nodes, values, radius, type=type, decay="linear", block=7, device="cpu", unit="native")
            want = acc.aggregate(index, nodes, values, radius, type=type, decay="linear", device="cpu", unit="native")
            if type in ("count", "min", "max"):
                np.testing.assert_array_equal(got, want)
            else:
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        d, i = gd.nearest_pois(client, index, nodes, radius, 4, block=5, device="cpu", unit="native")
        wd, wi = acc.nearest_pois(index, nodes, radius, 4, device="cpu", unit="native")
        np.testing.assert_array_equal(d, wd)
        np.testing.assert_array_equal(i, wi)


def test_what_is_shipped_survives_pickling(case):
    g, ch, rng = case
    s = pickle.loads(pickle.dumps(gd.Shipped(ch)))
    S, T = np.arange(0, 90, 7), np.arange(0, 90, 5)
    np.testing.assert_array_equal(s.ch().table(S, T, device="cpu"), ch.table(S, T, device="cpu"))
    for index in (g, ch):
        ix = pickle.loads(pickle.dumps(AccessIndex(index)))
        np.testing.assert_array_equal(acc.aggregate(ix.graph, [3, 4], [1.0, 2.0], 3e4, type="count", device="cpu", unit="native"),
                                      acc.aggregate(index, [3, 4], [1.0, 2.0], 3e4, type="count", device="cpu", unit="native"))
        assert (ix.ch is None) == (index is g)


def test_bad_input(client, case, monkeypatch):
    import sys

    g, ch, rng = case
    with pytest.raises(IndexError, match=r"sources\[1\] = 90"):
        gd.table(client, ch, [0, 90], [1])
    with pytest.raises(ValueError, match="block must be >= 1"):
        gd.table(client, ch, [0, 1], [1], block=0)
    with pytest.raises(ValueError, match="fmt"):
        gd.table(client, ch, [0, 1], [1], fmt="csv")
    with pytest.raises(ValueError, match="radius"):
        gd.aggregate(client, g, [0], [1.0], -3, unit="native")
    with pytest.raises(ValueError, match="k must be"):
        gd.nearest_pois(client, g, [0], 3, 0, unit="native")
    with pytest.raises(ValueError, match="scheduler must be"), gd.connect(""):
        pass
    monkeypatch.setitem(sys.modules, "dask_cuda", None)  # as where dask-cuda is not installed
    with pytest.raises(ImportError, match="needs dask-cuda"), gd.connect("local-cuda"):
        pass
