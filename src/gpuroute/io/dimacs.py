"""DIMACS 9th Challenge shortest-path files: ``.gr`` arcs and ``.co`` coordinates (plain or gzip).

Format (http://www.diag.uniroma1.it/challenge9/format.shtml): ``c`` comment lines, one ``p sp N M``
header, then M lines ``a u v w`` with 1-based ids and positive integer weights. A ``.co`` file has the
header ``p aux sp co N`` and lines ``v id lon lat`` in millionths of a degree.
"""
from __future__ import annotations

import os
import re
import warnings

import numpy as np

from ..graph.errors import GraphError, ParseError
from ..graph.road_graph import RoadGraph
from ..graph.units import DIMACS_DISTANCE, DIMACS_TIME
from ._text import read_text_bytes


def _parse_records(path, data: bytes, tag: bytes, header_re: bytes, n_fields: int, kind: str):
    """Split a DIMACS-style file into (header fields, record line numbers, int64 array (k, n_fields))."""
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
        else:
            raise ParseError(path, i + 1, f"unexpected line {raw[:40].decode(errors='replace')!r}")
    if header is None:
        raise ParseError(path, None, f"no 'p' header line: not a {kind} file")
    # Fast path: one numpy parse of every record, each followed by an end marker so that a line with
    # too few or too many fields cannot shift the rest silently.
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
        ok = bool((vals[:, n_fields] == np.iinfo(np.int64).max).all())
    if not ok:
        # Slow path: find the offending line (also used for .co files whose fields are all ints).
        rows = np.empty((len(rec_idx), n_fields), dtype=np.int64)
        for r, i in enumerate(rec_idx):
            toks = lines[i].split()[1:]
            if len(toks) != n_fields:
                raise ParseError(path, i + 1, f"expected {n_fields} fields after '{tag.decode()}', got {len(toks)}")
            for j, t in enumerate(toks):
                try:
                    rows[r, j] = int(t)
                except ValueError:
                    raise ParseError(path, i + 1, f"field {j + 1} is {t.decode(errors='replace')!r}, not an integer") from None
                except OverflowError:
                    raise ParseError(path, i + 1, f"field {j + 1} is {t.decode(errors='replace')!r}, too large") from None
        return header, np.asarray(rec_idx), rows
    return header, np.asarray(rec_idx), np.ascontiguousarray(vals.reshape(-1, n_fields + 1)[:, :n_fields])


def read_dimacs_gr(path):
    """Read a DIMACS 9 ``.gr`` file.

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
        Bad or missing header, a malformed ``a`` line, a non-integer or non-positive weight, an id out
        of ``1..N``, an arc count that disagrees with the header, or a truncated gzip file. The message
        names the file and line.
    """
    path = os.fspath(path)
    data = read_text_bytes(path)
    (hline, (n_s, m_s)), rec_lines, rows = _parse_records(
        path, data, b"a", rb"p\s+sp\s+(\d+)\s+(\d+)", 3, "DIMACS .gr")
    n, m = int(n_s), int(m_s)
    if rows.shape[0] != m:
        raise ParseError(path, hline, f"header announces {m} arcs but the file has {rows.shape[0]} 'a' lines")
    u, v, w = rows[:, 0], rows[:, 1], rows[:, 2]
    for nm, a in (("tail", u), ("head", v)):
        bad = (a < 1) | (a > n)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise ParseError(path, int(rec_lines[r]) + 1, f"{nm} id {int(a[r])} outside 1..{n}")
    bad = w < 1
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise ParseError(path, int(rec_lines[r]) + 1, f"weight {int(w[r])} is not a positive integer")
    big = w > np.iinfo(np.int32).max
    if big.any():
        r = int(np.flatnonzero(big)[0])
        raise ParseError(path, int(rec_lines[r]) + 1, f"weight {int(w[r])} exceeds int32")
    return n, u - 1, v - 1, w


def read_dimacs_co(path, n_nodes=None):
    """Read a DIMACS 9 ``.co`` coordinate file.

    Returns
    -------
    coords : ndarray float64, shape (N, 2)
        Longitude and latitude in degrees (the file's millionths divided by 1e6), row ``id - 1``.

    Raises
    ------
    ParseError
        Bad header, malformed ``v`` line, id out of range or repeated, a missing node, a count that
        disagrees with the header or with ``n_nodes``.
    """
    path = os.fspath(path)
    data = read_text_bytes(path)
    (hline, (n_s,)), rec_lines, rows = _parse_records(
        path, data, b"v", rb"p\s+aux\s+sp\s+co\s+(\d+)", 3, "DIMACS .co")
    n = int(n_s)
    if n_nodes is not None and n != n_nodes:
        raise ParseError(path, hline, f"coordinates are for {n} nodes but the graph has {n_nodes}")
    if rows.shape[0] != n:
        raise ParseError(path, hline, f"header announces {n} nodes but the file has {rows.shape[0]} 'v' lines")
    ids = rows[:, 0]
    bad = (ids < 1) | (ids > n)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise ParseError(path, int(rec_lines[r]) + 1, f"node id {int(ids[r])} outside 1..{n}")
    seen = np.zeros(n + 1, dtype=np.int64)
    np.add.at(seen, ids, 1)
    if (seen[1:] != 1).any():
        dup = int(np.flatnonzero(seen[1:] > 1)[0]) + 1 if (seen[1:] > 1).any() else None
        if dup is not None:
            r = int(np.flatnonzero(ids == dup)[1])
            raise ParseError(path, int(rec_lines[r]) + 1, f"node id {dup} appears twice")
    coords = np.empty((n, 2), dtype=np.float64)
    coords[ids - 1, 0] = rows[:, 1] / 1e6
    coords[ids - 1, 1] = rows[:, 2] / 1e6
    if (np.abs(coords[:, 0]) > 180).any() or (np.abs(coords[:, 1]) > 90).any():
        r = int(np.flatnonzero((np.abs(rows[:, 1]) > 180e6) | (np.abs(rows[:, 2]) > 90e6))[0])
        raise ParseError(path, int(rec_lines[r]) + 1, "longitude/latitude outside [-180,180] x [-90,90]")
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
