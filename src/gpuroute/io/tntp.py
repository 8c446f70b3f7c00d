"""TNTP files (Transportation Networks for Research): ``*_net.tntp`` links and ``*_node.tntp`` coordinates.

Format (as used by the bstabler/TransportationNetworks collection), plain or gzip:

``*_net.tntp``
    A metadata block of ``<TAG> value`` lines (``<NUMBER OF ZONES>``, ``<NUMBER OF NODES>``,
    ``<FIRST THRU NODE>``, ``<NUMBER OF LINKS>``, ...) closed by ``<END OF METADATA>``; then comment
    lines starting ``~``, one of which is the header row naming the columns
    (``~ init_node term_node capacity length free_flow_time b power speed toll link_type ;``); then one
    row per directed link, whitespace or tab separated, usually ending with ``;`` (some published
    files, e.g. Sydney, leave it out: both are read). Older files spell the columns ``Init node``,
    ``Free Flow Time``, ``Type``, ... (tab separated); both spellings are read, and a unit in
    parentheses after a name (``length (km)``, ``fftt(min)``) is taken as the column's unit. The
    ``<ORIGINAL HEADER>`` metadata line repeats the source's own column names, often with their units
    (Sydney: ``length (km)``, Anaheim: ``Length (ft)``, Chicago-Sketch: ``length (miles)``).
    Without a header row the columns are taken in the standard order above.
``*_node.tntp``
    An optional header row (``node x y`` or ``Node X Y ;``), then rows ``id x y`` (with or without a
    closing ``;``: a header that ends with ``;`` makes it required on every row). The coordinates are
    planar in most networks (Chicago's are projected x/y in an unstated unit) and lon/lat degrees
    in a few.

TNTP has no unit field. :func:`load_tntp` takes the unit of the length and free-flow time columns from
the caller, else a ``<LENGTH UNITS>`` / ``<TIME UNITS>``-style metadata line, else the column's name in
the header row or the ``<ORIGINAL HEADER>`` line (``length (km)``), else assumes miles / minutes (the
usual TNTP convention); the unit's note says which.
"""
from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation

import numpy as np

from ..graph.constants import MAX_WEIGHT
from ..graph.errors import GraphError, ParseError
from ..graph.road_graph import RoadGraph
from ..graph.units import FOOT, HOUR, KILOMETRE, METRE, MILE, MINUTE, SECOND, Unit, parse_unit, scaled
from ._text import MAX_COUNT, check_count, read_text_bytes, token_text

__all__ = ["STANDARD_COLUMNS", "TntpNet", "TntpNodes", "read_tntp_net", "read_tntp_nodes", "matching_node_path",
           "load_tntp"]

#: Link columns in the order of the TNTP header row (used when a file has no header row).
STANDARD_COLUMNS = ("init_node", "term_node", "capacity", "length", "free_flow_time", "b", "power", "speed",
                    "toll", "link_type")

#: Other spellings of the column names (lower case, spaces as underscores) -> the standard name.
_ALIASES = {
    "init": "init_node", "from": "init_node", "from_node": "init_node", "a_node": "init_node",
    "term": "term_node", "to": "term_node", "to_node": "term_node", "b_node": "term_node",
    "free_flow_time": "free_flow_time", "freeflowtime": "free_flow_time", "fft": "free_flow_time",
    "ftime": "free_flow_time", "fftime": "free_flow_time", "free_flow_travel_time": "free_flow_time",
    "speed_limit": "speed", "type": "link_type", "linktype": "link_type", "fftt": "free_flow_time",
    "tail": "init_node", "tail_node": "init_node", "head": "term_node", "head_node": "term_node",
}
_NODE_ALIASES = {"node": "node", "node_id": "node", "id": "node", "x": "x", "y": "y",
                 "lon": "lon", "long": "lon", "lng": "lon", "longitude": "lon",
                 "lat": "lat", "latitude": "lat"}

_NUM_BYTES = np.zeros(256, dtype=bool)
_NUM_BYTES[list(b"0123456789.eE+-")] = True
_NUM_OR_SPACE = _NUM_BYTES.copy()
_NUM_OR_SPACE[ord(" ")] = True
_DIGIT_BYTES = np.zeros(256, dtype=bool)
_DIGIT_BYTES[list(b"0123456789")] = True
_DIGIT_OR_SPACE = _DIGIT_BYTES.copy()
_DIGIT_OR_SPACE[ord(" ")] = True
_UNIT_BASES = {"length": MILE, "time": MINUTE}
_UNIT_ARGS = {"length": "length_unit", "time": "time_unit"}
#: Unit spellings seen in column names beyond those :func:`parse_unit` knows (lower case).
_UNIT_SPELLINGS = {"kms": KILOMETRE, "kilometre": KILOMETRE, "kilometres": KILOMETRE, "kilometer": KILOMETRE,
                   "kilometers": KILOMETRE, "foot": FOOT, "mins": MINUTE, "hr": HOUR, "hrs": HOUR, "secs": SECOND,
                   "second": SECOND, "metre": METRE, "meter": METRE}
