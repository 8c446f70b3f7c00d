"""Road graphs from in-memory edge lists: NumPy arrays, pandas data frames, CSV files, SciPy sparse
matrices and NetworkX graphs.

External node ids that are not already ``0..n-1`` are renumbered densely (cuGraph style). Integer ids
are kept in ``graph.node_ids`` (int64); other labels (strings, tuples, ...) are kept as a Python list in
``graph.meta["node_labels"]``, so that internal node ``i`` is ``node_labels[i]``. Parallel arcs keep
the lightest value of each weight and self-loops are dropped (see :meth:`RoadGraph.from_arcs`).
"""
from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping

import numpy as np

from ..graph.errors import GraphError, ParseError
from ..graph.road_graph import RoadGraph
from ._text import read_text_bytes


def _is_integral(a):
    """Whether a 1-D array holds integers (int dtype, or floats that are all whole and finite)."""
    if a.dtype.kind in "iu":
        return True
    if a.dtype.kind == "f":
        return bool(np.isfinite(a).all() and (a == np.round(a)).all())
    return False


def _is_missing(x):
    """Whether one id is a missing value: None, pandas NA / NaT, or a float that is NaN, infinite or
    fractional (a float id must be a whole number, so that ``0.0`` and ``0`` are the same node)."""
    if x is None or type(x).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(x, (float, np.floating)):
        return not (math.isfinite(x) and float(x).is_integer())
    return False


def _check_ids(a, column, row="arc"):
    """Reject node ids that cannot name a node: NaN, infinite or fractional floats, None, pandas NA.

    Without this check a NaN id silently became a node of its own (and, NaN breaking the sort of the
    labels, ``0`` and ``0.0`` could become two nodes).

    Parameters
    ----------
    a : ndarray, shape (m,)
        Ids in input order.
    column : str
        How the message names the ids (``"tail"``, ``"column 'source'"``).
    row : str
        How the message names a position (``"arc"``, ``"row"``).

    Raises
    ------
    GraphError
        At the first bad id, naming ``column``, the input position and the value.
    """
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a)
        bad[~bad] = a[~bad] != np.round(a[~bad])
    elif a.dtype.kind == "O":
        bad = np.fromiter((_is_missing(x) for x in a.tolist()), dtype=bool, count=a.size)
    else:
        return
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        x = a[i]
        shown = repr(float(x)) if isinstance(x, (float, np.floating)) else str(x)
        raise GraphError(f"{column} of {row} {i} is {shown}: node ids must be integers or labels, not NaN, "
                         "infinite or fractional numbers (or missing values)")


