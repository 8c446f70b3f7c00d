"""Shared helpers for the text loaders: open plain or gzip files, read whole, report file:line errors."""
from __future__ import annotations

import gzip
import os
import zlib

import numpy as np

from ..graph.constants import INDEX_DTYPE
from ..graph.errors import ParseError

#: Largest node or arc count a file may announce: ids are int32 and RoadGraph takes fewer than int32 max.
MAX_COUNT = int(np.iinfo(INDEX_DTYPE).max) - 1

#: The UTF-8 byte order mark some editors (Notepad, Excel) write at the start of a text file.
UTF8_BOM = b"\xef\xbb\xbf"


def read_text_bytes(path) -> bytes:
    """Return the whole (decompressed) content of ``path`` (plain, or gzip if it starts with the gzip magic).

    A UTF-8 byte order mark at the start of the text is removed (once), so every text loader reads a
    file saved "with BOM" like the same file without it; line numbers are unchanged.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    bytes
        The file's bytes after decompression, without a leading UTF-8 BOM.

    Raises
    ------
    FileNotFoundError
        If the file does not exist (the message names it).
    ParseError
        If a gzip file is truncated or corrupt, or the name ends in ``.gz`` but the file is not gzip.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as f:
                data = f.read()
        except (EOFError, OSError, zlib.error) as e:
            raise ParseError(path, None, f"truncated or corrupt gzip file ({e})") from None
    elif path.endswith(".gz"):
        raise ParseError(path, 1, "file name ends in .gz but it is not a gzip file")
    else:
        with open(path, "rb") as f:
            data = f.read()
    return data[len(UTF8_BOM):] if data.startswith(UTF8_BOM) else data


def line_number_of(data: bytes, offset: int) -> int:
    """1-based line number of byte ``offset`` in ``data``."""
    return data.count(b"\n", 0, offset) + 1


def token_text(tok) -> str:
    """A file's field (bytes or str) as text for an error message, cut to 40 characters."""
    s = tok.decode(errors="replace") if isinstance(tok, (bytes, bytearray)) else str(tok)
    return s if len(s) <= 40 else s[:37] + "..."


def check_count(path, line, count, what):
    """Reject a count announced by a file header (nodes, arcs, links) that int32 ids cannot hold.

    Loaders call this as soon as the header is read, before allocating anything proportional to it,
    so a corrupt or hostile header (``p sp 3000000000 1``) fails at once instead of asking for tens of
    GiB.

    Raises
    ------
    ParseError
        ``count > MAX_COUNT``; names the file and the header ``line``.
    """
    if count > MAX_COUNT:
        raise ParseError(path, line, f"header announces {count} {what}, more than int32 ids allow "
                                     f"(at most {MAX_COUNT})")