#: ``name (unit)`` at the end of a column name.
_NAME_UNIT = re.compile(r"^(.*?)\s*\(\s*([^()]*?)\s*\)\s*$")


def _norm(name: str) -> str:
    s = re.sub(r"[\s\-]+", "_", name.strip().lower())
    return _ALIASES.get(s, s)


def _header_names(text: bytes):
    """Column names of a ``~`` header row: tab separated when it has tabs (names may hold spaces),
    else whitespace separated; the leading ``~`` and a closing ``;`` are dropped."""
    return [name for name, _, _ in _header_fields(text)]


def _header_fields(text):
    """[(standard name, unit text or None, name as written), ...] of a ``~`` header row (bytes or str).

    A trailing ``(unit)`` is split off the name (``length (km)`` -> ``("length", "km", "length (km)")``);
    in a whitespace-separated row a ``(unit)`` token belongs to the name before it.
    """
    t = text.decode(errors="replace") if isinstance(text, bytes) else text
    t = t.strip()
    if t.startswith("~"):
        t = t[1:]
    t = t.strip()
    if t.endswith(";"):
        t = t[:-1]
    if "\t" in t:
        parts = [p.strip() for p in t.split("\t") if p.strip()]
    else:
        parts = []
        for tok in t.split():
            if parts and re.fullmatch(r"\([^()]*\)", tok):
                parts[-1] += " " + tok
            else:
                parts.append(tok)
    out = []
    for p in parts:
        mt = _NAME_UNIT.match(p)
        name, unit = (mt.group(1), mt.group(2)) if mt and mt.group(1) else (p, None)
        out.append((_norm(name), unit or None, p))
    return out


def _parse_numbers(path, rows, lines, names, k):
    """float64 (len(rows), k) of token rows (lists of bytes); ParseError at the first bad token.

    One ``np.fromstring`` pass over all rows; it is trusted only when every byte is a number character
    and it yields exactly ``k`` values per row (anything else takes the per-token path that finds the
    offending field).
    """
    m = len(rows)
    if not m:
        return np.zeros((0, k))
    body = b" ".join(b" ".join(r) for r in rows)
    vals = None
    if _NUM_OR_SPACE[np.frombuffer(body, dtype=np.uint8)].all():
        with warnings.catch_warnings():
            # numpy < 2.3 stops at a token that is not a number with a DeprecationWarning (then a token
            # split in two, "1.5.5", could make up the count): as an error, both versions raise.
            warnings.simplefilter("error")
            try:
                vals = np.fromstring(body, dtype=np.float64, sep=" ")
            except (ValueError, DeprecationWarning):
                vals = None
        if vals is not None and vals.size != m * k:
            vals = None
    if vals is None:  # token by token: the first bad one is the error
        vals = np.empty((m, k))
        for r, toks in enumerate(rows):
            for j, t in enumerate(toks):
                try:
                    if not _NUM_BYTES[np.frombuffer(t, dtype=np.uint8)].all():
                        raise ValueError(t)
                    vals[r, j] = float(t)
                except ValueError:
                    raise ParseError(path, int(lines[r]), f"{names[j]} is {token_text(t)!r}, not a number") from None
    vals = vals.reshape(m, k)
    bad = ~np.isfinite(vals)
    if bad.any():
        r, j = (int(x) for x in np.argwhere(bad)[0])
        raise ParseError(path, int(lines[r]), f"{names[j]} is {token_text(rows[r][j])!r}, not a finite number")
    return vals


def _check_ids(path, rows, cols, values, lines):
    """int64 node ids (one array per column) from the columns ``cols`` = [(j, name), ...] of ``values``.

    Ids are plain digits (1-based) within the int32 ids; the error is at the first offending line in
    file order, whichever column it is in, and quotes the field as written.
    """
    errors = []
    for j, name in cols:
        col = [r[j] for r in rows]
        if col and not _DIGIT_OR_SPACE[np.frombuffer(b" ".join(col), dtype=np.uint8)].all():
            r = next(i for i, t in enumerate(col) if not _DIGIT_BYTES[np.frombuffer(t, dtype=np.uint8)].all())
            errors.append((r, f"{name} is {token_text(col[r])!r}, not a positive integer node id"))
        bad = (values[:, j] < 1) | (values[:, j] > MAX_COUNT)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            errors.append((r, f"{name} {token_text(col[r])} is outside 1..{MAX_COUNT} (int32 node ids)"))
    if errors:
        r, msg = min(errors, key=lambda e: e[0])
        raise ParseError(path, int(lines[r]), msg)
    return [values[:, j].astype(np.int64) for j, _ in cols]


