"""Shared helpers for the text loaders: open plain or gzip files, read whole, report file:line errors."""
from __future__ import annotations

import gzip
import os
import zlib

from ..graph.errors import ParseError


def read_text_bytes(path) -> bytes:
    """Return the whole (decompressed) content of ``path`` (plain, or gzip if it ends in ``.gz``).

    Raises
    ------
    FileNotFoundError
        If the file does not exist (the message names it).
    ParseError
        If a gzip file is truncated or corrupt.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as f:
                return f.read()
        except (EOFError, OSError, zlib.error) as e:
            raise ParseError(path, None, f"truncated or corrupt gzip file ({e})") from None
    if path.endswith(".gz"):
        raise ParseError(path, 1, "file name ends in .gz but it is not a gzip file")
    with open(path, "rb") as f:
        return f.read()


def line_number_of(data: bytes, offset: int) -> int:
    """1-based line number of byte ``offset`` in ``data``."""
    return data.count(b"\n", 0, offset) + 1
