"""Hierarchy store: round trip (every array, params, stats, fingerprints), refusals (another format
version; a missing, added, changed or truncated file; an edited manifest field; arrays of the wrong
dtype or shape; another graph or weight), atomic writes that replace only a saved hierarchy, permissions
following the umask, and reopening the graph from the manifest."""
from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest
from naive import naive_ch, random_road_graph

from gpuroute import ParseError, RoadGraph, load_dimacs, save_graph
from gpuroute.ch import ContractionHierarchy, Hierarchy
from gpuroute.ch.api import weight_fingerprint_of
from gpuroute.ch.hierarchy import FORMAT_VERSION
from gpuroute.ch.store import (
    MANIFEST,
    graph_spec,
    load_hierarchy,
    open_hierarchy,
    read_manifest,
    save_hierarchy,
)
from gpuroute.store import manifest as write_mod


@pytest.fixture
def graph():
    g, _ = random_road_graph(np.random.default_rng(7), 18)
    return g


@pytest.fixture
def ch(graph):
    order = np.random.default_rng(1).permutation(graph.n_nodes)
    h = naive_ch(graph, "travel_time", order=order, core_from=graph.n_nodes - 4)
    stats = {"time_s": np.float64(0.25), "device": "cpu", "selected": [np.int64(5), 3], "shortcuts": np.array([4, 2]),
             "totals": {"time_score_s": 0.01}, "iterations": np.int32(2)}
    return ContractionHierarchy(h, graph=graph, weight="travel_time", method="cu-ch",
                                params={"C": 0.3, "K": np.int64(4), "luby_rounds": 2}, stats=stats)


@pytest.fixture
def saved(ch, tmp_path):
    d = tmp_path / "h"
    save_hierarchy(ch, d)
    return d


def leftovers(parent, name):
    return [p for p in os.listdir(parent) if p.startswith(f".{name}.")]


def edit_manifest(d, change):
    p = d / MANIFEST
    m = json.loads(p.read_text())
    change(m)
    p.write_text(json.dumps(m, indent=1))


# ---------------------------------------------------------------------------------------------- round trip
def test_round_trip_keeps_everything(ch, saved, graph):
    got = load_hierarchy(saved, graph=graph)
    assert set(os.listdir(saved)) == {MANIFEST} | {f"{k}.npy" for k in Hierarchy.ARRAYS}
    for k in Hierarchy.ARRAYS:
        a, b = getattr(ch.h, k), getattr(got.h, k)
        assert b.dtype == a.dtype, k
        np.testing.assert_array_equal(b, a, err_msg=k)
    assert got.h.core_level == ch.h.core_level and got.h.n_nodes == ch.h.n_nodes
    assert got.graph is graph and got.weight == "travel_time" and got.method == "cu-ch"
    assert got.params == {"C": 0.3, "K": 4, "luby_rounds": 2}
    assert got.stats == {"time_s": 0.25, "device": "cpu", "selected": [5, 3], "shortcuts": [4, 2],
                         "totals": {"time_score_s": 0.01}, "iterations": 2}
    assert (got.graph_fingerprint, got.weight_fingerprint) == (graph.fingerprint(),
                                                              weight_fingerprint_of(graph, "travel_time"))
    m = read_manifest(saved)
    assert (m["format"], m["version"], m["n_nodes"], m["weight"]) == ("gpuroute-ch", FORMAT_VERSION, 18, "travel_time")
    assert m["graph"] == {"name": graph.name, "source": None}
    # without the graph: the arrays and the recorded fingerprints, no graph
    bare = ContractionHierarchy.load(saved)
    assert bare.graph is None and bare.graph_fingerprint == graph.fingerprint()
    np.testing.assert_array_equal(bare.h.up_weight, ch.h.up_weight)


