"""open_graph picks the loader from a dataset name, a file ending, or a store directory."""
import gzip

import pytest

from gpuroute import datasets
from gpuroute.io import open_graph, save_graph


def test_by_name_and_unknown_name():
    g = open_graph("monaco")
    assert g.name == "monaco" and "travel_time" in g.weights
    with pytest.raises(FileNotFoundError) as ei:
        open_graph("atlantis")
    msg = str(ei.value)
    assert "\n" not in msg and all(n in msg for n in datasets.names())
    with pytest.raises(TypeError, match="takes no loader options"):
        open_graph("monaco", profile="car")


def test_by_suffix(tmp_path):
    (tmp_path / "a.gr.gz").write_bytes(gzip.compress(b"p sp 2 1\na 1 2 5\n"))
    (tmp_path / "b.graph").write_text("2 1\n2\n1\n")
    (tmp_path / "c.csv").write_text("source,target,distance\n1,2,5\n")
    g = open_graph(tmp_path / "a.gr.gz")
    assert g.meta["format"] == "dimacs9" and g.n_arcs == 1
    g = open_graph(str(tmp_path / "b.graph"))
    assert g.meta["format"] == "metis" and g.n_arcs == 2
    g = open_graph(str(tmp_path / "c.csv"))
    assert g.meta["format"] == "csv" and g.n_arcs == 1
    g = open_graph(datasets.path_of("monaco"), progress=False)
    assert g.meta["format"] == "osm"
    save_graph(g, tmp_path / "store")
    assert open_graph(tmp_path / "store").fingerprint() == g.fingerprint()


def test_unknown_suffix_and_plain_directory(tmp_path):
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(ValueError, match="unknown file type"):
        open_graph(tmp_path / "x.txt")
    with pytest.raises(FileNotFoundError, match="without manifest.json"):
        open_graph(tmp_path)