def _renumber(tail, head, node_ids, n_nodes):
    """Map external ids to dense 0-based ids. Returns (n, tail, head, node_ids int64 or None, labels or None)."""
    tail = np.asarray(tail)
    head = np.asarray(head)
    if tail.shape != head.shape or tail.ndim != 1:
        raise GraphError(f"tail and head must be 1-D arrays of equal length (got {tail.shape}, {head.shape})")
    _check_ids(tail, "tail")
    _check_ids(head, "head")
    if node_ids is not None and not (isinstance(node_ids, str) and node_ids == "auto"):
        # Explicit external ids, defining the node order (and any isolated nodes).
        labels = np.asarray(node_ids)
        if labels.ndim != 1:
            raise GraphError("node_ids must be 1-D (the external id of each node)")
        _check_ids(labels, "node_ids", "entry")
        if n_nodes is not None and labels.size != n_nodes:
            raise GraphError(f"n_nodes={n_nodes} but node_ids has {labels.size} entries")
        integral = labels.size == 0 or _is_integral(labels)
        if integral:
            ext = labels.astype(np.int64)
            order = np.argsort(ext, kind="stable")
            sorted_ext = ext[order]
            if sorted_ext.size > 1 and (sorted_ext[1:] == sorted_ext[:-1]).any():
                raise GraphError("node_ids contains a repeated id")

            def lookup(nm, a):
                if a.size and not _is_integral(a):
                    raise GraphError(f"{nm} ids must be integers like node_ids (dtype {a.dtype})")
                a = a.astype(np.int64)
                p = np.minimum(np.searchsorted(sorted_ext, a), max(sorted_ext.size - 1, 0))
                bad = (sorted_ext[p] != a) if sorted_ext.size else np.ones(a.size, dtype=bool)
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise GraphError(f"{nm} of arc {i} is {int(a[i])}, which is not in node_ids")
                return order[p]

            return labels.size, lookup("tail", tail), lookup("head", head), ext, None
        lab = labels.tolist()
        index = {x: i for i, x in enumerate(lab)}
        if len(index) != len(lab):
            raise GraphError("node_ids contains a repeated label")

        def lookup_obj(nm, a):
            out = np.empty(a.size, dtype=np.int64)
            for i, x in enumerate(a.tolist()):
                try:
                    out[i] = index[x]
                except (KeyError, TypeError):
                    raise GraphError(f"{nm} of arc {i} is {x!r}, which is not in node_ids") from None
            return out

        return len(lab), lookup_obj("tail", tail), lookup_obj("head", head), None, lab
    if _is_integral(tail) and _is_integral(head):
        t = tail.astype(np.int64)
        h = head.astype(np.int64)
        lo = min(int(t.min()), int(h.min())) if t.size else 0
        hi = max(int(t.max()), int(h.max())) if t.size else -1
        if node_ids is None:
            n = int(n_nodes) if n_nodes is not None else hi + 1
            return n, t, h, None, None  # from_arcs checks the range
        if n_nodes is not None and lo >= 0 and hi < n_nodes:
            return int(n_nodes), t, h, None, None
        uniq, inv = np.unique(np.concatenate([t, h]), return_inverse=True)
        if n_nodes is None and (uniq.size == 0 or (uniq[0] == 0 and uniq[-1] == uniq.size - 1)):
            return uniq.size, t, h, None, None
        if n_nodes is not None and uniq.size != n_nodes:
            raise GraphError(f"n_nodes={n_nodes} but the ids are not in [0, {n_nodes}) and there are "
                             f"{uniq.size} distinct ones; pass node_ids=[...] to give every node's id")
        return uniq.size, inv[:t.size], inv[t.size:], uniq, None
    if node_ids is None:
        raise GraphError(f"node_ids=None needs integer ids 0..n-1, got dtypes {tail.dtype} and {head.dtype}")
    both = np.concatenate([tail.astype(object), head.astype(object)])
    try:
        uniq, inv = np.unique(both, return_inverse=True)
        labels = uniq.tolist()
    except TypeError:  # labels that cannot be sorted together: number them by first appearance
        index = {}
        inv = np.fromiter((index.setdefault(x, len(index)) for x in both.tolist()), dtype=np.int64,
                          count=both.size)
        labels = list(index)
    if n_nodes is not None and len(labels) != n_nodes:
        raise GraphError(f"n_nodes={n_nodes} but the edge list has {len(labels)} distinct labels")
    return len(labels), inv[:tail.size], inv[tail.size:], None, labels


def from_edgelist(tail, head, weights, *, n_nodes=None, node_ids="auto", directed=True, units=None,
                  coords=None, coord_system="lonlat", name="edgelist", meta=None):
    """Build a RoadGraph from arrays of arc endpoints and weights.

    Parameters
    ----------
    tail, head : array_like, shape (m,)
        Endpoints of each arc: integers (floats must be whole numbers: ``0.0`` is node ``0``), or any
        hashable labels (strings, ...). NaN, infinite or fractional floats, None and pandas NA are
        rejected.
    weights : array_like, shape (m,), or mapping name -> array_like, shape (m,)
        Positive integer weights (floats must be whole numbers). A bare array is named ``"weight"``.
    n_nodes : int, optional
        Number of nodes (to include isolated nodes when ids are already ``0..n_nodes-1``).
    node_ids : "auto", None or array_like, shape (n,)
        ``"auto"``: ids that are integers in ``[0, n_nodes)`` (or, without ``n_nodes``, exactly
        ``0..k-1``) are used as they are; anything else is renumbered densely in sorted order.
        ``None``: ids must already be internal ids ``0..n-1``. An array: the external id of every node
        in internal order (so it also names isolated nodes); ``tail``/``head`` are looked up in it.
    directed : bool
        If False, every input edge gives arcs in both directions.
    units, coords, coord_system, name, meta
        As for :class:`RoadGraph`; ``coords`` rows follow the internal node order.

    Returns
    -------
    RoadGraph
        ``node_ids`` (int64, shape (n,)) holds the external integer ids when they were renumbered;
        ``meta["node_labels"]`` (list) holds non-integer labels.

    Raises
    ------
    GraphError
        Arrays of different lengths, a NaN / infinite / fractional / missing id (``"head of arc 3 is
        nan"``), an id that is not in ``node_ids``, an id out of range with ``node_ids=None``, an
        ``n_nodes`` that disagrees with the ids, or a weight that is not a positive integer within int32
        (the message names the arc's position in the input).
    """
    n, t, h, ext_ids, labels = _renumber(tail, head, node_ids, n_nodes)
    if not isinstance(weights, Mapping):
        weights = {"weight": weights}
    ws = {str(k): np.asarray(v) for k, v in weights.items()}
    for k, v in ws.items():
        if v.shape != t.shape:
            raise GraphError(f"weight {k!r} has shape {v.shape}, expected {t.shape} (one value per arc)")
    if not directed:
        t, h = np.concatenate([t, h]), np.concatenate([h, t])
        ws = {k: np.concatenate([v, v]) for k, v in ws.items()}
    meta = dict(meta or {})
    if labels is not None:
        meta["node_labels"] = labels
    return RoadGraph.from_arcs(n, t, h, ws, units=units, coords=coords, name=name, node_ids=ext_ids,
                               coord_system=coord_system, meta=meta)


