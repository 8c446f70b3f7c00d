"""``gpuroute accessibility`` (called as ``main([...])``) on the shipped Monaco extract: its saved results
equal the library's (themselves checked against brute force in test_aggregate.py), POIs as node ids or
LON,LAT points, radius suffixes, the map; and ``gpuroute table --scheduler`` over an in-process Dask
cluster equals the hierarchy's table, with its histogram."""
from __future__ import annotations

import numpy as np
import pytest
from naive import naive_ch, random_road_graph

import gpuroute
from gpuroute import accessibility as acc
from gpuroute.cli.main import main

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def monaco():
    return gpuroute.datasets.load("monaco")


def test_accessibility_command(monaco, tmp_path, capsys):
    g = monaco
    rng = np.random.default_rng(3)
    pois = rng.integers(0, g.n_nodes, 40)
    np.save(tmp_path / "pois.npy", pois)
    vals = rng.uniform(1, 9, pois.size)
    np.savetxt(tmp_path / "vals.txt", vals)
    out = tmp_path / "acc.csv"
    rc = main(["accessibility", "monaco", "--pois", str(tmp_path / "pois.npy"), "--values", str(tmp_path / "vals.txt"),
               "--radius", "0.5km", "--metric", "distance", "--type", "mean", "--decay", "linear", "--k", "3",
               "--device", "cpu", "--output", str(out), "--plot", str(tmp_path / "map.png")])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "500 m" in text and "nearest 3" in text
    df = pd.read_csv(out)
    want = acc.aggregate(g, pois, vals, 500, type="mean", decay="linear", weight="distance", device="cpu", unit="native")
    np.testing.assert_allclose(df["mean"].to_numpy(), want, rtol=1e-12)
    d, i = acc.nearest_pois(g, pois, 500, 3, weight="distance", device="cpu", unit="native")
    np.testing.assert_array_equal(df[["dist1", "dist2", "dist3"]].to_numpy(), d)
    np.testing.assert_array_equal(df[["poi1", "poi2", "poi3"]].to_numpy(), i)
    assert (tmp_path / "map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_accessibility_points_csv_and_npy_output(monaco, tmp_path, capsys):
    g = monaco
    ids = np.array([10, 2000, 9000])
    (tmp_path / "pois.csv").write_text("lon,lat\n" + "".join(f"{g.coords[v, 0]},{g.coords[v, 1]}\n" for v in ids))
    rc = main(["accessibility", "monaco", "--pois", str(tmp_path / "pois.csv"), "--radius", "3000",
               "--type", "count", "--device", "cpu", "--output", str(tmp_path / "c.npy")])
    assert rc == 0, capsys.readouterr()
    snapped = gpuroute.nearest_nodes(g, g.coords[ids, 0], g.coords[ids, 1])[0]
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"),
                                  acc.aggregate(g, snapped, None, 3000, type="count", device="cpu", unit="native"))


@pytest.mark.parametrize("args, words", [
    (["--radius", "-5"], "--radius"),
    (["--radius", "2 parsecs"], "--radius"),
    (["--radius", "10min", "--metric", "distance"], "not a time"),
    (["--radius", "100", "--k", "0"], "--k must be >= 1"),
    (["--radius", "100", "--values", "VALS"], "2 values for 3 POIs"),
])
def test_accessibility_bad_input(tmp_path, capsys, args, words):
    np.save(tmp_path / "p.npy", np.array([1, 2, 3]))
    np.save(tmp_path / "v.npy", np.array([1.0, 2.0]))
    args = [str(tmp_path / "v.npy") if a == "VALS" else a for a in args]
    rc = main(["accessibility", "monaco", "--pois", str(tmp_path / "p.npy"), "--device", "cpu", *args])
    err = capsys.readouterr().err
    assert rc == 2 and words in err, err


def test_table_over_dask_scheduler(tmp_path, capsys):
    pytest.importorskip("distributed.client")  # dask's package, not tests/distributed (tests/ is on sys.path)
    from distributed import LocalCluster

    from gpuroute.ch import ContractionHierarchy
    from gpuroute.ch.store import save_hierarchy
    from gpuroute.io import save_graph

    rng = np.random.default_rng(6)
    g, _ = random_road_graph(rng, 40)
    save_graph(g, tmp_path / "g")
    ch = ContractionHierarchy(naive_ch(g, order=rng.permutation(40), core_from=30), graph=g, weight="distance")
    save_hierarchy(ch, tmp_path / "g.ch")
    np.save(tmp_path / "s.npy", np.arange(0, 40, 3))
    np.save(tmp_path / "t.npy", np.arange(1, 40, 4))
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster:
        rc = main(["table", "--ch", str(tmp_path / "g.ch"), "--graph", str(tmp_path / "g"), "--sources",
                   str(tmp_path / "s.npy"), "--targets", str(tmp_path / "t.npy"), "--scheduler",
                   cluster.scheduler_address, "--block", "4", "--device", "cpu", "--output", str(tmp_path / "d.npy"),
                   "--plot", str(tmp_path / "h.png")])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "Dask worker" in text
    np.testing.assert_array_equal(np.load(tmp_path / "d.npy"), ch.table(np.arange(0, 40, 3), np.arange(1, 40, 4),
                                                                        device="cpu"))
    assert (tmp_path / "h.png").stat().st_size > 1000