def _decimals(tokens):
    """Number of significant decimal places of each numeric token (``"0.450"`` -> 2, ``"1.5e-3"`` -> 4)."""
    if not tokens.size:
        return np.zeros(0, dtype=np.int64)
    dot = np.char.find(tokens, b".")
    stripped = np.char.rstrip(tokens, b"0")
    d = np.where(dot >= 0, np.char.str_len(stripped) - dot - 1, 0).astype(np.int64)
    has_e = (np.char.find(tokens, b"e") >= 0) | (np.char.find(tokens, b"E") >= 0)
    for i in np.flatnonzero(has_e):
        try:
            exp = Decimal(tokens[i].decode()).normalize().as_tuple().exponent
        except InvalidOperation:  # cannot happen after _parse_numbers; keep the plain count
            continue
        d[i] = max(0, -int(exp))
    return d


@dataclass
class TntpNet:
    """The parsed content of a ``_net.tntp`` file (what :func:`read_tntp_net` returns).

    Attributes
    ----------
    path : str
    columns : list of str
        Standard column names (see :data:`STANDARD_COLUMNS`), from the header row or assumed.
    header_line : int or None
        1-based line of the ``~`` header row; None when the columns were assumed.
    metadata : dict str -> (str, int)
        ``TAG`` (upper case, inner spaces single) -> (value text, 1-based line).
    tokens : list of list of bytes, length m
        Every link row's ``k = len(columns)`` fields as written (for messages: :meth:`text`).
    lines : ndarray int64, shape (m,)
        1-based line of each link row.
    values : ndarray float64, shape (m, k)
        The fields as numbers.
    tail, head : ndarray int64, shape (m,)
        External (1-based) node ids of each link.
    n_nodes : int or None
        ``<NUMBER OF NODES>``; every link's node ids were checked to lie in ``1..n_nodes``.
    column_units : dict str -> (str, str, int, str)
        Standard column name -> (unit text, where, 1-based line, the name as written) for each column
        whose name states a unit in parentheses: in the header row (where ``"header row"``) or, for
        columns the header row gives without one, in the ``<ORIGINAL HEADER>`` metadata line (where
        ``"<ORIGINAL HEADER>"``). The text is not checked here (see :func:`load_tntp`).
    """

    path: str
    columns: list
    header_line: int | None
    metadata: dict
    tokens: list
    lines: np.ndarray
    values: np.ndarray
    tail: np.ndarray
    head: np.ndarray
    n_nodes: int | None
    column_units: dict = field(default_factory=dict)

    def meta_int(self, tag):
        """Integer value of metadata ``tag`` (None when absent); ParseError at its line if not an integer."""
        if tag not in self.metadata:
            return None
        text, line = self.metadata[tag]
        if not re.fullmatch(r"\d+", text):
            raise ParseError(self.path, line, f"<{tag}> is {text[:40]!r}, not a non-negative integer")
        return int(text)

    def text(self, r, j) -> str:
        """Field ``j`` of link row ``r`` as written in the file."""
        return token_text(self.tokens[r][j])

    def column_tokens(self, j):
        """bytes array (m,) of column ``j`` as written."""
        return np.array([t[j] for t in self.tokens], dtype=bytes) if self.tokens else np.zeros(0, dtype=bytes)

    def column(self, name):
        """Position of column ``name``; ParseError listing the columns when the file has no such column."""
        if name not in self.columns:
            where = f"the header row (line {self.header_line})" if self.header_line else "the assumed standard columns"
            raise ParseError(self.path, self.header_line, f"no column {name!r}; {where} gives {self.columns}")
        return self.columns.index(name)