def _weight_columns(weights):
    if isinstance(weights, str):
        return {weights: weights}
    if isinstance(weights, Mapping):
        return {str(k): v for k, v in weights.items()}
    return {str(c): c for c in weights}


def from_dataframe(df, source="source", target="target", weights=("distance",), *, n_nodes=None,
                   node_ids="auto", directed=True, units=None, name="dataframe", meta=None):
    """Build a RoadGraph from a pandas DataFrame with one row per arc.

    Parameters
    ----------
    df : pandas.DataFrame
    source, target : str
        Columns holding the arc endpoints (integers or labels). A missing value (NaN, None, ``pd.NA``)
        or an infinite or fractional number is an error, not a node.
    weights : str, sequence of str, or mapping weight name -> column
        Weight columns (positive integers, or floats that are whole numbers). The first is the default.
    n_nodes, node_ids, directed, units, name, meta
        As for :func:`from_edgelist`.

    Returns
    -------
    RoadGraph

    Raises
    ------
    KeyError
        A named column is missing (the message lists the frame's columns).
    GraphError
        As for :func:`from_edgelist`; "arc i" is the row's position in ``df``. A bad id names its column
        and row position (``"column 'target' of row 1 is nan"``).
    """
    cols = _weight_columns(weights)
    for c in (source, target, *cols.values()):
        if c not in df.columns:
            raise KeyError(f"column {c!r} not in the data frame; it has {list(df.columns)}")
    for c in (source, target):
        _check_ids(df[c].to_numpy(), f"column {c!r}", "row")
    ws = {k: df[c].to_numpy() for k, c in cols.items()}
    return from_edgelist(df[source].to_numpy(), df[target].to_numpy(), ws, n_nodes=n_nodes, node_ids=node_ids,
                         directed=directed, units=units, name=name, meta=meta)


