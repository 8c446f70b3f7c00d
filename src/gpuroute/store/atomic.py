"""Atomic writes: a file or a directory appears complete under its final name, or not at all.

Everything is first written under a hidden temporary name in the target's own directory (so that the
final step is a same-filesystem ``rename``), flushed with ``fsync``, then renamed into place, and the
parent directory is ``fsync``-ed so that the rename itself is durable. An error at any point (an
exception, ``KeyboardInterrupt``) removes the temporary and leaves the target as it was.

Permissions follow the process umask, as for ``open(path, "w")`` and ``os.mkdir(path)``: a new file
gets ``0o666 & ~umask`` and a new directory ``0o777 & ~umask`` (``tempfile.mkstemp``/``mkdtemp``, which
the first versions used, make every output private: 0600 / 0700). Replacing an existing file keeps
that file's permission bits, as ``open(path, "w")`` does.

Public API
----------
atomic_file(path, mode="wb")   context manager: a file object whose content becomes ``path``
write_npy_atomic(path, array)  one ``.npy`` array written atomically
atomic_directory(path)         context manager: a directory whose content becomes ``path``
fsync_directory(path)          flush a directory entry (best effort)
"""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat

import numpy as np

__all__ = ["atomic_file", "write_npy_atomic", "atomic_directory", "fsync_directory", "temp_sibling"]

#: Attempts at finding an unused temporary name before giving up (names are 64 random bits).
_NAME_TRIES = 100


def fsync_directory(path):
    """``fsync`` a directory so that renames and new entries in it survive a crash (best effort: a
    platform without directory file descriptors is silently skipped)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def temp_sibling(path, tag="tmp"):
    """A fresh, unused name ``.<basename>.<tag>-<16 hex digits>`` in ``path``'s directory (str).

    Only a name: nothing is created, so the caller creates it with ``O_EXCL`` / ``os.mkdir`` and
    retries on ``FileExistsError``.
    """
    parent, base = os.path.split(os.path.abspath(os.fspath(path)))
    return os.path.join(parent, f".{base}.{tag}-{secrets.token_hex(8)}")


def _create_excl(path, make):
    """Call ``make(name)`` on fresh temporary sibling names of ``path`` until one does not exist yet."""
    for _ in range(_NAME_TRIES):
        name = temp_sibling(path)
        try:
            return name, make(name)
        except FileExistsError:  # pragma: no cover - 64 random bits
            continue
    raise FileExistsError(f"{path}: no free temporary name after {_NAME_TRIES} tries")  # pragma: no cover


@contextlib.contextmanager
def atomic_file(path, mode="wb", *, encoding=None):
    """Write a file atomically: yield a file object on a temporary sibling, rename it to ``path`` on
    success.

    Parameters
    ----------
    path : str or path-like
        Final name. Its directory must exist.
    mode : {"wb", "w"}
        Binary or text.
    encoding : str, optional
        Text encoding (``mode="w"``; default UTF-8).

    Yields
    ------
    file object
        Write to it; it is flushed, ``fsync``-ed, closed and renamed to ``path`` (``os.replace``, so an
        existing file is replaced in one step) when the ``with`` block ends without an exception.

    Raises
    ------
    ValueError
        ``mode`` is not ``"wb"`` or ``"w"``.
    FileNotFoundError
        The directory of ``path`` does not exist.
    OSError
        Writing or renaming failed. On any exception the temporary is removed and ``path`` is left
        as it was (absent, or its previous content).

    Notes
    -----
    The temporary is created with ``os.open(..., O_CREAT | O_EXCL, 0o666)``, so the kernel applies
    the umask exactly as for ``open(path, "w")``; if ``path`` already exists its permission bits are
    copied to the new file before the rename.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', got {mode!r}")
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"cannot write {path}: directory {parent} does not exist")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    tmp, fd = _create_excl(path, lambda name: os.open(name, flags, 0o666))
    try:
        f = os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": encoding or "utf-8"}))
    except BaseException:  # pragma: no cover - fdopen of a fresh fd does not fail in practice
        os.close(fd)
        os.unlink(tmp)
        raise
    try:
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        try:
            st = os.stat(path)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISREG(st.st_mode):
                os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_directory(parent)


def write_npy_atomic(path, array):
    """Save one array as ``path`` (exactly that name, no ``.npy`` added) atomically.

    Parameters
    ----------
    path : str or path-like
    array : array_like
        Any non-object array (saved with ``allow_pickle=False``, C-contiguous).

    Returns
    -------
    str
        The absolute path written.

    Raises
    ------
    FileNotFoundError
        The directory of ``path`` does not exist.
    ValueError
        ``array`` holds Python objects (cannot be saved without pickle).
    OSError
        Writing failed; nothing is left behind and an existing ``path`` is unchanged.
    """
    path = os.path.abspath(os.fspath(path))
    with atomic_file(path, "wb") as f:
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)
    return path


@contextlib.contextmanager
def atomic_directory(path):
    """Create a directory atomically: yield a temporary sibling directory; on success it becomes
    ``path``.

    If ``path`` exists (a directory) it is replaced: the old directory is first renamed aside, the new
    one renamed in, and only then is the old one deleted; if the second rename fails the old one is put
    back. Any exception inside the ``with`` block (or while renaming) removes the temporary directory
    and leaves ``path`` as it was. The caller decides beforehand whether an existing ``path`` may be
    replaced (see :func:`gpuroute.store.check_replaceable`).

    Parameters
    ----------
    path : str or path-like
        Final directory. Its parent is created if needed (``os.makedirs``, umask modes).

    Yields
    ------
    str
        The temporary directory (mode ``0o777 & ~umask``, like ``os.mkdir``). Files written into it
        should be flushed and ``fsync``-ed by the caller; the directory itself is ``fsync``-ed here.

    Raises
    ------
    NotADirectoryError
        ``path`` exists and is not a directory (or is a symbolic link).
    OSError
        Creating or renaming failed (nothing is left behind).
    """
    path = os.path.abspath(os.fspath(path)).rstrip(os.sep)
    parent = os.path.dirname(path)
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isdir(path)):
        raise NotADirectoryError(f"{path}: exists and is not a directory; not replacing it")
    os.makedirs(parent, exist_ok=True)
    tmp, _ = _create_excl(path, lambda name: os.mkdir(name, 0o777))
    try:
        yield tmp
        fsync_directory(tmp)
        if os.path.lexists(path):
            old = temp_sibling(path, "old")
            while os.path.lexists(old):  # pragma: no cover - 64 random bits
                old = temp_sibling(path, "old")
            os.rename(path, old)
            try:
                os.rename(tmp, path)
            except BaseException:
                os.rename(old, path)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
        fsync_directory(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