def read_tntp_net(path):
    """Read a TNTP ``_net.tntp`` file: metadata, columns and link rows, checked.

    Parameters
    ----------
    path : str or path-like
        ``*_net.tntp`` or ``*_net.tntp.gz`` (a leading UTF-8 BOM is accepted).

    Returns
    -------
    TntpNet

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ParseError
        Naming the file and 1-based line: a metadata line that is not ``<TAG> value`` or comes after
        ``<END OF METADATA>``, a metadata block without ``<END OF METADATA>``, a link row before it, a
        ``<NUMBER OF NODES>`` / ``<NUMBER OF LINKS>`` that is not an integer or exceeds the int32 ids
        (checked before anything is built), a ``<NUMBER OF LINKS>`` that differs from the rows in the
        file, a link row with a field count other than the header's (a closing ``;`` is optional), with
        a field that is not a (finite) number, a node id that is not a positive integer or lies
        outside ``1..<NUMBER OF NODES>``, or a truncated gzip file. Fields are quoted as written.
    """
    path = os.fspath(path)
    data = read_text_bytes(path)
    lines = data.split(b"\n")
    metadata = {}
    in_meta = False  # inside a metadata block (a '<' line seen, no END yet)
    meta_done = False
    meta_start = None
    columns = None
    header_line = None
    header_units = {}
    rows, row_lines = [], []
    for i, raw in enumerate(lines):
        t = raw.strip()
        if not t:
            continue
        if t[:1] == b"<":
            if meta_done or rows:
                raise ParseError(path, i + 1, "metadata line after <END OF METADATA> or after the link rows")
            mt = re.fullmatch(rb"<([^<>]*)>\s*(.*)", t, flags=re.S)
            if mt is None:
                raise ParseError(path, i + 1, f"bad metadata line {token_text(t)!r}; expected '<TAG> value'")
            tag = " ".join(mt.group(1).decode(errors="replace").upper().split())
            if not in_meta:
                in_meta, meta_start = True, i + 1
            if tag == "END OF METADATA":
                in_meta, meta_done = False, True
                continue
            if tag in metadata:
                raise ParseError(path, i + 1, f"<{tag}> given twice (first on line {metadata[tag][1]})")
            metadata[tag] = (mt.group(2).decode(errors="replace").strip(), i + 1)
            continue
        if t[:1] == b"~":
            if columns is None and not rows:
                fields = _header_fields(t)
                names = [f[0] for f in fields]
                if "init_node" in names and "term_node" in names:
                    columns, header_line = names, i + 1
                    header_units = {nm: (u, "header row", i + 1, written) for nm, u, written in fields if u}
            continue
        if in_meta:
            raise ParseError(path, i + 1, f"link row inside the metadata block opened on line {meta_start} "
                                          "(no <END OF METADATA> before it)")
        rows.append((t[:-1] if t.endswith(b";") else t).split())  # the closing ';' is optional
        row_lines.append(i + 1)
    if in_meta:
        raise ParseError(path, meta_start, "metadata block without <END OF METADATA>")
    net = TntpNet(path, [], header_line, metadata, rows, np.asarray(row_lines, np.int64), np.zeros((0, 0)),
                  np.zeros(0, np.int64), np.zeros(0, np.int64), None)
    n_nodes = net.meta_int("NUMBER OF NODES")
    if n_nodes is not None:
        check_count(path, metadata["NUMBER OF NODES"][1], n_nodes, "nodes")
    n_links = net.meta_int("NUMBER OF LINKS")
    if n_links is not None:
        check_count(path, metadata["NUMBER OF LINKS"][1], n_links, "links")
        if n_links != len(rows):
            raise ParseError(path, metadata["NUMBER OF LINKS"][1],
                             f"<NUMBER OF LINKS> is {n_links} but the file has {len(rows)} link rows")
    if columns is None:
        k = len(rows[0]) if rows else len(STANDARD_COLUMNS)
        columns = list(STANDARD_COLUMNS[:k]) + [f"column_{j + 1}" for j in range(len(STANDARD_COLUMNS), k)]
    k = len(columns)
    for r, toks in enumerate(rows):
        if len(toks) != k:
            src = f"the header row (line {header_line})" if header_line else f"the first link row (line {row_lines[0]})"
            raise ParseError(path, row_lines[r], f"{len(toks)} fields, expected {k} as in {src}")
    for name in ("init_node", "term_node"):
        if name not in columns:
            raise ParseError(path, header_line, f"no {name!r} column; the header row gives {columns}")
    values = _parse_numbers(path, rows, net.lines, columns, k)
    jt, jh = columns.index("init_node"), columns.index("term_node")
    tail, head = _check_ids(path, rows, [(jt, "init_node"), (jh, "term_node")], values, net.lines)
    if n_nodes is not None and tail.size:
        bad_t, bad_h = tail > n_nodes, head > n_nodes
        if bad_t.any() or bad_h.any():
            r = int(np.flatnonzero(bad_t | bad_h)[0])  # the first such line
            nm, j = ("init_node", jt) if bad_t[r] else ("term_node", jh)
            raise ParseError(path, int(net.lines[r]), f"{nm} {net.text(r, j)} outside 1..{n_nodes} (<NUMBER OF "
                                                      f"NODES> on line {metadata['NUMBER OF NODES'][1]})")
    net.columns, net.values = columns, values
    net.tail, net.head, net.n_nodes = tail, head, n_nodes
    if "ORIGINAL HEADER" in metadata:
        text, line = metadata["ORIGINAL HEADER"]
        for nm, u, written in _header_fields(text):
            if u and nm in columns and nm not in header_units:
                header_units[nm] = (u, "<ORIGINAL HEADER>", line, written)
    net.column_units = header_units
    return net


@dataclass
class TntpNodes:
    """The parsed content of a ``_node.tntp`` file (what :func:`read_tntp_nodes` returns).

    Attributes
    ----------
    path : str
    ids : ndarray int64, shape (k,)
        External node ids, in file order (unique).
    xy : ndarray float64, shape (k, 2)
        x and y (or longitude and latitude) of each node.
    lines : ndarray int64, shape (k,)
        1-based line of each node row.
    lonlat : bool
        True when the header names lon/lat columns, or when every coordinate lies in
        [-180, 180] x [-90, 90] and at least 90 % of them are written with 4 or more decimals (degrees
        at about 10 m resolution or finer); False for planar coordinates (the common case).
    """

    path: str
    ids: np.ndarray
    xy: np.ndarray
    lines: np.ndarray
    lonlat: bool