def test_facade_save_and_replace(ch, tmp_path, graph):
    d = tmp_path / "h"
    assert ch.save(d) == str(d)
    ch2 = ContractionHierarchy(naive_ch(graph, "travel_time"), graph=graph, weight="travel_time")
    ch2.save(d)  # a saved hierarchy is replaced
    got = ContractionHierarchy.load(d, graph=graph)
    np.testing.assert_array_equal(got.h.rank, np.arange(graph.n_nodes))
    assert got.h.core.size == 0 and got.method == "sequential"
    assert leftovers(tmp_path, "h") == []


def test_empty_hierarchy_round_trip(tmp_path):
    g = RoadGraph.from_arcs(2, [], [], {"distance": np.zeros(0, dtype=np.int64)})
    ch = ContractionHierarchy(naive_ch(g), graph=g, weight="distance")
    save_hierarchy(ch, tmp_path / "h")
    got = load_hierarchy(tmp_path / "h", graph=g)
    assert got.h.n_up == got.h.n_down == 0 and got.h.n_nodes == 2


# ---------------------------------------------------------------------------------------------- refusals
def test_another_format_version_refused(saved):
    edit_manifest(saved, lambda m: m.__setitem__("version", FORMAT_VERSION + 1))
    with pytest.raises(ParseError, match=rf"format version {FORMAT_VERSION + 1}: this gpuroute reads version "
                                         rf"{FORMAT_VERSION} only; rebuild"):
        load_hierarchy(saved)


def test_not_a_hierarchy(tmp_path, graph):
    save_graph(graph, tmp_path / "g")
    with pytest.raises(ParseError, match="format is 'gpuroute-graph', expected 'gpuroute-ch' \\(a saved graph"):
        load_hierarchy(tmp_path / "g")
    (tmp_path / "e").mkdir()
    with pytest.raises(ParseError, match="missing: .* is not a saved contraction hierarchy"):
        load_hierarchy(tmp_path / "e")
    with pytest.raises(FileNotFoundError, match="no such directory"):
        load_hierarchy(tmp_path / "nothing")


@pytest.mark.parametrize("field, value", [("method", "sequential"), ("n_nodes", 17), ("weight", "distance"),
                                          ("stats", {}), ("graph_fingerprint", "0" * 16)])
def test_edited_manifest_field_refused(saved, field, value):
    edit_manifest(saved, lambda m: m.__setitem__(field, value))
    with pytest.raises(ParseError, match=f"edited after saving: field '{field}' changed"):
        load_hierarchy(saved)


def test_added_and_removed_manifest_fields_refused(saved):
    edit_manifest(saved, lambda m: m.__setitem__("note", "hi"))
    with pytest.raises(ParseError, match="field 'note' added"):
        load_hierarchy(saved)
    edit_manifest(saved, lambda m: (m.pop("note"), m.pop("created")))
    with pytest.raises(ParseError, match="field 'created' removed"):
        load_hierarchy(saved)


def test_edited_integrity_refused(saved):
    edit_manifest(saved, lambda m: m["integrity"].__setitem__("content", "0" * 64))
    with pytest.raises(ParseError, match="'integrity' entry was edited"):
        load_hierarchy(saved)


def test_missing_file_refused(saved):
    os.remove(saved / "up_mid.npy")
    with pytest.raises(ParseError, match=r"up_mid.npy is missing from .* \(a truncated directory\?\)"):
        load_hierarchy(saved)


def test_extra_file_refused(saved):
    np.save(saved / "extra.npy", np.arange(3))
    with pytest.raises(ParseError, match="extra.npy is in .* but not listed under 'files': added after saving"):
        load_hierarchy(saved)


@pytest.mark.parametrize("name", ["up_weight", "core_dist", "rank"])
def test_changed_file_refused(saved, name):
    p = saved / f"{name}.npy"
    a = np.load(p)
    a.flat[0] += 1
    np.save(p, a)
    with pytest.raises(ParseError, match=f"checksum of {name}.npy does not match"):
        load_hierarchy(saved)


