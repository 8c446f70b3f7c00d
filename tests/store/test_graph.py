"""Graph store: round trip (weights, units, arc attributes, turn restrictions), memory mapping,
version 1 directories, integrity checks over every file and manifest field, atomic writes, permissions."""
import datetime
import hashlib
import json
import mmap
import os
import stat

import numpy as np
import pytest

from gpuroute.datasets import load as load_dataset
from gpuroute.graph import RoadGraph, TurnRestrictions
from gpuroute.graph.errors import ParseError
from gpuroute.graph.turns import NO, ONLY
from gpuroute.graph.units import Unit
from gpuroute.io import open_graph
from gpuroute.io.edgelist import from_edgelist
from gpuroute.store import manifest as store_mod
from gpuroute.store.graph import MANIFEST, load_graph, read_manifest, save_graph


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
    assert list(h.arc_attrs) == list(g.arc_attrs)
    for k in g.arc_attrs:
        assert h.arc_attrs[k].dtype == g.arc_attrs[k].dtype
        np.testing.assert_array_equal(h.arc_attrs[k], g.arc_attrs[k])
    assert h.attr_units == g.attr_units
    if g.turns is None:
        assert h.turns is None
    else:
        assert h.turns == g.turns and h.turns.meta == g.turns.meta


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
    assert man["format"] == "gpuroute-graph" and man["version"] == 2
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
    g = load_dataset("monaco")
    assert len(g.turns) > 0 and "way_id" in g.arc_attrs  # an OSM graph: attributes and restrictions
    save_graph(g, tmp_path / "monaco")
    h = open_graph(str(tmp_path / "monaco"))
    assert_same(g, h)
    assert h.meta["road_classes"] == g.meta["road_classes"]
    assert h.turns.meta == g.turns.meta and h.turns.meta["applied"] > 0


@pytest.fixture
def rich_graph():
    """Arc attributes of several dtypes with units, turn restrictions with meta, non-standard units."""
    g = RoadGraph.from_arcs(
        4, [0, 1, 1, 2, 2, 3, 0], [1, 2, 0, 3, 1, 2, 1],
        {"travel_time": [5, 6, 7, 8, 9, 10, 9], "distance": [50, 60, 70, 80, 90, 100, 55]},
        units={"travel_time": "ds", "distance": Unit("dimacs-d", "length", 0.1, approximate=True, note="n")},
        coords=[[7.0, 43.0], [7.1, 43.1], [7.2, 43.2], [7.3, 43.3]], name="rich", node_ids=[40, 30, 20, 10],
        meta={"source": "unit test", "road_classes": ["primary", "residential"]},
        arc_attrs={"way_id": np.array([11, 12, 12, 13, 13, 14, 15], dtype=np.int64),
                   "road_class": np.array([0, 1, 1, 0, 0, 1, 1], dtype=np.int8),
                   "speed_kmh": np.array([50, 30, 30, 65, 65, 25, 90], dtype=np.float32)},
        attr_units={"way_id": Unit("id", "other", None, note="OSM way id"), "speed_kmh": Unit("km/h")},
        turns=TurnRestrictions([0, 1], [1, 3], [NO, ONLY], meta={"relations": 3, "by_value": {"no_left_turn": 1}}))
    assert g.n_arcs == 6 and len(g.turns) == 2  # the parallel 0 -> 1 arc (input 6) was merged
    return g


def test_round_trip_attributes_turns_and_units(rich_graph, tmp_path):
    d = tmp_path / "rich"
    save_graph(rich_graph, d)
    for mm in (True, False):
        h = load_graph(d, mmap=mm)
        assert_same(rich_graph, h)
        assert h.units["distance"].approximate and h.units["distance"].scale == 0.1
        assert h.meta == rich_graph.meta
    h = load_graph(d)
    assert file_backed(h.arc_attrs["way_id"]) and file_backed(h.turns.in_arc)
    man = read_manifest(d)
    assert [a["name"] for a in man["attributes"]] == ["way_id", "road_class", "speed_kmh"]
    assert man["attributes"][0]["unit"] == {"symbol": "id", "quantity": "other", "scale": None,
                                            "approximate": False, "note": "OSM way id"}
    assert man["weights"][1]["unit"]["symbol"] == "dimacs-d"
    assert man["turns"]["meta"] == {"relations": 3, "by_value": {"no_left_turn": 1}}
    assert set(man["integrity"]["fields"]) == set(man) - {"integrity"}