def read_tntp_nodes(path):
    """Read a TNTP ``_node.tntp`` coordinate file.

    Parameters
    ----------
    path : str or path-like
        ``*_node.tntp`` or ``*_node.tntp.gz`` (a leading UTF-8 BOM is accepted).

    Returns
    -------
    TntpNodes

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ParseError
        Naming the file and 1-based line: a header row without node, x and y columns, a row whose field
        count differs from the header's (or from 3 without a header), a missing ``;`` when the header
        ends with one, a node id that is not a positive integer within int32, a repeated id, a
        coordinate that is not a finite number, or a truncated gzip file.
    """
    path = os.fspath(path)
    data = read_text_bytes(path)
    lines = data.split(b"\n")
    names, header_line, need_semicolon = None, None, None
    rows, row_lines = [], []
    for i, raw in enumerate(lines):
        t = raw.strip()
        if not t or t[:1] == b"~":
            continue
        first = t.split()[0]
        if names is None and not rows and not re.fullmatch(rb"[-+]?[0-9.]+;?", first):
            names = [_NODE_ALIASES.get(re.sub(r"[\s\-]+", "_", n.strip().lower()), n.strip().lower())
                     for n in _header_names(t)]
            header_line = i + 1
            need_semicolon = t.endswith(b";")
            if "node" not in names or not (("x" in names and "y" in names) or ("lon" in names and "lat" in names)):
                raise ParseError(path, i + 1, f"node file header {token_text(t)!r} does not name node, x and y "
                                              "columns")
            continue
        if need_semicolon is None:
            need_semicolon = t.endswith(b";")
        if t.endswith(b";"):
            t = t[:-1]
        elif need_semicolon:
            raise ParseError(path, i + 1, "node row does not end with ';' (the header row does)")
        rows.append(t.split())
        row_lines.append(i + 1)
    if names is None:
        names = ["node", "x", "y"]
    k = len(names)
    for r, toks in enumerate(rows):
        if len(toks) != k:
            src = f"the header row (line {header_line})" if header_line else "'node x y'"
            raise ParseError(path, row_lines[r], f"{len(toks)} fields, expected {k} as in {src}")
    lines_arr = np.asarray(row_lines, dtype=np.int64)
    is_lonlat = "lon" in names and "lat" in names
    jx, jy = (names.index("lon"), names.index("lat")) if is_lonlat else (names.index("x"), names.index("y"))
    jn = names.index("node")
    values = _parse_numbers(path, rows, lines_arr, names, k)
    (ids,) = _check_ids(path, rows, [(jn, "node id")], values, lines_arr)
    xy = np.ascontiguousarray(values[:, [jx, jy]])
    order = np.argsort(ids, kind="stable")
    dup = np.flatnonzero(ids[order][1:] == ids[order][:-1])
    if dup.size:
        r = int(order[dup + 1].min())
        first = int(order[np.flatnonzero(ids[order] == ids[r])[0]])
        raise ParseError(path, int(lines_arr[r]), f"node id {token_text(rows[r][jn])} appears twice (first on line "
                                                  f"{int(lines_arr[first])})")
    if not is_lonlat and xy.size:
        in_range = bool((np.abs(xy[:, 0]) <= 180).all() and (np.abs(xy[:, 1]) <= 90).all())
        if in_range:
            toks = np.array([t for r in rows for t in (r[jx], r[jy])], dtype=bytes)
            is_lonlat = bool((_decimals(toks) >= 4).mean() >= 0.9)
    return TntpNodes(path, ids, xy, lines_arr, is_lonlat)


def matching_node_path(net_path):
    """The ``X_node.tntp[.gz]`` file beside ``X_net.tntp[.gz]``, or None (also for other file names)."""
    net_path = os.fspath(net_path)
    d, base = os.path.split(net_path)
    mt = re.fullmatch(r"(.*)_net\.tntp(\.gz)?", base, flags=re.I)
    if mt is None:
        return None
    for ext in ("_node.tntp.gz", "_node.tntp"):
        p = os.path.join(d, mt.group(1) + ext)
        if os.path.exists(p):
            return p
    return None


def _weight_columns(weights):
    if isinstance(weights, str):
        return {weights: weights}
    if isinstance(weights, Mapping):
        return {str(k): _norm(v) for k, v in weights.items()}
    return {_norm(c): _norm(c) for c in weights}


def _quantity_of(column):
    return {"length": "length", "free_flow_time": "time"}.get(column)