def test_truncated_file_refused(saved):
    p = saved / "down_tail.npy"
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError, match="checksum of down_tail.npy does not match"):
        load_hierarchy(saved)


def test_wrong_shape_and_dtype_refused(ch, tmp_path):
    arrays = ch.h.arrays()
    bad = Hierarchy(**dict(arrays, level=arrays["level"][:-1]))
    save_hierarchy(ContractionHierarchy(bad, graph=ch.graph, weight="travel_time"), tmp_path / "a")
    with pytest.raises(ParseError, match=r"level.npy: shape \(17,\), expected \(18,\) for n_nodes=18"):
        load_hierarchy(tmp_path / "a")
    # (int32 weights are read: a hierarchy saves its int64 weights as int32 where they fit, ch.store.NARROWED)
    bad = Hierarchy(**dict(arrays, up_weight=arrays["up_weight"].astype(np.float64)))
    save_hierarchy(ContractionHierarchy(bad, graph=ch.graph, weight="travel_time"), tmp_path / "b")
    with pytest.raises(ParseError, match="up_weight.npy: dtype float64, a hierarchy's up_weight is int64"):
        load_hierarchy(tmp_path / "b")
    bad = Hierarchy(**dict(arrays, down_mid=arrays["down_mid"][1:]))
    save_hierarchy(ContractionHierarchy(bad, graph=ch.graph, weight="travel_time"), tmp_path / "c")
    with pytest.raises(ParseError, match=r"down_mid.npy: shape .*: down_first_out ends at"):
        load_hierarchy(tmp_path / "c")
    bad = Hierarchy(**dict(arrays, core_dist=arrays["core_dist"][:, :2]))
    save_hierarchy(ContractionHierarchy(bad, graph=ch.graph, weight="travel_time"), tmp_path / "d")
    with pytest.raises(ParseError, match=r"core_dist.npy: shape \(4, 2\), expected \(4, 4\) for a core of 4 nodes"):
        load_hierarchy(tmp_path / "d")


def test_another_graph_refused(saved, graph):
    w = graph.weights
    other = RoadGraph(graph.first_out, graph.head, {"distance": w["distance"], "travel_time": w["travel_time"] + 1})
    with pytest.raises(ValueError) as e:
        load_hierarchy(saved, graph=other)
    msg = str(e.value)
    assert "does not belong to this graph" in msg
    assert f"built from another graph (graph fingerprint {graph.fingerprint()}; the given graph" in msg
    assert f"has {other.fingerprint()}" in msg
    assert (f"built for another weight 'travel_time' (weight fingerprint {weight_fingerprint_of(graph, 'travel_time')}; "
            f"the given graph's is {weight_fingerprint_of(other, 'travel_time')})") in msg


def test_another_weight_refused(saved, graph):
    """Same arcs, only the other weight: the graph differs, and the hierarchy's weight is absent."""
    only = RoadGraph(graph.first_out, graph.head, {"distance": graph.weights["distance"]})
    with pytest.raises(ValueError, match="built for weight 'travel_time', which the given graph .* does not have "
                                         "\\(it has distance\\)"):
        load_hierarchy(saved, graph=only)