def test_graph_without_turns_round_trips_as_none(tmp_path):
    g = from_edgelist([0, 1], [1, 0], [3, 4])
    assert g.turns is None
    save_graph(g, tmp_path / "g")
    assert load_graph(tmp_path / "g").turns is None
    assert read_manifest(tmp_path / "g")["turns"] is None


def write_v1(graph, d, unit_style):
    """A version-1 directory exactly as gpuroute wrote them before version 2 (e21572d: units as
    strings; 4a70189: units as Unit dicts): weights, coords and node_ids, no hashes of the manifest."""
    os.makedirs(d)
    arrays = {"first_out.npy": graph.first_out, "head.npy": graph.head}
    weights = []
    for i, k in enumerate(graph.weights):
        arrays[f"weight-{i}.npy"] = graph.weights[k]
        unit = graph.units[k].symbol if unit_style == "str" else graph.units[k].to_json()
        weights.append({"name": k, "unit": unit, "file": f"weight-{i}.npy"})
    if graph.coords is not None:
        arrays["coords.npy"] = graph.coords
    if graph.node_ids is not None:
        arrays["node_ids.npy"] = graph.node_ids
    files = {}
    for fname, a in arrays.items():
        np.save(os.path.join(d, fname), a)
        files[fname] = {"dtype": str(a.dtype), "shape": list(a.shape),
                        "sha256": hashlib.sha256(open(os.path.join(d, fname), "rb").read()).hexdigest()}
    manifest = {"format": "gpuroute-graph", "version": 1, "name": graph.name, "n_nodes": graph.n_nodes,
                "n_arcs": graph.n_arcs, "weights": weights, "coord_system": graph.coord_system,
                "has_coords": graph.coords is not None, "has_node_ids": graph.node_ids is not None,
                "meta": graph.meta, "fingerprint": graph.fingerprint(), "files": files,
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "gpuroute_version": "0.1.0"}
    with open(os.path.join(d, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1, default=lambda o: o.item())  # numpy scalars in meta


@pytest.mark.parametrize("unit_style", ["str", "dict"])
def test_reads_version_1(graph, tmp_path, unit_style):
    d = tmp_path / "v1"
    write_v1(graph, d, unit_style)
    h = load_graph(d)
    assert_same(graph, h)
    assert h.arc_attrs == {} and h.turns is None
    assert h.units["distance"].quantity == "length" and h.units["travel_time"].scale == 0.1
    w = np.load(d / "weight-0.npy")
    w[0] += 1
    np.save(d / "weight-0.npy", w)
    with pytest.raises(ParseError, match="checksum of weight-0.npy"):
        load_graph(d)
    man = json.loads((d / MANIFEST).read_text())
    for f in man["files"].values():
        del f["sha256"]  # version 1 written with checksums=False: the fingerprint still catches it
    (d / MANIFEST).write_text(json.dumps(man))
    with pytest.raises(ParseError, match="fingerprint mismatch"):
        load_graph(d)


def test_fingerprint_mismatch_detected(graph, tmp_path):
    d = tmp_path / "g"
    save_graph(graph, d)
    w = np.load(d / "weight-0.npy")
    w[0] += 1
    np.save(d / "weight-0.npy", w)  # same dtype and shape, different content
    # version 2 checks every file's SHA-256 on load by default (version 1 recomputed the fingerprint)
    with pytest.raises(ParseError, match="checksum of weight-0.npy does not match") as ei:
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
    with pytest.raises(ParseError, match="format version 99: this gpuroute reads versions 1, 2 only") as ei:
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
    real = store_mod.write_array

    def failing(path, a):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full (simulated)")
        return real(path, a)

    monkeypatch.setattr(store_mod, "write_array", failing)
    with pytest.raises(OSError, match="disk full"):
        save_graph(graph, tmp_path / "g")
    assert calls["n"] == 3
    assert not (tmp_path / "g").exists()
    assert _leftovers(tmp_path, "g") == []


def test_failed_overwrite_keeps_old_graph(graph, tmp_path, monkeypatch):
    d = tmp_path / "g"
    old = from_edgelist([0], [1], [1], name="old")
    save_graph(old, d)
    monkeypatch.setattr(store_mod, "write_array", lambda p, a: (_ for _ in ()).throw(KeyboardInterrupt()))
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


# ---------------------------------------------------------------- integrity: every file, every field
def test_edited_coords_detected(graph, tmp_path):
    # main's fingerprint covered only the CSR arrays and weights: these edits loaded silently
    d = tmp_path / "g"
    save_graph(graph, d)
    good = np.load(d / "coords.npy")
    c = good.copy()
    c[0, 0] = 500.0  # not a longitude at all
    np.save(d / "coords.npy", c)
    with pytest.raises(ParseError, match="checksum of coords.npy does not match") as ei:
        load_graph(d)
    assert ei.value.path == str(d / MANIFEST)
    # without the hash check RoadGraph's own lon/lat check refuses it, reported against the file
    with pytest.raises(ParseError, match="lon=500.0") as ei:
        load_graph(d, verify=False)
    assert ei.value.path == str(d / "coords.npy")
    # a plausible edit (two nodes swap places) only the hash can see
    np.save(d / "coords.npy", good[[1, 0, 2]])
    with pytest.raises(ParseError, match="checksum of coords.npy"):
        load_graph(d)
    np.save(d / "coords.npy", good)
    assert_same(graph, load_graph(d))


@pytest.mark.parametrize("name, value, message", [
    ("head.npy", 99, "head of arc 0 is 99"), ("weight-1.npy", 0, "weight 'distance' of arc 0"),
    ("turns-in_arc.npy", 77, "turn restriction 0: in_arc 77"), ("node_ids.npy", 0, None)])
def test_invalid_arrays_name_their_file(rich_graph, tmp_path, name, value, message):
    # with verify=False nothing but RoadGraph's own checks stands between the files and the graph: its
    # GraphError comes back as a ParseError naming the array file
    d = tmp_path / "g"
    save_graph(rich_graph, d)
    a = np.load(d / name)
    a[0] = value
    np.save(d / name, a)
    if message is None:  # a node id RoadGraph cannot judge: only the hash check sees it
        assert load_graph(d, verify=False).node_ids[0] == 0
        with pytest.raises(ParseError, match=f"checksum of {name}"):
            load_graph(d)
        return
    with pytest.raises(ParseError, match=message) as ei:
        load_graph(d, verify=False)
    assert ei.value.path == str(d / name)


def test_reversed_node_ids_detected(graph, tmp_path):
    d = tmp_path / "g"
    save_graph(graph, d)
    np.save(d / "node_ids.npy", np.load(d / "node_ids.npy")[::-1].copy())
    with pytest.raises(ParseError, match="checksum of node_ids.npy") as ei:
        load_graph(d)
    assert ei.value.path == str(d / MANIFEST)


@pytest.mark.parametrize("name", ["attr-0.npy", "attr-1.npy", "attr-2.npy", "turns-in_arc.npy", "turns-kind.npy",
                                  "first_out.npy", "head.npy"])
def test_edited_attribute_turn_and_csr_files_detected(rich_graph, tmp_path, name):
    d = tmp_path / "g"
    save_graph(rich_graph, d)
    a = np.load(d / name)
    a[0] = 1 - a[0] if name == "turns-kind.npy" else a[0] + 1
    np.save(d / name, a)  # same dtype and shape
    with pytest.raises(ParseError, match=f"checksum of {name} does not match") as ei:
        load_graph(d)
    assert ei.value.path == str(d / MANIFEST)


def edit(man, what):
    """Edit one manifest field the way a person with a text editor might."""
    if what == "coord_system":
        man["coord_system"] = "planar"
    elif what == "unit":
        man["weights"][1]["unit"]["scale"] = 0.5
    elif what == "unit-str":
        man["weights"][0]["unit"] = "s"
    elif what == "name":
        man["name"] = "renamed"
    elif what == "meta":
        man["meta"]["source"] = "somewhere else"
    elif what == "weight-order":
        man["weights"][0]["name"], man["weights"][1]["name"] = man["weights"][1]["name"], man["weights"][0]["name"]
    elif what == "attr-unit":
        man["attributes"][2]["unit"]["symbol"] = "mph"
    elif what == "turns-meta":
        man["turns"]["meta"]["relations"] = 4
    elif what == "files":
        man["files"]["head.npy"]["sha256"] = "0" * 64
    elif what == "added":
        man["comment"] = "hello"
    elif what == "removed":
        del man["created"]
    return man


FIELD_OF = {"coord_system": "coord_system", "unit": "weights", "unit-str": "weights", "name": "name",
            "meta": "meta", "weight-order": "weights", "attr-unit": "attributes", "turns-meta": "turns",
            "files": "files", "added": "comment", "removed": "created"}


@pytest.mark.parametrize("what", list(FIELD_OF))
def test_edited_manifest_field_detected(graph, request, tmp_path, what):
    g = request.getfixturevalue("rich_graph") if what in ("attr-unit", "turns-meta") else graph
    d = tmp_path / "g"
    save_graph(g, d)
    man = json.loads((d / MANIFEST).read_text())
    (d / MANIFEST).write_text(json.dumps(edit(man, what), indent=2))  # re-formatting alone is no edit
    how = {"added": "added", "removed": "removed"}.get(what, "changed")
    with pytest.raises(ParseError, match=f"edited after saving: field '{FIELD_OF[what]}' {how}") as ei:
        load_graph(d)
    assert ei.value.path == str(d / MANIFEST)


def test_reformatted_manifest_still_loads(rich_graph, tmp_path):
    d = tmp_path / "g"
    save_graph(rich_graph, d)
    man = json.loads((d / MANIFEST).read_text())
    (d / MANIFEST).write_text(json.dumps(dict(reversed(list(man.items()))), indent=4, sort_keys=False))
    assert_same(rich_graph, load_graph(d))


def test_integrity_entry_itself_checked(rich_graph, tmp_path):
    d = tmp_path / "g"
    save_graph(rich_graph, d)
    man = json.loads((d / MANIFEST).read_text())
    (d / MANIFEST).write_text(json.dumps({**man, "integrity": {**man["integrity"], "content": "0" * 64}}))
    with pytest.raises(ParseError, match="'integrity' entry was edited"):
        load_graph(d)
    (d / MANIFEST).write_text(json.dumps({k: v for k, v in man.items() if k != "integrity"}))
    with pytest.raises(ParseError, match="no 'integrity' entry"):
        load_graph(d)
    (d / MANIFEST).write_text(json.dumps({**man, "integrity": "none"}))
    with pytest.raises(ParseError, match="malformed 'integrity' entry"):
        load_graph(d)
    (d / MANIFEST).write_text(json.dumps({**man, "coord_system": "planar"}))
    h = load_graph(d, verify=False)  # the caller's choice: no checks at all
    assert h.coord_system == "planar"


# ---------------------------------------------------------------- permissions and failures
@pytest.fixture
def umask():
    """Set the process umask for one test and restore it afterwards."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.mark.parametrize("mask, dmode, fmode", [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600), (0o002, 0o775, 0o664)],
                         ids=["umask022", "umask077", "umask002"])
def test_saved_graph_follows_umask(graph, tmp_path, umask, mask, dmode, fmode):
    # main created the directory with tempfile.mkdtemp: always 0700, whatever the umask
    umask(mask)
    d = tmp_path / "g"
    save_graph(graph, d)
    assert mode(d) == dmode
    assert {f: mode(d / f) for f in os.listdir(d)} == dict.fromkeys(os.listdir(d), fmode)
    save_graph(graph, d)  # replacing keeps the same modes
    assert mode(d) == dmode and mode(d / MANIFEST) == fmode
    assert _leftovers(tmp_path, "g") == []


def test_np_save_failure_leaves_nothing(rich_graph, tmp_path, monkeypatch):
    real = np.save

    def failing(f, a, *args, **kwargs):
        if a.dtype == np.int8:  # the road class codes, in the middle of the write
            f.write(b"partial")
            raise OSError("disk full (simulated)")
        return real(f, a, *args, **kwargs)

    monkeypatch.setattr(np, "save", failing)
    with pytest.raises(OSError, match="disk full"):
        save_graph(rich_graph, tmp_path / "g")
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()
    save_graph(rich_graph, tmp_path / "g")
    monkeypatch.setattr(np, "save", failing)
    with pytest.raises(OSError, match="disk full"):
        save_graph(rich_graph, tmp_path / "g")
    assert os.listdir(tmp_path) == ["g"]
    assert_same(rich_graph, load_graph(tmp_path / "g"))