def _base_unit(net, quantity, given):
    """(Unit of one step of the file's numbers, where it came from) for a length or time column."""
    arg = _UNIT_ARGS[quantity]
    if given is not None:
        u = parse_unit(given)
        if u.quantity != quantity or u.scale is None:
            raise ValueError(f"{arg}={given!r} is not a known {quantity} unit with a scale (pass a Unit, or one of "
                             f"'mi', 'km', 'm', 'ft' / 'min', 's', 'h')")
        return u, "given by the caller"
    for tag, (text, line) in net.metadata.items():
        words = tag.split()
        is_unit_tag = any(w.startswith("UNIT") for w in words)
        if not is_unit_tag:
            continue
        if (quantity == "length" and ("LENGTH" in words or "DISTANCE" in words)) or \
                (quantity == "time" and "TIME" in words):
            u = parse_unit(text)
            if u.quantity != quantity or u.scale is None:
                raise ParseError(net.path, line, f"<{tag}> is {text[:40]!r}, not a known {quantity} unit "
                                                 f"(pass {arg}=... to say what it is)")
            note = f"TNTP {quantity} unit from the file's <{tag}> metadata (line {line})"
            return replace(u, note=note), "metadata"
    column = "length" if quantity == "length" else "free_flow_time"
    if column in net.column_units:
        text, where, line, written = net.column_units[column]
        u = _UNIT_SPELLINGS.get(text.lower()) or parse_unit(text)
        if u.quantity != quantity or u.scale is None:
            raise ParseError(net.path, line, f"{where} names the {column} column {written!r}: {text[:40]!r} is not a "
                                             f"known {quantity} unit (pass {arg}=... to say what it is)")
        note = f"TNTP {quantity} unit {u.symbol} from the column name {written!r} in the file's {where} (line {line})"
        return replace(u, note=note), ("metadata" if where.startswith("<") else where)
    base = _UNIT_BASES[quantity]
    what = "length column" if quantity == "length" else "free_flow_time column"
    note = (f"TNTP {what}: the file states no unit; {base.symbol} assumed (the usual TNTP convention; pass "
            f"{arg}=... if it is not)")
    return replace(base, note=note), "assumed"


def _integer_weights(net, column, factor):
    """Positive int64 weights from a numeric column, and the numbers describing the conversion.

    Returns (weights, factor, n_zero_raised, n_rounded). ``factor=None`` picks the power of ten.
    """
    j = net.column(column)
    v = net.values[:, j]
    toks = net.column_tokens(j)
    path, lines = net.path, net.lines
    neg = v < 0
    if neg.any():
        r = int(np.flatnonzero(neg)[0])
        raise ParseError(path, int(lines[r]), f"{column} is {token_text(toks[r])}: negative {column} is not allowed")
    pos = v > 0
    if factor is None:
        dec = _decimals(toks)
        k = int(dec.max()) if dec.size else 0  # the exact power: every value becomes an integer
        vmax = float(v.max()) if v.size else 0.0
        if vmax * 10.0**k > MAX_WEIGHT:
            # Too many decimals to keep exactly within int32: the largest power that fits, as long as the
            # smallest positive value still rounds to 1 or more.
            kmin = 0
            vmin = float(v[pos].min())
            while np.rint(vmin * 10.0**kmin) < 1:
                kmin += 1
            while k > kmin and vmax * 10.0**k > MAX_WEIGHT:
                k -= 1
            if vmax * 10.0**k > MAX_WEIGHT and kmin > 0:
                r = int(np.argmax(v))
                r_min = int(np.flatnonzero(pos)[np.argmin(v[pos])])
                raise ParseError(path, int(lines[r]),
                                 f"{column} {token_text(toks[r])} cannot be an int32 weight in the same unit as the "
                                 f"smallest positive {column}, {token_text(toks[r_min])} (line {int(lines[r_min])}): "
                                 f"x{10**k} keeps that one >= 1 but takes this one above {MAX_WEIGHT}")
        factor = 10**k  # with k == 0 a value above int32 is reported below, as for an explicit scale
    w = np.rint(v * factor)
    lost = pos & (w < 1)
    if lost.any():
        r = int(np.flatnonzero(lost)[0])
        raise ParseError(path, int(lines[r]), f"{column} {token_text(toks[r])} x {factor:g} rounds to 0: pass a "
                                              "larger scale")
    big = w > MAX_WEIGHT
    if big.any():
        r = int(np.flatnonzero(big)[0])
        raise ParseError(path, int(lines[r]), f"{column} {token_text(toks[r])} x {factor:g} exceeds int32 "
                                              f"(at most {MAX_WEIGHT}); pass a smaller scale")
    # Values the factor does not make whole (beyond float noise: |v*f| < 2**31 has an error below 1e-6).
    n_rounded = int(np.count_nonzero(np.abs(v * factor - w) > 1e-6))
    zero = ~pos
    w[zero] = 1
    return w.astype(np.int64), factor, int(np.count_nonzero(zero)), n_rounded