# ---------------------------------------------------------------------------------------------- writing
def test_only_a_saved_hierarchy_is_replaced(ch, graph, tmp_path):
    save_graph(graph, tmp_path / "g")
    with pytest.raises(FileExistsError, match="a non-empty directory that is a saved graph; not replacing it"):
        save_hierarchy(ch, tmp_path / "g")
    assert os.path.exists(tmp_path / "g" / "head.npy")
    other = tmp_path / "data"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a saved hierarchy"):
        save_hierarchy(ch, other)
    assert (other / "notes.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="exists and is not a directory"):
        save_hierarchy(ch, tmp_path / "file")
    (tmp_path / "empty").mkdir()
    save_hierarchy(ch, tmp_path / "empty")
    load_hierarchy(tmp_path / "empty", graph=graph)


def test_failed_write_leaves_nothing(ch, saved, tmp_path, monkeypatch, graph):
    before = {f: (saved / f).read_bytes() for f in os.listdir(saved)}
    calls = {"n": 0}
    real = write_mod.write_array  # every artefact writes its arrays through the store

    def failing(path, a):
        calls["n"] += 1
        if calls["n"] == 5:
            with open(path, "wb") as f:
                f.write(b"partial")
            raise OSError("disk full (simulated)")
        return real(path, a)

    monkeypatch.setattr(write_mod, "write_array", failing)
    with pytest.raises(OSError, match="disk full"):
        save_hierarchy(ch, saved)
    assert {f: (saved / f).read_bytes() for f in os.listdir(saved)} == before
    with pytest.raises(OSError, match="disk full"):
        calls["n"] = 0
        save_hierarchy(ch, tmp_path / "new")
    assert not os.path.exists(tmp_path / "new")
    assert leftovers(tmp_path, "h") == [] and leftovers(tmp_path, "new") == []
    load_hierarchy(saved, graph=graph)


def test_unsavable_stats_refused_before_writing(ch, tmp_path):
    ch.stats[(1, 2)] = "tuple key"
    with pytest.raises(TypeError, match="stats cannot be saved as JSON"):
        save_hierarchy(ch, tmp_path / "h")
    assert not os.path.exists(tmp_path / "h")


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.mark.parametrize("mask, dmode, fmode", [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600), (0o002, 0o775, 0o664)],
                         ids=["umask022", "umask077", "umask002"])
def test_saved_hierarchy_follows_umask(ch, tmp_path, umask, mask, dmode, fmode):
    umask(mask)
    d = tmp_path / "h"
    save_hierarchy(ch, d)
    assert mode(d) == dmode
    assert {f: mode(d / f) for f in os.listdir(d)} == dict.fromkeys(os.listdir(d), fmode)
    save_hierarchy(ch, d)
    assert mode(d) == dmode and mode(d / MANIFEST) == fmode
    assert leftovers(tmp_path, "h") == []


# ---------------------------------------------------------------------------------------------- the graph
def test_graph_reopened_from_the_recorded_source(tmp_path, monkeypatch):
    gr = tmp_path / "USA-road-d.T.gr"
    gr.write_text("p sp 3 4\na 1 2 5\na 2 1 5\na 2 3 7\na 3 2 7\n")
    monkeypatch.chdir(tmp_path)
    g = load_dimacs("USA-road-d.T.gr")  # a relative path is recorded absolute
    ch = ContractionHierarchy(naive_ch(g, order=[1, 0, 2]), graph=g, weight="distance")
    save_hierarchy(ch, tmp_path / "h")
    assert read_manifest(tmp_path / "h")["graph"] == {"name": g.name, "source": str(gr)}
    monkeypatch.chdir("/")
    assert graph_spec(tmp_path / "h") == str(gr)
    got = open_hierarchy(tmp_path / "h")
    assert got.graph.fingerprint() == g.fingerprint()
    np.testing.assert_array_equal(got.h.up_head, ch.h.up_head)
    # the source changed since: refused, naming the fingerprints
    gr.write_text("p sp 3 4\na 1 2 5\na 2 1 5\na 2 3 8\na 3 2 7\n")
    with pytest.raises(ValueError, match="built from another graph"):
        open_hierarchy(tmp_path / "h")
    os.remove(gr)
    with pytest.raises(FileNotFoundError, match="cannot reopen the graph .* no such file"):
        open_hierarchy(tmp_path / "h")
    assert open_hierarchy(tmp_path / "h", graph=g).graph is g


def test_shipped_dataset_reopened_by_name(graph, tmp_path):
    graph.name = "ny"
    ch = ContractionHierarchy(naive_ch(graph), graph=graph, weight="distance")
    save_hierarchy(ch, tmp_path / "h")
    assert graph_spec(tmp_path / "h") == "ny"
