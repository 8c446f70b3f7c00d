"""Graph store: round trip, memory mapping, version/fingerprint checks, atomic writes."""
import json
import mmap
import os

import numpy as np
import pytest

from gpuroute.graph.errors import ParseError
from gpuroute.io import open_graph
from gpuroute.io import store as store_mod
from gpuroute.io.edgelist import from_edgelist
from gpuroute.io.store import MANIFEST, load_graph, read_manifest, save_graph


@pytest.fixture
def graph():
    return from_edgelist([10, 20, 20, 30], [20, 30, 10, 10], {"travel_time": [5, 6, 7, 8], "distance": [50, 60, 70, 80]},
                         units={"travel_time": "ds", "distance": "m"}, coords=[[7.0, 43.0], [7.1, 43.1], [7.2, 43.2]],
                         name="tiny", meta={"source": "unit test", "n": np.int64(3)})


def file_backed(a):
    b = a
    while b is not None:
        if isinstance(b, (np.memmap, mmap.mmap)):
            return True
        b = getattr(b, "base", None)
    return False


def assert_same(g, h):
    assert h.name == g.name
    assert h.fingerprint() == g.fingerprint()
    np.testing.assert_array_equal(h.first_out, g.first_out)
    np.testing.assert_array_equal(h.head, g.head)
    assert h.weight_names == g.weight_names
    for k in g.weights:
        np.testing.assert_array_equal(h.weights[k], g.weights[k])
    assert h.units == g.units
    np.testing.assert_array_equal(h.coords, g.coords)
    np.testing.assert_array_equal(h.node_ids, g.node_ids)
    assert h.coord_system == g.coord_system


def test_round_trip_mmap(graph, tmp_path):
    d = tmp_path / "g"
    out = save_graph(graph, d)
    assert out == str(d)
    h = load_graph(d)
    assert_same(graph, h)
    assert h.meta["source"] == "unit test" and h.meta["n"] == 3
    # int32/float64/int64 arrays saved in those dtypes stay memory-mapped through RoadGraph.__init__
    assert file_backed(h.head) and file_backed(h.coords) and file_backed(h.node_ids)
    assert all(file_backed(w) for w in h.weights.values())
    assert not h.head.flags.writeable
    h2 = load_graph(d, mmap=False, check_files=True)
    assert_same(graph, h2)
    assert not file_backed(h2.head)
    man = read_manifest(d)
    assert man["format"] == "gpuroute-graph" and man["version"] == 1
    assert man["fingerprint"] == graph.fingerprint()
    assert [w["name"] for w in man["weights"]] == ["travel_time", "distance"]
    assert all("sha256" in f for f in man["files"].values())


def test_round_trip_without_coords_or_ids(tmp_path):
    g = from_edgelist([0, 1], [1, 0], [3, 4])
    save_graph(g, tmp_path / "plain")
    h = load_graph(tmp_path / "plain")
    assert h.coords is None and h.node_ids is None
    assert h.fingerprint() == g.fingerprint()
    assert open_graph(str(tmp_path / "plain")).fingerprint() == g.fingerprint()


def test_real_dataset_round_trip(tmp_path):
    g = open_graph("monaco")
    save_graph(g, tmp_path / "monaco")
    assert_same(g, open_graph(str(tmp_path / "monaco")))


def test_fingerprint_mismatch_detected(graph, tmp_path):
    d = tmp_path / "g"
    save_graph(graph, d)
    w = np.load(d / "weight-0.npy")
    w[0] += 1
    np.save(d / "weight-0.npy", w)  # same dtype and shape, different content
    with pytest.raises(ParseError, match="fingerprint mismatch") as ei:
        load_graph(d)
    assert ei.value.path == str(d / MANIFEST)
    with pytest.raises(ParseError, match="checksum of weight-0.npy"):
        load_graph(d, check_files=True)
    assert load_graph(d, verify=False).weights["travel_time"][0] == w[0]


def test_wrong_version_format_and_missing_files(graph, tmp_path):
    d = tmp_path / "g"
    save_graph(graph, d)
    man = json.loads((d / MANIFEST).read_text())
    (d / MANIFEST).write_text(json.dumps({**man, "version": 99}))
    with pytest.raises(ParseError, match="version 99 is not supported") as ei:
        load_graph(d)
    assert ei.value.path == str(d / MANIFEST)
    (d / MANIFEST).write_text(json.dumps({**man, "format": "something-else"}))
    with pytest.raises(ParseError, match="format is 'something-else'"):
        load_graph(d)
    (d / MANIFEST).write_text('{\n "format": "gpuroute-graph",\n oops\n}')
    with pytest.raises(ParseError, match="invalid JSON") as ei:
        load_graph(d)
    assert ei.value.line == 3
    (d / MANIFEST).write_text(json.dumps(man))
    os.remove(d / "head.npy")
    with pytest.raises(ParseError, match="lists head.npy, which is missing"):
        load_graph(d)
    os.remove(d / MANIFEST)
    with pytest.raises(ParseError, match="not a saved gpuroute graph"):
        load_graph(d)
    with pytest.raises(FileNotFoundError):
        load_graph(tmp_path / "absent")


def test_wrong_shape_detected(graph, tmp_path):
    d = tmp_path / "g"
    save_graph(graph, d)
    np.save(d / "head.npy", np.zeros(2, dtype=np.int32))
    with pytest.raises(ParseError, match=r"head.npy is int32\[2\], the manifest says int32\[4\]"):
        load_graph(d)


def _leftovers(parent, name):
    return [p for p in os.listdir(parent) if p.startswith(f".{name}.")]


def test_failed_write_leaves_nothing(graph, tmp_path, monkeypatch):
    calls = {"n": 0}
    real = store_mod._save_array

    def failing(path, a):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full (simulated)")
        real(path, a)

    monkeypatch.setattr(store_mod, "_save_array", failing)
    with pytest.raises(OSError, match="disk full"):
        save_graph(graph, tmp_path / "g")
    assert calls["n"] == 3
    assert not (tmp_path / "g").exists()
    assert _leftovers(tmp_path, "g") == []


def test_failed_overwrite_keeps_old_graph(graph, tmp_path, monkeypatch):
    d = tmp_path / "g"
    old = from_edgelist([0], [1], [1], name="old")
    save_graph(old, d)
    monkeypatch.setattr(store_mod, "_save_array", lambda p, a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        save_graph(graph, d)
    assert load_graph(d).fingerprint() == old.fingerprint()
    assert _leftovers(tmp_path, "g") == []
    monkeypatch.undo()
    save_graph(graph, d)  # a successful overwrite replaces it
    assert load_graph(d).fingerprint() == graph.fingerprint()
    assert _leftovers(tmp_path, "g") == []


def test_refuses_to_replace_unrelated_directory(graph, tmp_path):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "keep.jpg").write_bytes(b"x")
    with pytest.raises(FileExistsError, match="not a saved gpuroute graph"):
        save_graph(graph, d)
    assert (d / "keep.jpg").exists()
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(FileExistsError):
        save_graph(graph, f)
    empty = tmp_path / "empty"
    empty.mkdir()
    save_graph(graph, empty)  # an empty directory may be filled
    assert load_graph(empty).fingerprint() == graph.fingerprint()
