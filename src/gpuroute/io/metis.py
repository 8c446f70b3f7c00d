"""METIS / DIMACS 10 ``.graph`` adjacency files, with optional ``.xyz`` coordinates (plain or gzip).

Format (METIS manual 5.1, section 4.1.1, as used by the 10th DIMACS Implementation Challenge): ``%``
comment lines, one header line ``n m [fmt [ncon]]``, then exactly ``n`` vertex lines; line ``i`` lists
the neighbours of vertex ``i`` as 1-based ids. ``m`` counts undirected edges, so every edge appears in
both endpoints' lines and the lines hold ``2 m`` neighbour entries in all. ``fmt`` is up to three binary
digits ``[s][w][e]``: ``s`` = the line starts with a vertex size, ``w`` = it then carries ``ncon`` vertex
weights (default 1), ``e`` = every neighbour is followed by the edge's weight. An empty line is a vertex
with no neighbours. Vertex sizes and weights are read and checked as integers, then ignored.

The companion ``.xyz`` file has one line ``x y [z]`` per vertex: planar coordinates in an unspecified unit.

Both readers accept a UTF-8 byte order mark at the start of the file. The header's ``n`` and ``2 m``
are checked against the int32 id space before anything of that size is built, and a bad field is quoted
as the file writes it, never as the number it was clamped to.
"""
from __future__ import annotations

import os
import re
import warnings

import numpy as np

from ..graph.errors import GraphError, ParseError
from ..graph.road_graph import RoadGraph
from ..graph.units import HOP, NONE, Unit
from ._text import check_count, read_text_bytes, token_text

_INT_BYTES = np.zeros(256, dtype=bool)
_INT_BYTES[list(b"0123456789 \t\r\n")] = True
_MARK = -1  # cannot occur in a line that passed the character check (no '-')


def _strip_suffix(path):
    return re.sub(r"\.graph(\.gz)?$", "", os.path.basename(path))


def matching_xyz_path(graph_path):
    """The ``.xyz`` / ``.xyz.gz`` file beside a ``.graph`` file (same stem), or None."""
    graph_path = os.fspath(graph_path)
    stem = os.path.join(os.path.dirname(graph_path), _strip_suffix(graph_path))
    for ext in (".xyz.gz", ".xyz"):
        if os.path.exists(stem + ext):
            return stem + ext
    return None


def _parse_fmt(path, hline, fmt_s, ncon_s):
    fmt = fmt_s or "0"
    if len(fmt) > 3 or set(fmt) - {"0", "1"}:
        raise ParseError(path, hline, f"fmt {fmt!r} must be up to three binary digits ([size][vwgt][ewgt])")
    fmt = fmt.rjust(3, "0")
    has_size, has_vw, has_ew = (c == "1" for c in fmt)
    ncon = int(ncon_s) if ncon_s is not None else 1
    if ncon_s is not None and not has_vw:
        raise ParseError(path, hline, f"ncon={ncon} given but fmt {fmt!r} has no vertex weights")
    return fmt, int(has_size) + (ncon if has_vw else 0), has_ew