def load_tntp(net_path, node_path="auto", *, weights=("free_flow_time", "length"), length_unit=None, time_unit=None,
              scale=None, name=None, coord_system="auto"):
    """Load a TNTP road network (``_net.tntp`` links plus, when found, ``_node.tntp`` coordinates).

    Parameters
    ----------
    net_path : str or path-like
        ``X_net.tntp`` or ``X_net.tntp.gz`` (any ``.tntp[.gz]`` name is read the same way).
    node_path : "auto", str, path-like or None
        Coordinates; ``"auto"`` uses ``X_node.tntp.gz`` / ``X_node.tntp`` beside ``X_net.tntp[.gz]``
        when it exists; None loads no coordinates.
    weights : str, sequence of str, or mapping weight name -> column
        Link columns that become weights, the first being the default metric. Default: the free-flow
        time (``free_flow_time``), then the length (``length``).
    length_unit, time_unit : Unit or str, optional
        Unit of the file's ``length`` / ``free_flow_time`` numbers (a :class:`~gpuroute.graph.units.Unit`
        or a known symbol: ``"mi"``, ``"km"``, ``"m"``, ``"ft"`` / ``"min"``, ``"s"``, ``"h"``).
        Default: a ``<LENGTH UNITS>`` / ``<TIME UNITS>``-style metadata line when the file has one,
        else the unit the column's name states in the header row or the ``<ORIGINAL HEADER>`` line
        (``length (km)``, ``fftt (min)``), else miles / minutes, marked as assumed. The unit's
        ``note`` says where it came from (tag or column name, and line).
    scale : number or mapping weight name -> number, optional
        Factor applied to a column before rounding to integers. Default: per column, the smallest
        power of ten that makes every value an integer (a column written with 3 decimals is
        multiplied by 1000, one with 2 by 100, integers by 1); if that would exceed int32, the largest
        power of ten that fits while the smallest positive value still rounds to at least 1 (the
        rounded values are counted in ``meta["weights_rounded"]``).
    name : str, optional
        Graph name; default: the file name without ``_net.tntp[.gz]`` (e.g. ``"ChicagoRegional"``).
    coord_system : {"auto", "planar", "lonlat"}
        How to read the node file's coordinates. ``"auto"``: lon/lat when the header names lon/lat
        columns or the values are clearly degrees (see :class:`TntpNodes`), else planar.

    Returns
    -------
    RoadGraph
        * Nodes: ``1..<NUMBER OF NODES>`` when the metadata gives the count (nodes that no link uses
          stay as isolated nodes; Chicago: 12,982 nodes, 12,979 of them in links), else the ids that
          the links and the node file use; ``node_ids`` (int64) holds the external TNTP ids.
        * Weights (int32, positive): each column times its scale, rounded. The unit is the column's
          unit divided by the scale (``scaled(MILE, 100)``, symbol ``"mi/100"``; ``"min/1000"``).
          A zero length or free-flow time (zone connectors often have one) cannot be a weight: it is
          raised to 1 step, the smallest positive value, and counted per weight in
          ``meta["zero_weights_raised"]``. A negative value is an error.
        * Arc attributes: ``capacity`` (float64, unit ``veh/h``, the TNTP convention) and ``link_type``
          (int64, or float64 if the file writes fractions) when the file has those columns.
        * ``meta``: ``source``, ``nodes_source``, ``format="tntp"``, ``weight_scale`` and
          ``weights_rounded`` (per weight), ``zero_weights_raised``, ``units_source`` (per quantity:
          ``"given by the caller"``, ``"metadata"`` (a ``<... UNITS>`` line or ``<ORIGINAL HEADER>``),
          ``"header row"`` or ``"assumed"``), ``zones`` and ``first_thru_node``
          from the metadata (zone centroids ``1..first_thru_node-1`` are ordinary nodes here: paths may
          pass through them), and RoadGraph's self-loop / parallel-arc counts.

    Raises
    ------
    FileNotFoundError
        ``net_path``, or an explicit ``node_path``, does not exist.
    ValueError
        A bad ``length_unit`` / ``time_unit``, ``scale`` or ``coord_system`` argument.
    ParseError
        Naming the file and 1-based line: see :func:`read_tntp_net` and :func:`read_tntp_nodes`; also
        a weight column the file does not have, a negative weight value, a value that rounds to 0 or
        exceeds int32 after scaling (quoted as written), a metadata or column-name unit that is not a
        known length / time unit, a node the links use that the node file does not list ("unknown node"), a node-file
        id outside ``1..<NUMBER OF NODES>``, a node without coordinates, or lon/lat coordinates out of
        range.
    """
    net_path = os.fspath(net_path)
    if coord_system not in ("auto", "planar", "lonlat"):
        raise ValueError(f"coord_system must be 'auto', 'planar' or 'lonlat', got {coord_system!r}")
    cols = _weight_columns(weights)
    if not cols:
        raise ValueError("weights must name at least one column")
    if scale is None or isinstance(scale, Mapping):
        factors = dict(scale or {})
        unknown = set(factors) - set(cols)
        if unknown:
            raise ValueError(f"scale names {sorted(unknown)}, which are not weights ({list(cols)})")
    else:
        factors = {k: scale for k in cols}
    for k, f in factors.items():
        if not (isinstance(f, (int, float, np.integer, np.floating)) and np.isfinite(f) and f > 0):
            raise ValueError(f"scale for {k!r} must be a positive number, got {f!r}")

    net = read_tntp_net(net_path)
    for c in cols.values():
        net.column(c)
    units_given = {"length": length_unit, "time": time_unit}
    base_units = {}
    for q in ("length", "time"):
        if any(_quantity_of(c) == q for c in cols.values()):
            base_units[q] = _base_unit(net, q, units_given[q])

    ws, units, wscale, zeros, rounded = {}, {}, {}, {}, {}
    for wname, col in cols.items():
        w, f, nz, nr = _integer_weights(net, col, factors.get(wname))
        ws[wname] = w
        q = _quantity_of(col)
        base = base_units[q][0] if q else Unit("", "other", None, note=f"TNTP column {col!r}")
        fs = str(int(f)) if float(f).is_integer() else f"{f:g}"  # "km/1000000", not "km/1e+06"
        units[wname] = base if f == 1 else scaled(base, f, symbol=f"{base.symbol}/{fs}" if base.symbol else f"1/{fs}")
        wscale[wname], zeros[wname], rounded[wname] = f, nz, nr

    attrs, attr_units = {}, {}
    if "capacity" in net.columns and "capacity" not in ws:
        attrs["capacity"] = np.ascontiguousarray(net.values[:, net.columns.index("capacity")], dtype=np.float64)
        attr_units["capacity"] = Unit("veh/h", "other", None, note="TNTP capacity: vehicles per hour (not stated "
                                                                   "by the file; the usual TNTP convention)")
    if "link_type" in net.columns and "link_type" not in ws:
        lt = net.values[:, net.columns.index("link_type")]
        integral = bool((lt == np.round(lt)).all() and (np.abs(lt) < 2.0**62).all())
        attrs["link_type"] = lt.astype(np.int64) if integral else np.ascontiguousarray(lt, dtype=np.float64)

    if node_path == "auto":
        node_path = matching_node_path(net_path)
    nodes = read_tntp_nodes(node_path) if node_path is not None else None
    if node_path is not None:
        node_path = os.fspath(node_path)

    # Node set and dense internal ids.
    if net.n_nodes is not None:
        n = net.n_nodes
        node_ids = np.arange(1, n + 1, dtype=np.int64)
        if nodes is not None and nodes.ids.size:
            bad = nodes.ids > n
            if bad.any():
                r = int(np.flatnonzero(bad)[0])
                raise ParseError(node_path, int(nodes.lines[r]),
                                 f"node id {int(nodes.ids[r])} outside 1..{n} (<NUMBER OF NODES> in {net_path}, "
                                 f"line {net.metadata['NUMBER OF NODES'][1]})")
        tail, head = net.tail - 1, net.head - 1
    else:
        parts = [net.tail, net.head] + ([nodes.ids] if nodes is not None else [])
        node_ids = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        n = int(node_ids.size)
        tail, head = np.searchsorted(node_ids, net.tail), np.searchsorted(node_ids, net.head)

    coords, cs = None, ("planar" if coord_system == "auto" else coord_system)
    if nodes is not None:
        # Every node a link uses must be in the node file (else: unknown node, at the link's line).
        listed = np.zeros(n, dtype=bool)
        pos = np.searchsorted(node_ids, nodes.ids)
        listed[pos] = True
        miss_t, miss_h = ~listed[tail], ~listed[head]
        if miss_t.any() or miss_h.any():
            r = int(np.flatnonzero(miss_t | miss_h)[0])  # the first such line
            nm, ext = ("init_node", net.tail) if miss_t[r] else ("term_node", net.head)
            raise ParseError(net_path, int(net.lines[r]), f"{nm} {int(ext[r])} is an unknown node: the node "
                                                          f"file {node_path} does not list it")
        if not listed.all():
            i = int(np.flatnonzero(~listed)[0])
            raise ParseError(node_path, None, f"no coordinates for node {int(node_ids[i])}, one of the {n} nodes "
                                              f"(<NUMBER OF NODES> in {net_path}); pass node_path=None to load the "
                                              "graph without coordinates")
        coords = np.empty((n, 2), dtype=np.float64)
        coords[pos] = nodes.xy
        cs = ("lonlat" if nodes.lonlat else "planar") if coord_system == "auto" else coord_system
        if cs == "lonlat":
            bad = (np.abs(nodes.xy[:, 0]) > 180) | (np.abs(nodes.xy[:, 1]) > 90)
            if bad.any():
                r = int(np.flatnonzero(bad)[0])
                raise ParseError(node_path, int(nodes.lines[r]),
                                 f"lon/lat {nodes.xy[r, 0]:g} {nodes.xy[r, 1]:g} outside [-180, 180] x [-90, 90] "
                                 "(pass coord_system='planar' for x/y coordinates)")

    meta = {"source": net_path, "nodes_source": node_path, "format": "tntp", "weight_scale": wscale,
            "weights_rounded": rounded, "zero_weights_raised": zeros,
            "units_source": {q: src for q, (_, src) in base_units.items()}}
    for tag, key in (("NUMBER OF ZONES", "zones"), ("FIRST THRU NODE", "first_thru_node")):
        v = net.meta_int(tag)
        if v is not None:
            meta[key] = v
    gname = name or re.sub(r"(_net)?\.tntp(\.gz)?$", "", os.path.basename(net_path), flags=re.I)
    try:
        return RoadGraph.from_arcs(n, tail, head, ws, units=units, coords=coords, name=gname, node_ids=node_ids,
                                   coord_system=cs, meta=meta, arc_attrs=attrs, attr_units=attr_units)
    except GraphError as e:
        raise ParseError(net_path, None, str(e)) from None
