"""Atomic writes: complete or absent, nothing left behind, permissions that follow the umask."""
import os
import stat

import numpy as np
import pytest

from gpuroute.store.atomic import atomic_directory, atomic_file, write_npy_atomic


@pytest.fixture
def umask():
    """Set the process umask for one test and restore it afterwards."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.mark.parametrize("mask, fmode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)], ids=["umask022", "umask077", "umask002"])
def test_write_npy_atomic_follows_umask(tmp_path, umask, mask, fmode):
    # The CLI's writer used tempfile.mkstemp, whose files are always 0600 (unreadable to the group
    # that the umask lets read them); a file opened with open(..., "w") gets 0o666 & ~umask.
    umask(mask)
    a = np.arange(10, dtype=np.int64)
    out = write_npy_atomic(tmp_path / "dist.npy", a)
    assert out == str(tmp_path / "dist.npy")
    np.testing.assert_array_equal(np.load(out), a)
    assert mode(out) == fmode
    with open(tmp_path / "plain.txt", "w") as f:  # the reference behaviour
        f.write("x")
    assert mode(out) == mode(tmp_path / "plain.txt")
    assert sorted(os.listdir(tmp_path)) == ["dist.npy", "plain.txt"]


def test_write_npy_atomic_exact_name_and_replace(tmp_path, umask):
    p = tmp_path / "out"  # no .npy is appended (np.save would)
    write_npy_atomic(p, np.zeros(3))
    assert os.listdir(tmp_path) == ["out"]
    os.chmod(p, 0o640)
    write_npy_atomic(p, np.ones(4, dtype=np.float32))
    np.testing.assert_array_equal(np.load(p), np.ones(4, dtype=np.float32))
    assert mode(p) == 0o640  # replacing keeps the file's permissions, as open(p, "w") does
    assert os.listdir(tmp_path) == ["out"]


def test_write_npy_atomic_failure_leaves_nothing(tmp_path, monkeypatch):
    def failing(f, a, *args, **kwargs):
        f.write(b"\x93NUMPY half")  # some bytes reach the temporary file first
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(np, "save", failing)
    with pytest.raises(OSError, match="disk full"):
        write_npy_atomic(tmp_path / "a.npy", np.arange(5))
    assert os.listdir(tmp_path) == []  # no partial target, no temporary file
    monkeypatch.undo()
    write_npy_atomic(tmp_path / "a.npy", np.arange(5))
    monkeypatch.setattr(np, "save", failing)
    with pytest.raises(OSError, match="disk full"):
        write_npy_atomic(tmp_path / "a.npy", np.arange(7))
    assert os.listdir(tmp_path) == ["a.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.arange(5))  # the old content, intact


def test_write_npy_atomic_interrupt_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(np, "save", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        write_npy_atomic(tmp_path / "a.npy", np.arange(5))
    assert os.listdir(tmp_path) == []


def test_write_npy_atomic_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        write_npy_atomic(tmp_path / "absent" / "a.npy", np.arange(3))
    with pytest.raises(ValueError):
        write_npy_atomic(tmp_path / "obj.npy", np.array([object()]))
    assert os.listdir(tmp_path) == []


def test_atomic_file_text(tmp_path, umask):
    umask(0o027)
    with atomic_file(tmp_path / "m.json", "w") as f:
        f.write('{"a": "é"}\n')
        assert not (tmp_path / "m.json").exists()  # not visible under its name before the end
    assert (tmp_path / "m.json").read_text(encoding="utf-8") == '{"a": "é"}\n'
    assert mode(tmp_path / "m.json") == 0o640
    with pytest.raises(ValueError, match="mode"):
        with atomic_file(tmp_path / "x", "a"):
            pass


@pytest.mark.parametrize("mask, dmode, fmode", [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)], ids=["umask022", "umask077"])
def test_atomic_directory_follows_umask(tmp_path, umask, mask, dmode, fmode):
    # tempfile.mkdtemp (used by the store on main) makes every saved graph 0700
    umask(mask)
    target = tmp_path / "sub" / "d"
    with atomic_directory(target) as tmp:
        assert not target.exists() and os.path.dirname(tmp) == str(tmp_path / "sub")
        with open(os.path.join(tmp, "f.bin"), "wb") as f:
            f.write(b"x")
    assert mode(target) == dmode and mode(target / "f.bin") == fmode
    assert os.listdir(tmp_path / "sub") == ["d"]


def test_atomic_directory_failure_and_replace(tmp_path):
    target = tmp_path / "d"
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_directory(target) as tmp:
            open(os.path.join(tmp, "half"), "wb").close()
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []
    with atomic_directory(target) as tmp:
        (open(os.path.join(tmp, "v1"), "w")).close()
    with pytest.raises(KeyboardInterrupt):
        with atomic_directory(target) as tmp:
            open(os.path.join(tmp, "v2"), "w").close()
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == ["d"] and os.listdir(target) == ["v1"]  # the old one, untouched
    with atomic_directory(target) as tmp:
        open(os.path.join(tmp, "v3"), "w").close()
    assert os.listdir(tmp_path) == ["d"] and os.listdir(target) == ["v3"]  # replaced, old one deleted
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(NotADirectoryError):
        with atomic_directory(f):
            pass
    assert sorted(os.listdir(tmp_path)) == ["d", "file"]
