"""open_graph: ``gpuroute.opener.open_graph`` takes a dataset name, a file or a store directory;
``gpuroute.io.open_graph`` takes files and store directories only, and ``gpuroute.io`` never imports
``gpuroute.datasets``."""
import ast
import gzip
from pathlib import Path

import pytest

import gpuroute.io
from gpuroute import datasets
from gpuroute.io import save_graph
from gpuroute.opener import open_graph

IO_DIR = Path(gpuroute.io.__file__).parent


def test_by_name_and_unknown_name():
    g = open_graph("monaco")
    assert g.name == "monaco" and "travel_time" in g.weights
    with pytest.raises(FileNotFoundError) as ei:
        open_graph("atlantis")
    msg = str(ei.value)
    assert "\n" not in msg and "'atlantis'" in msg and all(n in msg for n in datasets.names())
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


NET = "<NUMBER OF NODES> 3\n<NUMBER OF LINKS> 2\n<END OF METADATA>\n" \
      "~ init_node term_node capacity length free_flow_time b power speed toll link_type ;\n" \
      "1 2 900 0.5 1.25 0.15 4 25 0 1 ;\n2 3 900 1 2 0.15 4 25 0 1 ;\n"


@pytest.mark.parametrize("net_name, node_name", [("X_net.tntp", "X_node.tntp"), ("Y_net.tntp.gz", "Y_node.tntp.gz"),
                                                 ("plain.tntp", None), ("zipped.tntp.gz", None)])
def test_tntp_suffixes(tmp_path, net_name, node_name):
    """``_net.tntp[.gz]`` and ``.tntp[.gz]`` open with load_tntp (e21572d: 'unknown file type')."""
    def put(name, text):
        data = text.encode()
        (tmp_path / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)

    put(net_name, NET)
    if node_name:
        put(node_name, "node x y\n1 0 0\n2 10 0\n3 10 10\n")
    for opener in (open_graph, gpuroute.io.open_graph):
        g = opener(tmp_path / net_name)
        assert g.meta["format"] == "tntp" and g.n_nodes == 3 and g.n_arcs == 2
        assert g.weight_names == ["free_flow_time", "length"]
        assert (g.coords is not None) == (node_name is not None)
    g = open_graph(tmp_path / net_name, weights="length", node_path=None)
    assert g.weight_names == ["length"] and g.coords is None


def test_unknown_suffix_and_plain_directory(tmp_path):
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(ValueError, match="unknown file type"):
        open_graph(tmp_path / "x.txt")
    with pytest.raises(FileNotFoundError, match="without manifest.json"):
        open_graph(tmp_path)


def test_io_open_graph_takes_paths_only(tmp_path):
    """``gpuroute.io.open_graph`` no longer resolves dataset names: a name that is not a path is a
    FileNotFoundError with a one-line message naming it (e21572d loaded the dataset)."""
    with pytest.raises(FileNotFoundError) as ei:
        gpuroute.io.open_graph("monaco")
    msg = str(ei.value)
    assert "\n" not in msg and "'monaco'" in msg and "neither an existing file nor a saved graph directory" in msg
    with pytest.raises(FileNotFoundError, match="absent.gr"):
        gpuroute.io.open_graph(tmp_path / "absent.gr")


def test_existing_path_wins_over_a_dataset_name(tmp_path, monkeypatch):
    """A file or directory called like a dataset is opened as that path (as before the split)."""
    (tmp_path / "monaco").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="without manifest.json"):
        open_graph("monaco")


def _imported_modules(path):
    """Absolute names of every module a source file imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    pkg = "gpuroute.io"
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = pkg.rsplit(".", node.level - 1)[0] if node.level > 1 else pkg
                base = f"{parent}.{base}" if base else parent
            names += [base] + [f"{base}.{a.name}" for a in node.names]
    return names


def test_io_does_not_import_datasets():
    """io and datasets stop importing each other: datasets loads through io, io knows no datasets
    (e21572d: io/__init__.py imported gpuroute.datasets inside open_graph)."""
    files = sorted(IO_DIR.glob("*.py"))
    assert files
    for f in files:
        bad = [n for n in _imported_modules(f) if n == "gpuroute.datasets" or n.startswith("gpuroute.datasets.")]
        assert not bad, f"{f.name} imports {bad}"
