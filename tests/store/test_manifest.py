"""The artefact store (:mod:`gpuroute.store`): manifest round trip, per-array fingerprints that name a
corrupted file, edited fields named, atomic replace that leaves nothing half-written when a write fails,
and the refusal to replace anything that is not a saved artefact."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from gpuroute import store
from gpuroute.graph.errors import ParseError
from gpuroute.store import manifest as store_manifest

FORMAT = "test-artefact"


def _save(directory, arrays, **fields):
    with store.atomic_directory(directory) as tmp:
        files = store.write_arrays(tmp, arrays)
        store.write_manifest(tmp, {"format": FORMAT, "version": 1, "files": files, **fields})
    return directory


def _read(directory):
    return store.read_manifest(directory, format=FORMAT, versions=(1,), required=("files", "n"),
                               what="saved test artefact", remedy="save it again")


def _leftovers(parent):
    return sorted(p for p in os.listdir(parent) if p.startswith("."))


@pytest.fixture
def arrays():
    rng = np.random.default_rng(3)
    return {"a.npy": rng.integers(0, 1000, 50).astype(np.int32), "b.npy": rng.random((4, 3))}


# ---------------------------------------------------------------------------------------------- round trip
def test_manifest_round_trip(tmp_path, arrays):
    d = _save(tmp_path / "x", arrays, n=np.int64(50), meta={"k": (1, 2), "f": np.float32(0.5)})
    m = _read(d)
    assert m["n"] == 50 and m["meta"] == {"k": [1, 2], "f": 0.5}  # numpy values and tuples as plain JSON
    assert set(m["files"]) == set(arrays)
    for fname, a in arrays.items():
        rec = m["files"][fname]
        assert rec["dtype"] == str(a.dtype) and rec["shape"] == list(a.shape)
        assert rec["sha256"] == store.sha256_file(d / fname)
        got = store.load_array(str(d), fname, m)
        np.testing.assert_array_equal(got, a)
        assert got.dtype == a.dtype
    assert m[store.INTEGRITY] == store.manifest_integrity(m)  # every field hashed as read back
    mm = store.load_array(str(d), "a.npy", m, mmap=True)
    assert isinstance(mm, np.memmap) and not mm.flags.writeable


def test_sha256_arrays_layout():
    a = np.arange(6, dtype=np.int32)
    assert store.sha256_arrays(a) == store.sha256_arrays(a.view(np.int16))  # the same bytes
    assert store.sha256_arrays(a, layout=True) != store.sha256_arrays(a.view(np.int16), layout=True)
    assert store.sha256_arrays(a, layout=True) != store.sha256_arrays(a.reshape(2, 3), layout=True)


# ---------------------------------------------------------------------------------------------- corruption
def test_corrupted_array_is_named(tmp_path, arrays):
    d = _save(tmp_path / "x", arrays, n=50)
    m = _read(d)
    raw = bytearray((d / "b.npy").read_bytes())
    raw[-1] ^= 0xFF  # same dtype and shape, one byte differs
    (d / "b.npy").write_bytes(bytes(raw))
    store.load_array(str(d), "a.npy", m)  # the intact file still loads
    with pytest.raises(ParseError, match=r"checksum of b\.npy does not match") as ei:
        store.load_array(str(d), "b.npy", m)
    assert ei.value.path == str(d / "manifest.json")
    with pytest.raises(ParseError, match=r"checksum of b\.npy does not match") as ei:
        store.check_file(str(d), "b.npy", m, blame=str(d / "b.npy"))
    assert ei.value.path == str(d / "b.npy")
    (d / "a.npy").write_bytes(b"\x93NUMPY truncated")
    with pytest.raises(ParseError, match=r"checksum of a\.npy"):  # a damaged file is named as changed
        store.load_array(str(d), "a.npy", m)
    os.remove(d / "a.npy")
    with pytest.raises(ParseError, match=r"lists a\.npy, which is missing"):
        store.load_array(str(d), "a.npy", m)


def test_wrong_shape_named_before_the_hash(tmp_path, arrays):
    d = _save(tmp_path / "x", arrays, n=50)
    np.save(d / "a.npy", np.zeros(3, np.int32))
    with pytest.raises(ParseError, match=r"a\.npy is int32\[3\], the manifest says int32\[50\]"):
        store.load_array(str(d), "a.npy", _read(d))


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.__setitem__("n", 49), "field 'n' changed"),
    (lambda m: m.__setitem__("extra", 1), "field 'extra' added"),
    (lambda m: m.pop("created"), "field 'created' removed"),
    (lambda m: m["files"]["a.npy"].__setitem__("sha256", "0" * 64), "field 'files' changed"),
])
def test_edited_manifest_field_is_named(tmp_path, arrays, edit, message):
    d = _save(tmp_path / "x", arrays, n=50, created="today")
    m = json.loads((d / "manifest.json").read_text())
    edit(m)
    (d / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ParseError, match=f"edited after saving: {message}.*save it again") as ei:
        _read(d)
    assert ei.value.path == str(d / "manifest.json")


def test_manifest_refusals(tmp_path, arrays):
    d = _save(tmp_path / "x", arrays, n=50)
    m = json.loads((d / "manifest.json").read_text())
    (d / "manifest.json").write_text(json.dumps({**m, "version": 7}))
    with pytest.raises(ParseError, match="format version 7: this gpuroute reads version 1 only; save it again"):
        _read(d)
    (d / "manifest.json").write_text(json.dumps({**m, "format": "other"}))
    with pytest.raises(ParseError, match="format is 'other', expected 'test-artefact'"):
        _read(d)
    (d / "manifest.json").write_text('{\n "format": 1,\n oops\n}')
    with pytest.raises(ParseError, match="invalid JSON") as ei:
        _read(d)
    assert ei.value.line == 3
    m.pop("n")
    m[store.INTEGRITY] = store.manifest_integrity(m)
    (d / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ParseError, match="no 'n' entry"):
        _read(d)
    os.remove(d / "manifest.json")
    with pytest.raises(ParseError, match="missing: .* is not a saved test artefact"):
        _read(d)
    with pytest.raises(FileNotFoundError, match="no such directory"):
        _read(tmp_path / "absent")


# ---------------------------------------------------------------------------------------------- atomic replace
def test_failed_array_write_leaves_nothing(tmp_path, arrays, monkeypatch):
    """A write that fails halfway (after a partial file) leaves neither the target nor a temporary."""
    real = store_manifest.write_array
    calls = {"n": 0}

    def failing(path, a):
        calls["n"] += 1
        if calls["n"] == 2:
            with open(path, "wb") as f:
                f.write(b"partial")
            raise OSError("disk full (simulated)")
        return real(path, a)

    monkeypatch.setattr(store_manifest, "write_array", failing)
    with pytest.raises(OSError, match="disk full"):
        _save(tmp_path / "x", arrays, n=50)
    assert calls["n"] == 2
    assert not (tmp_path / "x").exists() and _leftovers(tmp_path) == []


def test_failed_replace_keeps_the_old_artefact(tmp_path, arrays, monkeypatch):
    d = _save(tmp_path / "x", arrays, n=50)
    before = {f: (d / f).read_bytes() for f in os.listdir(d)}
    monkeypatch.setattr(store_manifest, "write_array", lambda p, a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        _save(d, {"c.npy": np.zeros(2)}, n=2)
    assert {f: (d / f).read_bytes() for f in os.listdir(d)} == before
    assert _leftovers(tmp_path) == []
    monkeypatch.undo()
    _save(d, {"c.npy": np.zeros(2)}, n=2)  # a successful replace swaps the whole directory
    assert sorted(os.listdir(d)) == ["c.npy", "manifest.json"] and _read(d)["n"] == 2
    assert _leftovers(tmp_path) == []


def test_failed_manifest_rewrite_keeps_the_old_one(tmp_path, arrays, monkeypatch):
    """``write_manifest(atomic=True)`` (a manifest rewritten in place) never leaves a half-written one."""
    d = _save(tmp_path / "x", arrays, n=50)
    before = (d / "manifest.json").read_bytes()
    real_dump = json.dump

    def failing(obj, f, **kw):
        f.write('{"format": "test-art')  # a part of the new text is written, then the disk is full
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(json, "dump", failing)
    with pytest.raises(OSError, match="disk full"):
        store.write_manifest(d, {**_read(d), "n": 51}, atomic=True)
    monkeypatch.setattr(json, "dump", real_dump)
    assert (d / "manifest.json").read_bytes() == before and _leftovers(d) == []
    store.write_manifest(d, {**_read(d), "n": 51}, atomic=True)
    assert _read(d)["n"] == 51


def test_check_replaceable(tmp_path, arrays):
    assert store.check_replaceable(tmp_path / "new", (FORMAT,), "a saved test artefact") == str(tmp_path / "new")
    (tmp_path / "empty").mkdir()
    store.check_replaceable(tmp_path / "empty", (FORMAT,), "a saved test artefact")
    d = _save(tmp_path / "x", arrays, n=50)
    store.check_replaceable(d, (FORMAT,), "a saved test artefact")
    with pytest.raises(FileExistsError, match="is a saved graph; not replacing it"):
        store.check_replaceable(d, ("gpuroute-graph",), "a saved graph dir", names={FORMAT: "a saved graph"})
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "keep.jpg").write_bytes(b"x")
    with pytest.raises(FileExistsError, match="not a saved test artefact \\(no 'test-artefact' manifest.json\\); "
                                              "not writing into it"):
        store.check_replaceable(photos, (FORMAT,), "a saved test artefact", refusal="not writing into it")
    store.check_replaceable(photos, (FORMAT,), "x", allow=lambda entries: entries == ["keep.jpg"])
    (tmp_path / "afile").write_text("x")
    with pytest.raises(FileExistsError, match="exists and is not a directory"):
        store.check_replaceable(tmp_path / "afile", (FORMAT,), "a saved test artefact")
    assert (photos / "keep.jpg").exists()
