"""DIMACS 9th Challenge shortest-path files: ``.gr`` arcs and ``.co`` coordinates (plain or gzip).

Format (http://www.diag.uniroma1.it/challenge9/format.shtml): ``c`` comment lines, one ``p sp N M``
header, then M lines ``a u v w`` with 1-based ids and positive integer weights. A ``.co`` file has the
header ``p aux sp co N`` and lines ``v id lon lat`` in millionths of a degree.

Both readers accept a UTF-8 byte order mark at the start of the file, check the header's counts before
building anything of the size they announce (a node count above the int32 id space is rejected at the
header line), and quote a bad field as the file writes it (``weight 99999999999999999999 exceeds
int32``), never as the number it was clamped to.
"""
from __future__ import annotations

import os
import re
import warnings

import numpy as np

from ..graph.constants import MAX_WEIGHT
from ..graph.errors import GraphError, ParseError
from ..graph.road_graph import RoadGraph
from ..graph.units import DIMACS_DISTANCE, DIMACS_TIME
from ._text import check_count, read_text_bytes, token_text

_I64_MAX = np.iinfo(np.int64).max
_I64_MIN = np.iinfo(np.int64).min


class _Records:
    """The record lines of a DIMACS-style file: ``rows`` (k, n_fields) int64 and each row's literal text.

    A value that does not fit int64 is stored clamped to the int64 range; every message about a value
    quotes :meth:`text`, the field as written in the file, never the clamped number.
    """

    def __init__(self, lines, rec_idx, rows):
        self.lines = lines
        self.rec_idx = np.asarray(rec_idx, dtype=np.int64)
        self.rows = rows

    def line(self, r) -> int:
        """1-based line number of record ``r``."""
        return int(self.rec_idx[r]) + 1

    def text(self, r, j) -> str:
        """Field ``j`` (0-based, after the tag) of record ``r`` as written in the file."""
        return token_text(self.lines[int(self.rec_idx[r])].split()[1 + j])


def _parse_records(path, data: bytes, tag: bytes, header_re: bytes, n_fields: int, kind: str, check_header=None):
    """Split a DIMACS-style file into ((header line, header fields), _Records).

    ``check_header(line, fields)`` runs as soon as the header is read, before any record is parsed (so a
    header announcing an impossible size is rejected before anything proportional to it exists).
    """
    lines = data.split(b"\n")
    header = None
    rec_idx = []
    for i, raw in enumerate(lines):
        c = raw[:1]
        if c == tag:
            rec_idx.append(i)
        elif c == b"c" or not raw.strip():
            continue
        elif c == b"p":
            if header is not None:
                raise ParseError(path, i + 1, "second 'p' header line")
            mt = re.fullmatch(header_re, raw.strip())
            if mt is None:
                raise ParseError(path, i + 1, f"bad header {raw.strip().decode(errors='replace')!r} for a {kind} file")
            header = (i + 1, mt.groups())
            if rec_idx:
                raise ParseError(path, rec_idx[0] + 1, f"'{tag.decode()}' line before the 'p' header")
            if check_header is not None:
                check_header(*header)
        else:
            raise ParseError(path, i + 1, f"unexpected line {raw[:40].decode(errors='replace')!r}")
    if header is None:
        raise ParseError(path, None, f"no 'p' header line: not a {kind} file")
    # Fast path: one numpy parse of every record, each followed by an end marker so that a line with
    # too few or too many fields cannot shift the rest silently. numpy clamps a value beyond int64 to
    # the int64 range (and the marker is int64 max), so the fast result is kept only when the marker
    # occurs exactly once per record and nothing was clamped; anything else takes the slow path.
    marker = b" 9223372036854775807 "
    body = marker.join([lines[i][1:] for i in rec_idx]) + marker if rec_idx else b""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            vals = np.fromstring(body, dtype=np.int64, sep=" ") if rec_idx else np.zeros(0, np.int64)
        except ValueError:  # numpy >= 2.3 raises on a token that is not an integer (older: warns, stops)
            vals = np.zeros(0, np.int64)
    ok = vals.size == (n_fields + 1) * len(rec_idx)
    if ok and rec_idx:
        vals = vals.reshape(-1, n_fields + 1)
        ok = (bool((vals[:, n_fields] == _I64_MAX).all()) and int(np.count_nonzero(vals == _I64_MAX)) == len(rec_idx)
              and not bool((vals == _I64_MIN).any()))
    if ok:
        rows = np.ascontiguousarray(vals.reshape(-1, n_fields + 1)[:, :n_fields])
        return header, _Records(lines, rec_idx, rows)
    # Slow path: find the offending line; values beyond int64 are clamped here too (and reported by the
    # caller's range checks with their literal text).
    rows = np.empty((len(rec_idx), n_fields), dtype=np.int64)
    for r, i in enumerate(rec_idx):
        toks = lines[i].split()[1:]
        if len(toks) != n_fields:
            raise ParseError(path, i + 1, f"expected {n_fields} fields after '{tag.decode()}', got {len(toks)}")
        for j, t in enumerate(toks):
            try:
                v = int(t)
            except ValueError:
                raise ParseError(path, i + 1, f"field {j + 1} is {token_text(t)!r}, not an integer") from None
            rows[r, j] = min(max(v, _I64_MIN), _I64_MAX)
    return header, _Records(lines, rec_idx, rows)