def read_csv(path, source="source", target="target", weights=("distance",), *, delimiter=",", n_nodes=None,
             node_ids="auto", directed=True, units=None, name=None):
    """Read a CSV edge list (first row: column names; plain or ``.gz``) into a RoadGraph.

    Parameters
    ----------
    path : str or path-like
    source, target : str
        Columns of the arc endpoints. Ids that all parse as numbers are integers (whole numbers such as
        ``"12.0"`` are the id ``12``; ``"nan"``, ``"inf"`` or ``"2.5"`` is an error); otherwise they
        are string labels (kept in ``meta["node_labels"]``).
    weights : str, sequence of str, or mapping weight name -> column
        Weight columns: positive integers (``"12"`` or ``"12.0"``).
    delimiter : str
    n_nodes, node_ids, directed, units
        As for :func:`from_edgelist`.
    name : str, optional
        Default: the file name without ``.csv[.gz]``.

    Returns
    -------
    RoadGraph

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ParseError
        Naming the file and line: a missing column, a row with the wrong number of fields, an empty
        id, a numeric id that is NaN, infinite or fractional, a weight that is not a positive integer
        within int32 (quoted as written in the file), bad UTF-8, or a truncated gzip file. A leading
        UTF-8 BOM is accepted.
    """
    path = os.fspath(path)
    raw = read_text_bytes(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ParseError(path, raw.count(b"\n", 0, e.start) + 1, "not valid UTF-8") from None
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = next(reader, None)
    while header is not None and not header:
        header = next(reader, None)
    if header is None:
        raise ParseError(path, None, "empty file: expected a header row of column names")
    hline = reader.line_num
    header = [c.strip() for c in header]
    cols = _weight_columns(weights)
    pos = {}
    for c in (source, target, *cols.values()):
        if c not in header:
            raise ParseError(path, hline, f"no column {c!r}; the header has {header}")
        pos[c] = header.index(c)
    wanted = [pos[source], pos[target], *[pos[c] for c in cols.values()]]
    width = len(header)
    fields = [[] for _ in wanted]
    line_of = []
    for row in reader:
        if not row:
            continue
        if len(row) != width:
            raise ParseError(path, reader.line_num, f"{len(row)} fields, expected {width} as in the header")
        for lst, j in zip(fields, wanted, strict=True):
            lst.append(row[j].strip())
        line_of.append(reader.line_num)
    line_of = np.asarray(line_of, dtype=np.int64)

    def as_ids(vals, col):
        for r, v in enumerate(vals):
            if not v:
                raise ParseError(path, int(line_of[r]), f"empty {col!r}")
        arr = np.asarray(vals, dtype=str)
        try:
            return arr.astype(np.int64)
        except (ValueError, OverflowError):
            pass
        try:
            f = arr.astype(np.float64)
        except ValueError:
            return arr  # not all numbers: string labels
        # All numbers, some not plain integers: whole ones ("12.0", "1e3") are integer ids like "12";
        # NaN, inf and fractional ones cannot name a node.
        bad = ~np.isfinite(f) | (np.abs(f) >= 2.0**63)
        bad[~bad] = f[~bad] != np.round(f[~bad])
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise ParseError(path, int(line_of[r]), f"{col!r} is {vals[r]!r}: node ids must be integers or "
                                                    "labels, not NaN, infinite or fractional numbers")
        return f.astype(np.int64)

    def as_weight(vals, col):
        arr = np.asarray(vals, dtype=str)
        try:
            w = arr.astype(np.float64)
        except ValueError:
            w = None
        if w is not None:
            bad = ~np.isfinite(w) | (w != np.round(w)) | (w < 1) | (w > np.iinfo(np.int32).max)
            if not bad.any():
                return w.astype(np.int64)
            r = int(np.flatnonzero(bad)[0])
        else:
            r = next(i for i, v in enumerate(vals) if not _float_ok(v))
        raise ParseError(path, int(line_of[r]), f"{col!r} is {vals[r]!r}: weights must be positive integers "
                                                f"within int32")

    t = as_ids(fields[0], source)
    h = as_ids(fields[1], target)
    if (t.dtype.kind == "U") != (h.dtype.kind == "U"):  # one column all-integer, the other not
        t, h = np.asarray(fields[0], dtype=str), np.asarray(fields[1], dtype=str)
    ws = {k: as_weight(fields[2 + i], c) for i, (k, c) in enumerate(cols.items())}
    gname = name or os.path.basename(path).removesuffix(".gz").removesuffix(".csv")
    try:
        return from_edgelist(t, h, ws, n_nodes=n_nodes, node_ids=node_ids, directed=directed, units=units,
                             name=gname, meta={"source": path, "format": "csv"})
    except GraphError as e:
        raise ParseError(path, None, str(e)) from None


def _float_ok(v):
    try:
        float(v)
        return True
    except ValueError:
        return False


def from_scipy(matrix, weight_name="weight", *, unit="", name="scipy", coords=None, coord_system="lonlat"):
    """Build a RoadGraph from a square SciPy sparse matrix: every stored entry ``A[u, v]`` is an arc.

    Unlike ``scipy.sparse.csr_matrix((w, (u, v)))``, which *sums* duplicate entries, duplicate stored
    entries (possible in COO or unsorted CSR input) become parallel arcs and the lightest one is kept.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array, shape (n, n), or dense array_like
        Stored entries are arcs, explicit zeros included (and rejected as zero weights: call
        ``matrix.eliminate_zeros()`` first if zeros mean "no arc"). A dense array is converted with
        ``csr_matrix``, so its zeros mean "no arc".
    weight_name : str
    unit : str
        Unit of the weight ("m", "ds", ...).
    name, coords, coord_system
        As for :class:`RoadGraph`.

    Returns
    -------
    RoadGraph

    Raises
    ------
    GraphError
        The matrix is not square, or an entry is not a positive integer within int32 (message names
        the arc ``u -> v``).
    """
    import scipy.sparse as sp

    if not sp.issparse(matrix):
        matrix = sp.csr_matrix(np.asarray(matrix))
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise GraphError(f"the matrix must be square (n x n), got shape {matrix.shape}")
    coo = matrix.tocoo()  # keeps duplicates and explicit zeros
    n = matrix.shape[0]
    data = np.asarray(coo.data)
    if data.size and (data == 0).any():
        i = int(np.flatnonzero(data == 0)[0])
        raise GraphError(f"stored entry ({int(coo.row[i])}, {int(coo.col[i])}) is an explicit zero: weights must "
                         "be positive (call matrix.eliminate_zeros() if zeros mean 'no arc')")
    return RoadGraph.from_arcs(n, coo.row, coo.col, {weight_name: data}, units={weight_name: unit}, coords=coords,
                               name=name, coord_system=coord_system, meta={"format": "scipy"})


def _object_array(items):
    """A 1-D object array of ``items`` (tuples stay elements instead of becoming rows)."""
    a = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        a[i] = x
    return a


def from_networkx(G, weight="weight", *, default=None, coords=("x", "y"), coord_system="lonlat", units=None,
                  name=None):
    """Build a RoadGraph from a NetworkX graph.

    ``DiGraph``: one arc per edge. ``Graph``: both directions. ``MultiDiGraph`` / ``MultiGraph``: every
    parallel edge is an arc, and the lightest is kept.

    Parameters
    ----------
    G : networkx.Graph, DiGraph, MultiGraph or MultiDiGraph
    weight : str or sequence of str
        Edge attribute(s) used as weights (positive integers, or whole-number floats).
    default : int, optional
        Weight for edges without the attribute; None: such an edge is an error.
    coords : (str, str) or None
        Node attributes holding x/longitude and y/latitude (OSMnx uses ``("x", "y")``); used when every
        node has both.
    coord_system, units
        As for :class:`RoadGraph`.
    name : str, optional
        Default: ``G.name`` or ``"networkx"``.

    Returns
    -------
    RoadGraph
        Nodes in ``G.nodes`` order unless the nodes are exactly ``0..n-1``; ``node_ids`` or
        ``meta["node_labels"]`` map internal ids back to ``G``'s nodes.

    Raises
    ------
    GraphError
        An edge lacks a weight attribute (and ``default`` is None), or a weight is invalid.
    """
    names = [weight] if isinstance(weight, str) else list(weight)
    nodes = list(G.nodes)
    n = len(nodes)
    edges = G.edges(data=True)
    tails, heads = [], []
    cols = {k: [] for k in names}
    for u, v, d in edges:
        tails.append(u)
        heads.append(v)
        for k in names:
            w = d.get(k, default)
            if w is None:
                raise GraphError(f"edge {u!r} -> {v!r} has no attribute {k!r} (pass default=...)")
            cols[k].append(w)
    ws = {k: np.asarray(v) if v else np.zeros(0, dtype=np.int64) for k, v in cols.items()}
    if nodes == list(range(n)):
        node_ids = None
    else:
        node_ids = _object_array(nodes)
        if all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in nodes):
            node_ids = node_ids.astype(np.int64)
    xy = None
    if coords is not None and n:
        cx, cy = coords
        attrs = G.nodes
        if all(cx in attrs[x] and cy in attrs[x] for x in nodes):
            xy = np.array([[attrs[x][cx], attrs[x][cy]] for x in nodes], dtype=np.float64)
    t, h = _object_array(tails), _object_array(heads)
    if node_ids is None or node_ids.dtype != object:
        t, h = t.astype(np.int64), h.astype(np.int64)
    return from_edgelist(t, h, ws, n_nodes=n, node_ids=node_ids, directed=G.is_directed(), units=units,
                         coords=xy, coord_system=coord_system, name=name or G.name or "networkx",
                         meta={"format": "networkx"})