def read_metis(path):
    """Read a METIS ``.graph`` file (DIMACS 10) into an arc list.

    Parameters
    ----------
    path : str or path-like
        ``.graph`` or ``.graph.gz`` file.

    Returns
    -------
    n_nodes : int
    tail, head : ndarray int64, shape (2 m,)
        0-based endpoints of every arc: each undirected edge ``{u, v}`` appears as ``u -> v`` (from line
        ``u``) and ``v -> u`` (from line ``v``).
    weight : ndarray int64, shape (2 m,), or None
        Edge weights when ``fmt`` says the file has them, else None.
    fmt : str
        The three-digit format code (``"000"`` for an unweighted graph).

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ParseError
        Naming the file and line: a missing or bad header, a header ``n`` or ``2 m`` above the int32 id
        space (``2**31 - 2``, at the header line), a token that is not a non-negative integer,
        a vertex line whose field count does not fit ``fmt``, fewer or more vertex lines than ``n``, a
        neighbour id outside ``1..n``, a self-loop, a weight that is not in ``1..2**31-1``, a neighbour
        count that is not ``2 m``, an asymmetric adjacency (``v`` in line ``u`` but ``u`` not in line
        ``v``, or the two carry different weights), or a truncated gzip file.
    """
    path = os.fspath(path)
    data = read_text_bytes(path)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the file's final newline
    # Comment lines may appear anywhere; every other line after the header is a vertex line (an empty
    # one is an isolated vertex).
    body_idx = [i for i, ln in enumerate(lines) if ln[:1] != b"%"]
    hpos = 0
    while hpos < len(body_idx) and not lines[body_idx[hpos]].strip():
        hpos += 1
    if hpos == len(body_idx):
        raise ParseError(path, None, "no header line 'n m [fmt [ncon]]': not a METIS graph file")
    hline = body_idx[hpos] + 1
    htext = lines[hline - 1].decode(errors="replace").strip()
    mt = re.fullmatch(r"(\d+)\s+(\d+)(?:\s+(\d+)(?:\s+(\d+))?)?", htext)
    if mt is None:
        raise ParseError(path, hline, f"bad header {htext[:60]!r}; expected 'n m [fmt [ncon]]'")
    n, m = int(mt.group(1)), int(mt.group(2))
    check_count(path, hline, n, "vertices")
    check_count(path, hline, 2 * m, f"arcs (2 x {m} edges)")
    fmt, skip, has_ew = _parse_fmt(path, hline, mt.group(3), mt.group(4))
    vidx = body_idx[hpos + 1:]
    if len(vidx) < n:
        raise ParseError(path, len(lines) + 1 if lines else 1,
                         f"header (line {hline}) announces {n} vertex lines but the file ends after {len(vidx)}")
    for i in vidx[n:]:
        if lines[i].strip():
            raise ParseError(path, i + 1, f"more vertex lines than the {n} the header (line {hline}) announces")
    vidx = np.asarray(vidx[:n], dtype=np.int64)
    if n == 0:
        if m:
            raise ParseError(path, hline, f"header announces {m} edges but no vertices")
        empty = np.zeros(0, dtype=np.int64)
        return 0, empty, empty.copy(), (empty.copy() if has_ew else None), fmt
    vlines = [lines[i] for i in vidx]
    joined = b"\n".join(vlines)
    bad = ~_INT_BYTES[np.frombuffer(joined, dtype=np.uint8)]
    if bad.any():
        off = int(np.flatnonzero(bad)[0])
        r = joined.count(b"\n", 0, off)
        tok = next((t for t in vlines[r].split() if not t.isdigit()), joined[off:off + 1])
        raise ParseError(path, int(vidx[r]) + 1,
                         f"field {tok.decode(errors='replace')[:30]!r} is not a non-negative integer")
    # One numpy parse of every vertex line, each followed by an end marker.
    body = b" -1 ".join(vlines) + b" -1"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            vals = np.fromstring(body, dtype=np.int64, sep=" ")
        except ValueError:  # cannot happen after the character check; guard against a numpy surprise
            vals = np.zeros(0, dtype=np.int64)
    ends = np.flatnonzero(vals == _MARK)
    if ends.size != n:
        raise ParseError(path, None, "could not parse the vertex lines")
    starts = np.empty(n, dtype=np.int64)
    starts[:1] = 0
    starts[1:] = ends[:-1] + 1
    counts = ends - starts
    stride = 2 if has_ew else 1
    rest = counts - skip
    bad = (rest < 0) | (rest % stride != 0)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        want = f"{skip} leading field(s) then " if skip else ""
        want += "(neighbour, weight) pairs" if has_ew else "neighbour ids"
        raise ParseError(path, int(vidx[r]) + 1, f"{int(counts[r])} fields do not fit fmt {fmt!r}: expected {want}")
    deg = rest // stride
    total = int(deg.sum())
    tail = np.repeat(np.arange(n, dtype=np.int64), deg)
    first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=first[1:])
    pos = np.repeat(starts + skip, deg) + stride * (np.arange(total, dtype=np.int64) - np.repeat(first[:-1], deg))
    head = vals[pos]
    weight = vals[pos + 1] if has_ew else None

    def line_of_arc(a):
        return int(vidx[tail[a]]) + 1

    def text_of_arc(a, offset=0):
        """The neighbour id (offset 0) or edge weight (offset 1) of arc ``a`` as written in the file
        (np.fromstring clamps a value beyond int64; the message must quote the file, not the clamp)."""
        toks = lines[int(vidx[tail[a]])].split()
        return token_text(toks[skip + stride * (a - int(first[tail[a]])) + offset])

    bad = (head < 1) | (head > n)
    if bad.any():
        a = int(np.flatnonzero(bad)[0])
        raise ParseError(path, line_of_arc(a), f"neighbour id {text_of_arc(a)} outside 1..{n}")
    head -= 1
    loop = head == tail
    if loop.any():
        a = int(np.flatnonzero(loop)[0])
        raise ParseError(path, line_of_arc(a), f"vertex {int(tail[a]) + 1} lists itself (self-loops are not allowed)")
    if weight is not None:
        bad = (weight < 1) | (weight > np.iinfo(np.int32).max)
        if bad.any():
            a = int(np.flatnonzero(bad)[0])
            raise ParseError(path, line_of_arc(a),
                             f"edge weight {text_of_arc(a, 1)} is not a positive integer within int32")
    if total != 2 * m:
        raise ParseError(path, hline, f"header announces {m} edges but the vertex lines list {total} neighbours "
                                      f"(expected 2 x {m} = {2 * m}: each edge appears in both endpoints' lines)")
    # Symmetry: the multiset of (u, v, w) must equal the multiset of (v, u, w).
    key = tail * n + head
    rkey = head * n + tail
    if not np.array_equal(np.sort(key), np.sort(rkey)):
        present = np.isin(key, rkey)
        if not present.all():
            a = int(np.flatnonzero(~present)[0])
            u, v = int(tail[a]) + 1, int(head[a]) + 1
            raise ParseError(path, line_of_arc(a), f"vertex {u} lists neighbour {v}, but vertex {v}'s line "
                                                   f"(line {int(vidx[v - 1]) + 1}) does not list {u}")
        # Same pairs in both directions, different multiplicities.
        uk, kc = np.unique(key, return_counts=True)
        _, rkc = np.unique(rkey, return_counts=True)
        d = int(np.flatnonzero(kc != rkc)[0])
        u, v = int(uk[d] // n), int(uk[d] % n)
        raise ParseError(path, int(vidx[u]) + 1, f"vertex {u + 1} lists neighbour {v + 1} {int(kc[d])} time(s), but "
                                                 f"vertex {v + 1}'s line (line {int(vidx[v]) + 1}) lists {u + 1} "
                                                 f"{int(rkc[d])} time(s)")
    if weight is not None:
        o = np.lexsort((weight, key))
        ro = np.lexsort((weight, rkey))
        diff = weight[o] != weight[ro]
        if diff.any():
            a = int(o[int(np.flatnonzero(diff)[0])])
            u, v = int(tail[a]) + 1, int(head[a]) + 1
            raise ParseError(path, line_of_arc(a), f"edge {u}-{v} has weight {text_of_arc(a, 1)} here, but vertex "
                                                   f"{v}'s line (line {int(vidx[v - 1]) + 1}) gives it a "
                                                   "different weight")
    return n, tail, head, weight, fmt


def read_xyz(path, n_nodes=None):
    """Read a DIMACS 10 ``.xyz`` coordinate file.

    Parameters
    ----------
    path : str or path-like
        ``.xyz`` or ``.xyz.gz`` file: one line ``x y`` or ``x y z`` per vertex (the same count on every
        line); blank lines at the end are ignored.
    n_nodes : int, optional
        Expected number of lines.

    Returns
    -------
    ndarray float64, shape (n, 2) or (n, 3)
        The coordinates, row ``i`` for vertex ``i + 1``, in the file's planar unit.

    Raises
    ------
    ParseError
        A line that is not 2 or 3 numbers, a count that differs from the first line's or from
        ``n_nodes``, a non-finite value, or a truncated gzip file.
    """
    path = os.fspath(path)
    data = read_text_bytes(path)
    lines = data.split(b"\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if n_nodes is not None and len(lines) != n_nodes:
        raise ParseError(path, min(len(lines), n_nodes) + 1,
                         f"{len(lines)} coordinate lines but the graph has {n_nodes} vertices")
    if not lines:
        return np.zeros((0, 2))
    k = len(lines[0].split())
    if k not in (2, 3):
        raise ParseError(path, 1, f"expected 'x y [z]', got {k} fields")
    marker = b" -7.25e300 "
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            vals = np.fromstring(marker.join(lines) + marker, dtype=np.float64, sep=" ")
        except ValueError:  # numpy >= 2.3 raises on a token that is not a number; find it below
            vals = np.zeros(0)
    ok = vals.size == (k + 1) * len(lines)
    if ok:
        vals = vals.reshape(-1, k + 1)
        ok = bool((vals[:, k] == -7.25e300).all())
    if ok:
        xyz = np.ascontiguousarray(vals[:, :k])
    else:
        xyz = np.empty((len(lines), k))
        for i, ln in enumerate(lines):
            toks = ln.split()
            if len(toks) != k:
                raise ParseError(path, i + 1, f"expected {k} fields like line 1, got {len(toks)}")
            try:
                xyz[i] = [float(t) for t in toks]
            except ValueError:
                raise ParseError(path, i + 1, f"{ln.strip()[:40].decode(errors='replace')!r} is not {k} numbers") from None
    bad = ~np.isfinite(xyz).all(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ParseError(path, i + 1, "coordinates must be finite")
    return xyz


def load_metis(graph_path, xyz_path="auto", name=None, *, length_scale=1.0):
    """Load a METIS / DIMACS 10 ``.graph`` file as an undirected road graph (every edge gives two arcs).

    Parameters
    ----------
    graph_path : str or path-like
        The ``.graph`` or ``.graph.gz`` file (a leading UTF-8 BOM is accepted, as in ``.xyz``).
    xyz_path : "auto", str or None
        Coordinates; "auto" looks for ``<stem>.xyz.gz`` / ``<stem>.xyz`` beside ``graph_path``; None
        skips them.
    name : str, optional
        Graph name; default: the file name without ``.graph[.gz]`` (e.g. ``"luxembourg.osm"``).
    length_scale : float
        For unweighted files with coordinates: arc weight = ``max(1, round(length_scale * L))`` where ``L``
        is the Euclidean length of the edge in the ``.xyz`` unit (x, y and, if given, z).

    Returns
    -------
    RoadGraph
        One weight, chosen by what the files hold:

        * ``"weight"`` (unit ``""``): the file's own edge weights (fmt ``001``/``011``/...);
        * ``"length"`` (unit ``"xyz"``, or ``"<1/length_scale> xyz"``): the rounded Euclidean edge
          length from the coordinates, for an unweighted file. Lengths below 0.5 units round up to 1.
          DIMACS 10 does not state the unit; in ``luxembourg.osm.xyz`` ``x`` is close to longitude x 1e5,
          so one unit is very roughly a metre (about 0.7 m east-west there), not an exact metre;
        * ``"hops"`` (unit ``"edges"``): 1 on every arc, for an unweighted file without coordinates.

        ``coords`` has shape (n, 2) (x, y) with ``coord_system="planar"``; ``node_ids`` holds the
        1-based METIS ids. ``meta`` records the source files and ``fmt``; vertex sizes and weights are
        not kept.

    Raises
    ------
    FileNotFoundError
        ``graph_path`` (or an explicit ``xyz_path``) does not exist.
    ParseError
        See :func:`read_metis` and :func:`read_xyz`; also a length that exceeds int32.
    """
    graph_path = os.fspath(graph_path)
    n, tail, head, weight, fmt = read_metis(graph_path)
    if xyz_path == "auto":
        xyz_path = matching_xyz_path(graph_path)
    xyz = read_xyz(xyz_path, n_nodes=n) if xyz_path is not None else None
    if weight is not None:
        wname, unit, w = "weight", NONE, weight
    elif xyz is not None:
        if not (np.isfinite(length_scale) and length_scale > 0):
            raise ValueError(f"length_scale must be a positive number, got {length_scale}")
        length = np.sqrt(((xyz[tail] - xyz[head]) ** 2).sum(axis=1))
        w = np.maximum(1, np.rint(length * length_scale))
        if (w > np.iinfo(np.int32).max).any():
            raise ParseError(xyz_path, None, f"edge lengths x {length_scale} exceed int32: pass a smaller length_scale")
        wname = "length"
        unit = Unit("xyz" if length_scale == 1 else f"{1 / length_scale:g} xyz", "length", None,
                    note="METIS .xyz coordinate unit (DIMACS 10 states none)")
        w = w.astype(np.int64)
    else:
        wname, unit, w = "hops", HOP, np.ones(tail.size, dtype=np.int64)
    coords = np.ascontiguousarray(xyz[:, :2]) if xyz is not None else None
    try:
        return RoadGraph.from_arcs(n, tail, head, {wname: w}, units={wname: unit}, coords=coords,
                                   name=name or _strip_suffix(graph_path),
                                   node_ids=np.arange(1, n + 1, dtype=np.int64), coord_system="planar",
                                   meta={"source": graph_path, "coords_source": xyz_path, "format": "metis",
                                         "fmt": fmt})
    except GraphError as e:
        raise ParseError(graph_path, None, str(e)) from None