def read_dimacs_gr(path):
    """Read a DIMACS 9 ``.gr`` file.

    Parameters
    ----------
    path : str or path-like
        ``.gr`` or ``.gr.gz`` file (a leading UTF-8 BOM is accepted).

    Returns
    -------
    n_nodes : int
    tail, head : ndarray int64, shape (m,)
        0-based node ids (the file's ids minus 1).
    weight : ndarray int64, shape (m,)
        Positive integer weights in the file's unit.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ParseError
        Bad or missing header, a header node count ``N`` above ``2**31 - 2`` (int32 ids; reported
        at the header line before anything of size ``N`` is allocated), a malformed ``a`` line, a
        non-integer or non-positive weight, a weight above int32, an id out of ``1..N``, an arc count
        that disagrees with the header, or a truncated gzip file. The message names the file and line
        and quotes the offending field as written in the file.
    """
    path = os.fspath(path)
    data = read_text_bytes(path)
    (hline, (n_s, m_s)), rec = _parse_records(
        path, data, b"a", rb"p\s+sp\s+(\d+)\s+(\d+)", 3, "DIMACS .gr",
        check_header=lambda line, f: check_count(path, line, int(f[0]), "nodes"))
    n, m = int(n_s), int(m_s)
    rows = rec.rows
    if rows.shape[0] != m:
        raise ParseError(path, hline, f"header announces {m} arcs but the file has {rows.shape[0]} 'a' lines")
    u, v, w = rows[:, 0], rows[:, 1], rows[:, 2]
    for j, (nm, a) in enumerate((("tail", u), ("head", v))):
        bad = (a < 1) | (a > n)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise ParseError(path, rec.line(r), f"{nm} id {rec.text(r, j)} outside 1..{n}")
    bad = w < 1
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise ParseError(path, rec.line(r), f"weight {rec.text(r, 2)} is not a positive integer")
    big = w > MAX_WEIGHT
    if big.any():
        r = int(np.flatnonzero(big)[0])
        raise ParseError(path, rec.line(r), f"weight {rec.text(r, 2)} exceeds int32 (at most {MAX_WEIGHT})")
    return n, u - 1, v - 1, w


def read_dimacs_co(path, n_nodes=None):
    """Read a DIMACS 9 ``.co`` coordinate file.

    Parameters
    ----------
    path : str or path-like
        ``.co`` or ``.co.gz`` file (a leading UTF-8 BOM is accepted).
    n_nodes : int, optional
        Node count of the graph the coordinates belong to (checked against the header).

    Returns
    -------
    coords : ndarray float64, shape (N, 2)
        Longitude and latitude in degrees (the file's millionths divided by 1e6), row ``id - 1``.

    Raises
    ------
    ParseError
        Bad header, a header node count above ``2**31 - 2``, malformed ``v`` line, id out of
        range or repeated, a count that disagrees with the header or with ``n_nodes``, a coordinate
        outside [-180, 180] x [-90, 90] (file and line named, the field quoted as written).
    """
    path = os.fspath(path)
    data = read_text_bytes(path)
    (hline, (n_s,)), rec = _parse_records(
        path, data, b"v", rb"p\s+aux\s+sp\s+co\s+(\d+)", 3, "DIMACS .co",
        check_header=lambda line, f: check_count(path, line, int(f[0]), "nodes"))
    n = int(n_s)
    rows = rec.rows
    if n_nodes is not None and n != n_nodes:
        raise ParseError(path, hline, f"coordinates are for {n} nodes but the graph has {n_nodes}")
    if rows.shape[0] != n:
        raise ParseError(path, hline, f"header announces {n} nodes but the file has {rows.shape[0]} 'v' lines")
    ids = rows[:, 0]
    bad = (ids < 1) | (ids > n)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise ParseError(path, rec.line(r), f"node id {rec.text(r, 0)} outside 1..{n}")
    seen = np.zeros(n + 1, dtype=np.int64)
    np.add.at(seen, ids, 1)
    if (seen[1:] > 1).any():
        dup = int(np.flatnonzero(seen[1:] > 1)[0]) + 1
        first, second = np.flatnonzero(ids == dup)[:2]
        raise ParseError(path, rec.line(int(second)), f"node id {rec.text(int(second), 0)} appears twice "
                                                      f"(first on line {rec.line(int(first))})")
    bad = (np.abs(rows[:, 1]) > 180_000_000) | (np.abs(rows[:, 2]) > 90_000_000)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise ParseError(path, rec.line(r), f"longitude/latitude {rec.text(r, 1)} {rec.text(r, 2)} (millionths of "
                                            "a degree) outside [-180,180] x [-90,90]")
    coords = np.empty((n, 2), dtype=np.float64)
    coords[ids - 1, 0] = rows[:, 1] / 1e6
    coords[ids - 1, 1] = rows[:, 2] / 1e6
    return coords


def matching_co_path(gr_path):
    """The ``.co`` file that belongs beside a ``.gr`` file, or None.

    ``USA-road-d.NY.gr.gz`` and ``USA-road-t.NY.gr.gz`` both map to ``USA-road-d.NY.co(.gz)``: the
    DIMACS coordinates are shared by the distance and time graphs.
    """
    gr_path = os.fspath(gr_path)
    d, base = os.path.split(gr_path)
    stem = re.sub(r"\.gr(\.gz)?$", "", base)
    cands = [stem, re.sub(r"^USA-road-[dt]\.", "USA-road-d.", stem)]
    for s in cands:
        for ext in (".co.gz", ".co"):
            p = os.path.join(d, s + ext)
            if os.path.exists(p):
                return p
    return None


def load_dimacs(path, *, co_path="auto", weight_name=None, unit=None, name=None):
    """Load a DIMACS 9 road graph (``.gr`` plus, when found, its ``.co`` coordinates).

    Parameters
    ----------
    path : str or path-like
        The ``.gr`` or ``.gr.gz`` file.
    co_path : "auto", str or None
        Coordinates file; "auto" looks beside ``path`` (see :func:`matching_co_path`); None skips.
    weight_name : str, optional
        Name of the weight. Default: ``"travel_time"`` for ``USA-road-t.*`` files, else ``"distance"``.
    unit : Unit or str, optional
        Unit of the weight. Default: :data:`~gpuroute.graph.units.DIMACS_DISTANCE` (~0.1 m) /
        :data:`~gpuroute.graph.units.DIMACS_TIME` (~0.0036 s) for ``USA-road-d``/``-t`` files, else none.
    name : str, optional
        Graph name; default: the file name without ``.gr[.gz]``.

    Returns
    -------
    RoadGraph
        Self-loops dropped and parallel arcs reduced to the lightest (NY: 3,746 such arcs);
        ``node_ids`` holds the 1-based DIMACS ids.

    Raises
    ------
    FileNotFoundError, ParseError
        See :func:`read_dimacs_gr` and :func:`read_dimacs_co`.
    """
    path = os.fspath(path)
    base = os.path.basename(path)
    is_time = base.startswith("USA-road-t.")
    if weight_name is None:
        weight_name = "travel_time" if is_time else "distance"
    if unit is None:
        unit = DIMACS_TIME if is_time else (DIMACS_DISTANCE if base.startswith("USA-road-d.") else "")
    n, u, v, w = read_dimacs_gr(path)
    coords = None
    if co_path == "auto":
        co_path = matching_co_path(path)
    if co_path is not None:
        coords = read_dimacs_co(co_path, n_nodes=n)
    gname = name or re.sub(r"\.gr(\.gz)?$", "", base)
    try:
        return RoadGraph.from_arcs(n, u, v, {weight_name: w}, units={weight_name: unit}, coords=coords,
                                   name=gname, node_ids=np.arange(1, n + 1, dtype=np.int64),
                                   meta={"source": path, "coords_source": co_path, "format": "dimacs9"})
    except GraphError as e:
        raise ParseError(path, None, str(e)) from None
