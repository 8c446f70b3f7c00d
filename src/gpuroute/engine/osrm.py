"""The OSRM v5 vocabulary the engine speaks: error codes, option values, geometry encodings, the
overview simplification, maneuver modifiers and waypoint objects (osrm-backend ``docs/http.md``).

Nothing here routes; :mod:`gpuroute.engine.engine` does, and builds its responses with these helpers.
"""
from __future__ import annotations

import base64
import math
import struct
import threading

import numba
import numpy as np
from numba import njit

from ..geo import EARTH_RADIUS_M
from ..geo.simplify import douglas_peucker_keep, simplify_lonlat
from .legs import round_floats

#: The error codes of OSRM v5 responses (``docs/http.md``, "Responses"); an HTTP server answers each with
#: status 400 and ``{"code": code, "message": message}``.
ERROR_CODES = ("InvalidUrl", "InvalidService", "InvalidVersion", "InvalidOptions", "InvalidQuery", "InvalidValue",
               "NoSegment", "NoRoute", "NoTable", "NoMatch", "NoTrips", "TooBig", "NotImplemented")
#: Values of the ``geometries`` option.
GEOMETRIES = ("polyline", "polyline6", "geojson")
#: Values of the ``overview`` option (``False`` is accepted for ``"false"``).
OVERVIEWS = ("simplified", "full", "false")
#: Annotation names of ``/route`` (``annotations=true`` asks for all of them).
ROUTE_ANNOTATIONS = ("duration", "distance", "datasources", "nodes", "weight", "speed")
#: Annotation names of ``/table``.
TABLE_ANNOTATIONS = ("duration", "distance")


class EngineError(Exception):
    """A request the engine refuses or cannot answer, with its OSRM code.

    Attributes
    ----------
    code : str
        One of :data:`ERROR_CODES` (``"InvalidOptions"``, ``"NoSegment"``, ``"NoRoute"``, ``"TooBig"``, ...).
    message : str
        One line for the client.
    """

    def __init__(self, code, message):
        if code not in ERROR_CODES:
            raise ValueError(f"unknown OSRM error code {code!r}; codes: {ERROR_CODES}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def to_json(self):
        """The OSRM error body: ``{"code": ..., "message": ...}``."""
        return {"code": self.code, "message": self.message}


# ---------------------------------------------------------------------------------- geometries
def encode_geometry(lonlat, geometries):
    """A line in one of OSRM's encodings.

    Parameters
    ----------
    lonlat : array_like of float, shape (k, 2)
        Longitude, latitude in degrees.
    geometries : {"polyline", "polyline6", "geojson"}

    Returns
    -------
    str or dict
        An encoded polyline (Google's algorithm, latitude first, precision 5 or 6) or a GeoJSON
        ``LineString`` with ``[lon, lat]`` positions rounded to 6 decimals.
    """
    pts = np.asarray(lonlat, dtype=np.float64).reshape(-1, 2)
    if geometries == "geojson":
        return {"type": "LineString", "coordinates": np.round(pts, 6).tolist()}
    return encode_polyline(pts, 6 if geometries == "polyline6" else 5)


def encode_polyline(lonlat, precision=5):
    """Google's encoded polyline (latitude first) of lon/lat points: the same string as the ``polyline``
    package's ``encode`` (round half away from zero of ``value * 10**precision``, deltas, zig-zag, 5-bit
    chunks + 63), written by one compiled pass (:func:`_polyline_bytes`)."""
    pts = np.ascontiguousarray(lonlat, dtype=np.float64).reshape(-1, 2)
    if pts.shape[0] == 0:
        return ""
    buf = np.empty(pts.shape[0] * 2 * _POLYLINE_CHUNKS, dtype=np.uint8)
    n = _polyline_bytes(pts, float(10 ** precision), buf)
    return buf[:n].tobytes().decode("ascii")


def encode_geometries(lonlat, starts, ends, geometries):
    """:func:`encode_geometry` of the pieces ``lonlat[starts[i]:ends[i]]`` of one line (a route's steps): a
    list of the same values, the polylines written by one compiled pass for all pieces.

    Parameters
    ----------
    lonlat : array_like of float, shape (k, 2)
    starts, ends : sequence of int, length s
        Row ranges (they may share rows).
    geometries : {"polyline", "polyline6", "geojson"}
    """
    pts = np.ascontiguousarray(lonlat, dtype=np.float64).reshape(-1, 2)
    if geometries == "geojson":
        return [encode_geometry(pts[a:b], geometries) for a, b in zip(starts, ends, strict=True)]
    st = np.asarray(starts, dtype=np.int64).ravel()
    en = np.asarray(ends, dtype=np.int64).ravel()
    if st.size == 0:
        return []
    buf = np.empty(int(np.maximum(en - st, 0).sum()) * 2 * _POLYLINE_CHUNKS, dtype=np.uint8)
    off = np.empty(st.size + 1, dtype=np.int64)
    _polylines_bytes(pts, st, en, float(10 ** (6 if geometries == "polyline6" else 5)), buf, off)
    text = buf[:off[-1]].tobytes().decode("ascii")
    o = off.tolist()
    return [text[o[i]:o[i + 1]] for i in range(st.size)]


#: Most 5-bit chunks of one encoded value (a zig-zagged int64).
_POLYLINE_CHUNKS = 13


@njit(cache=True)
def _polylines_bytes(pts, starts, ends, factor, buf, off):
    """:func:`_polyline_bytes` of each row range ``starts[i]:ends[i]`` of ``pts``, one after the other in
    ``buf``; polyline ``i`` is ``buf[off[i]:off[i + 1]]``."""
    p = 0
    off[0] = 0
    for r in range(starts.size):
        if ends[r] > starts[r]:
            p += _polyline_bytes(pts[starts[r]:ends[r]], factor, buf[p:])
        off[r + 1] = p


@njit(cache=True)
def _polyline_bytes(pts, factor, buf):
    """The encoded polyline of float64 (k, 2) lon/lat ``pts`` into the uint8 buffer ``buf`` (at least
    ``26 k`` bytes); its length. Per value (latitude, then longitude): ``q = copysign(floor(|v| + 0.5), v)``
    of ``v = x * factor``, the difference to the previous point's, zig-zagged, in 5-bit chunks (low first,
    ``0x20`` on all but the last) plus 63."""
    p = 0
    prev0 = 0
    prev1 = 0
    for i in range(pts.shape[0]):
        for c in range(2):
            v = pts[i, 1 - c] * factor
            q = np.int64(math.copysign(math.floor(abs(v) + 0.5), v))
            if c == 0:
                d = q - prev0
                prev0 = q
            else:
                d = q - prev1
                prev1 = q
            d = d << 1
            if d < 0:
                d = ~d
            while d >= 0x20:
                buf[p] = (0x20 | (d & 0x1F)) + 63
                p += 1
                d >>= 5
            buf[p] = d + 63
            p += 1
    return p


#: Douglas-Peucker on lon/lat lines (metres) and on planar points: the one implementation, in
#: :mod:`gpuroute.geo.simplify` (issue 19).
simplify = simplify_lonlat


_DEG = math.pi / 180.0
#: Metres per degree of latitude (:func:`gpuroute.geo.segments.local_xy`'s frame).
_M_PER_DEG = _DEG * EARTH_RADIUS_M


def overview_polyline(points, simplified, tolerance_m, precision):
    """A route's overview as an encoded polyline in one compiled call: the same string as
    :func:`encode_geometry` of :func:`gpuroute.geo.simplify.simplify_lonlat` of
    ``points`` (``simplified``; else of ``points`` as they are), the same arithmetic.

    Parameters
    ----------
    points : float64 (k, 2), C-contiguous
        Longitude, latitude (degrees); k >= 1.
    simplified : bool
        Douglas-Peucker with ``tolerance_m`` (metres, finite, >= 0) first.
    precision : {5, 6}

    Returns
    -------
    str

    Raises
    ------
    ValueError
        ``tolerance_m`` negative or not finite (with ``simplified``).
    """
    tol = float(tolerance_m)
    if simplified and not (tol >= 0.0 and math.isfinite(tol)):
        raise ValueError(f"simplification tolerance must be a finite number of metres >= 0, got {tolerance_m!r}")
    points = np.ascontiguousarray(points, dtype=np.float64)
    kx = _DEG * EARTH_RADIUS_M * math.cos(float(points[0, 1]) * _DEG)  # local_xy's metres per degree east
    buf = _overview_polyline(points, bool(simplified), kx, _M_PER_DEG, tol, float(10 ** precision))
    return buf.tobytes().decode("ascii")


@njit(cache=True)
def _overview_polyline(pts, simplified, kx, ky, tol, factor):
    """:func:`overview_polyline`'s bytes (uint8): the points kept by ``simplify_lonlat`` (``local_xy`` centred on
    the first point, ``douglas_peucker_keep``, consecutive duplicates dropped; at most 2 points as they are),
    then :func:`_polyline_bytes`."""
    k = pts.shape[0]
    line = pts
    if simplified and k > 2:
        lon0 = pts[0, 0]
        lat0 = pts[0, 1]
        x = np.empty(k, np.float64)
        y = np.empty(k, np.float64)
        for i in range(k):
            x[i] = (((pts[i, 0] - lon0 + 180.0) % 360.0) - 180.0) * kx
            y[i] = (pts[i, 1] - lat0) * ky
        keep = douglas_peucker_keep(x, y, tol)
        idx = np.empty(k, np.int64)
        n = 0
        for i in range(k):
            if keep[i]:
                idx[n] = i
                n += 1
        sel = np.empty(n, np.int64)
        m = 0
        for j in range(n):
            if j == 0 or pts[idx[j], 0] != pts[idx[j - 1], 0] or pts[idx[j], 1] != pts[idx[j - 1], 1]:
                sel[m] = idx[j]
                m += 1
        if m < 2:  # every kept point the same: the first and the last of them
            sel[0] = idx[0]
            sel[1] = idx[n - 1]
            m = 2
        line = np.empty((m, 2), np.float64)
        for j in range(m):
            line[j, 0] = pts[sel[j], 0]
            line[j, 1] = pts[sel[j], 1]
    buf = np.empty(line.shape[0] * 2 * _POLYLINE_CHUNKS, np.uint8)
    nb = _polyline_bytes(line, factor, buf)
    return buf[:nb]


# ---------------------------------------------------------------------------------- maneuvers
def turn_delta(bearing_before, bearing_after):
    """The turn between two bearings in degrees, in (-180, 180]: > 0 turns right, < 0 left."""
    d = (float(bearing_after) - float(bearing_before)) % 360.0
    return d - 360.0 if d > 180.0 else d


def modifier(delta):
    """OSRM's direction modifier of a turn (``guidance/turn_instruction.hpp``, ``getTurnDirection``, with
    the turn angle ``180 - delta``): straight within 20 degrees, slight to 40, left/right to 120, sharp
    beyond, uturn from 179."""
    a = abs(delta)
    side = "right" if delta > 0 else "left"
    if a <= 20.0:
        return "straight"
    if a <= 40.0:
        return "slight " + side
    if a <= 120.0:
        return side
    if a < 179.0:
        return "sharp " + side
    return "uturn"


# ---------------------------------------------------------------------------------- waypoints
def make_hint(segment, fraction, fingerprint):
    """An opaque hint for a waypoint: base64url of the segment id, the fraction and the graph's
    fingerprint (clients send it back; gpuroute snaps again instead of reading it)."""
    raw = struct.pack("<id", int(segment), float(fraction)) + bytes.fromhex(fingerprint[:16].ljust(16, "0"))
    return base64.urlsafe_b64encode(raw).decode("ascii")


_HINT = struct.Struct("<id")
_FP_BYTES = {}


def _fingerprint_bytes(fingerprint):
    b = _FP_BYTES.get(fingerprint)
    if b is None:
        b = _FP_BYTES[fingerprint] = bytes.fromhex(fingerprint[:16].ljust(16, "0"))
    return b


#: Up to this many waypoints (without ``nodes``, of a PhantomSet of at most 4 times as many rows), :func:`waypoints`
#: reads the PhantomSet's columns as Python lists (a route's handful, no gathers; the values rounded by Python's
#: ``round``, as :func:`gpuroute.engine.legs.round_floats` rounds fewer than its array threshold).
_FEW_WAYPOINTS = 7
#: From this many waypoints on, :func:`waypoints` makes the hints with :func:`hints_array` (fewer: one by one, faster
#: below about 80 on a 2-core Xeon).
_HINTS_ARRAY = 96
#: base64url's alphabet, as code points (64,).
_B64URL = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", dtype=np.uint8).astype(np.uint32)


def hints_array(segment, fraction, fp):
    """:func:`make_hint`'s hints of many waypoints at once: ``segment`` int (k,), ``fraction`` float64 (k,),
    ``fp`` the fingerprint's 8 bytes (:func:`_fingerprint_bytes`); a list of k str, each the base64url of the 20
    bytes ``<i4 segment, <f8 fraction, fp`` (28 characters, the last ``=``), as ``base64.urlsafe_b64encode``
    writes them."""
    k = len(segment)
    rec = np.zeros((k, 21), dtype=np.uint8)  # 20 bytes and a zero: 7 groups of 3 bytes
    rec[:, 0:4] = np.ascontiguousarray(segment, dtype="<i4").view(np.uint8).reshape(k, 4)
    rec[:, 4:12] = np.ascontiguousarray(fraction, dtype="<f8").view(np.uint8).reshape(k, 8)
    rec[:, 12:20] = np.frombuffer(fp, dtype=np.uint8)
    g = rec.reshape(k, 7, 3).astype(np.uint32)
    n = (g[:, :, 0] << 16) | (g[:, :, 1] << 8) | g[:, :, 2]
    six = np.stack([n >> 18, (n >> 12) & 63, (n >> 6) & 63, n & 63], axis=2).reshape(k, 28)
    chars = _B64URL[six]
    chars[:, 27] = ord("=")  # the padding of 20 bytes
    return np.ascontiguousarray(chars).view("<U28").ravel().tolist()


def waypoints(phantoms, fingerprint, names, points=None, *, nodes=None):
    """The OSRM waypoint objects of some points of a :class:`gpuroute.geo.segments.PhantomSet` (each its
    nearest segment's, :attr:`~gpuroute.geo.segments.PhantomSet.first`): ``hint`` (base64url of the segment
    id, the fraction along it and the fingerprint, :func:`make_hint`), ``distance`` (metres from the input),
    ``name``, ``location`` ``[lon, lat]`` (snapped), the floats rounded to 6 decimals all at once
    (:func:`gpuroute.engine.legs.round_floats`, as ``round``).

    Parameters
    ----------
    phantoms : PhantomSet
    fingerprint : str
        The graph's fingerprint (hex).
    names : sequence of str
        Street names by name id (``graph.meta["way_names"]``).
    points : int array (k,), optional
        Point indices (default: every point, in order).
    nodes : int array (k, 2), optional
        ``/nearest``: each waypoint's segment's two OSM node ids (``"nodes"``).

    Returns
    -------
    list of dict, length k
    """
    rows = phantoms.first if points is None else phantoms.first[np.asarray(points, dtype=np.int64)]
    k = int(rows.size)
    if k == 0:
        return []
    n_names = len(names)
    if k <= _FEW_WAYPOINTS and nodes is None and phantoms.distance.size <= 4 * _FEW_WAYPOINTS:  # a route's few
        fp = _fingerprint_bytes(fingerprint)
        pack, b64 = _HINT.pack, base64.urlsafe_b64encode
        seg, frac, nid = phantoms.segment.tolist(), phantoms.segment_fraction.tolist(), phantoms.name_id.tolist()
        dist, lon, lat = phantoms.distance.tolist(), phantoms.lon.tolist(), phantoms.lat.tolist()
        return [{"hint": b64(pack(seg[r], frac[r]) + fp).decode("ascii"), "distance": round(dist[r], 6),
                 "name": names[nid[r]] if 0 <= nid[r] < n_names else "", "location": [round(lon[r], 6), round(lat[r], 6)]}
                for r in rows.tolist()]
    vals = round_floats([v for t in zip(phantoms.distance[rows].tolist(), phantoms.lon[rows].tolist(),
                                         phantoms.lat[rows].tolist(), strict=True) for v in t], 6)
    fp = _fingerprint_bytes(fingerprint)
    if k >= _HINTS_ARRAY:  # many: every hint in a few array passes
        hints = hints_array(phantoms.segment[rows], phantoms.segment_fraction[rows], fp)
        out = [{"hint": h, "distance": vals[3 * i], "name": names[n] if 0 <= n < n_names else "",
                "location": [vals[3 * i + 1], vals[3 * i + 2]]}
               for i, (h, n) in enumerate(zip(hints, phantoms.name_id[rows].tolist(), strict=True))]
    else:
        pack, b64 = _HINT.pack, base64.urlsafe_b64encode
        out = [{"hint": b64(pack(s, f) + fp).decode("ascii"), "distance": vals[3 * i],
                "name": names[n] if 0 <= n < n_names else "", "location": [vals[3 * i + 1], vals[3 * i + 2]]}
               for i, (s, f, n) in enumerate(zip(phantoms.segment[rows].tolist(),
                                                 phantoms.segment_fraction[rows].tolist(),
                                                 phantoms.name_id[rows].tolist(), strict=True))]
    if nodes is not None:
        for w, (u, v) in zip(out, np.asarray(nodes, dtype=np.int64).tolist(), strict=True):
            w["nodes"] = [u, v]
    return out


def round1(x):
    """OSRM rounds durations, weights and distances to one decimal."""
    return round(float(x), 1)


def matrix_or_none(m, digits=1):
    """A float matrix as nested lists rounded to ``digits`` (NumPy's rounding, vectorised), with None
    (JSON ``null``) for unreachable (infinite or NaN) cells: the ``durations``/``distances`` of a table."""
    m = np.asarray(m, dtype=np.float64)
    r = np.round(m, digits)
    ok = np.isfinite(r)
    if ok.all():
        return r.tolist()
    o = r.astype(object)
    o[~ok] = None
    return o.tolist()


def matrix_array(m, digits=1):
    """A float matrix rounded to ``digits`` as :func:`matrix_or_none` rounds it, kept an array: float64,
    C-contiguous, NaN for unreachable (infinite or NaN) cells. orjson (``OPT_SERIALIZE_NUMPY``) writes
    it as the JSON of :func:`matrix_or_none`'s lists (NaN as ``null``), without building them."""
    r = np.ascontiguousarray(np.round(np.asarray(m, dtype=np.float64), digits))
    bad = ~np.isfinite(r)
    if bad.any():
        r[bad] = np.nan
    return r


#: The two digits of 0..99, as ASCII bytes (200,): :func:`_rows_json` writes two digits per division.
_DIGITS2 = np.frombuffer("".join(f"{i:02d}" for i in range(100)).encode("ascii"), dtype=np.uint8).copy()
#: Longest JSON of one cell :func:`_rows_json` writes (``-99999999999999.9,``).
_CELL_BYTES = 19
_json_pool = None
_json_pool_lock = threading.Lock()


@njit(cache=True, nogil=True)
def _rows_json(m, r0, r1, buf, digits2):
    """JSON of rows ``r0:r1`` of a float64 (r, c) matrix of one-decimal values, the rows separated by
    commas (``[..],[..]``), into the uint8 buffer ``buf``: its length, or -1 at a value that is not
    ``k / 10`` (the double nearest to it) with ``|k / 10| < 1e14``. A non-finite value is ``null``; a
    value is written ``int.d`` (``-`` for negatives and -0.0), the shortest decimal that reads back as it,
    as orjson and Python's ``repr`` write it."""
    c = m.shape[1]
    p = 0
    tmp = np.empty(24, dtype=np.uint8)
    for i in range(r0, r1):
        if i > r0:
            buf[p] = 44  # ,
            p += 1
        buf[p] = 91  # [
        p += 1
        for j in range(c):
            if j:
                buf[p] = 44
                p += 1
            v = m[i, j]
            if not math.isfinite(v):
                buf[p] = 110  # null
                buf[p + 1] = 117
                buf[p + 2] = 108
                buf[p + 3] = 108
                p += 4
                continue
            a = abs(v)
            if not a < 1e14:
                return -1
            k = np.int64(np.rint(a * 10.0))
            if k / 10.0 != a:
                return -1
            if v < 0 or (v == 0 and math.copysign(1.0, v) < 0):
                buf[p] = 45  # -
                p += 1
            ip = k // 10
            n = 0
            while ip >= 100:  # the integer part's digits, last first
                q = ip % 100
                ip //= 100
                tmp[n] = digits2[2 * q + 1]
                tmp[n + 1] = digits2[2 * q]
                n += 2
            if ip >= 10:
                tmp[n] = digits2[2 * ip + 1]
                tmp[n + 1] = digits2[2 * ip]
                n += 2
            else:
                tmp[n] = 48 + ip
                n += 1
            for t in range(n - 1, -1, -1):
                buf[p] = tmp[t]
                p += 1
            buf[p] = 46  # .
            buf[p + 1] = 48 + k % 10
            p += 2
        buf[p] = 93  # ]
        p += 1
    return p


def matrix_json(m, *, threads=None):
    """The JSON text of a table matrix: exactly the bytes orjson writes for :func:`matrix_or_none` of the
    same matrix (``null`` where not finite), written from the array by a compiled kernel on blocks of rows
    in parallel threads (no Python float per cell).

    Parameters
    ----------
    m : array_like of float, shape (r, c)
        Values rounded to one decimal (:func:`matrix_array`); a matrix with another value (more decimals,
        ``|x| >= 1e14``) is written by orjson instead (the same bytes, slower).
    threads : int, optional
        Threads writing blocks of rows (default ``numba.get_num_threads()``; one shared pool of that many
        threads).

    Returns
    -------
    bytes
        ``[[...],[...]]``; for the HTTP answer, wrap it in ``orjson.Fragment``.
    """
    global _json_pool
    m = np.ascontiguousarray(m, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"matrix_json takes a 2-D matrix, got shape {m.shape}")
    r, c = m.shape
    threads = max(1, int(threads or numba.get_num_threads()))
    nb = max(1, min(r, 2 * threads, r * c // 16384 + 1))  # blocks of at least ~16k cells
    bounds = np.linspace(0, r, nb + 1).astype(np.int64).tolist()

    def block(b):
        r0, r1 = bounds[b], bounds[b + 1]
        buf = np.empty((r1 - r0) * (_CELL_BYTES * c + 3), dtype=np.uint8)  # [, ] and the comma after
        n = _rows_json(m, r0, r1, buf, _DIGITS2)
        return None if n < 0 else buf[:n]

    if nb == 1 or threads == 1:
        parts = [block(b) for b in range(nb)]
    else:
        with _json_pool_lock:
            if _json_pool is None:
                from concurrent.futures import ThreadPoolExecutor

                _json_pool = ThreadPoolExecutor(max(2, numba.get_num_threads()), thread_name_prefix="gpuroute-json")
        parts = list(_json_pool.map(block, range(nb)))
    if any(p is None for p in parts):
        from ..extras import require

        orjson = require("orjson", "table matrices as JSON")

        return orjson.dumps(m, option=orjson.OPT_SERIALIZE_NUMPY)
    return b"[" + b",".join(p.tobytes() for p in parts if p.size) + b"]"


def finite_or_none(x, digits=1):
    """A float rounded to ``digits``, or None for an unreachable (infinite) value (JSON ``null``)."""
    return round(float(x), digits) if math.isfinite(x) else None


__all__ = ["EngineError", "ERROR_CODES", "GEOMETRIES", "OVERVIEWS", "ROUTE_ANNOTATIONS", "TABLE_ANNOTATIONS",
           "encode_geometry", "encode_geometries", "overview_polyline", "simplify", "douglas_peucker_keep", "turn_delta",
           "modifier", "make_hint", "waypoints", "round1", "finite_or_none", "matrix_or_none",
           "matrix_array", "matrix_json"]
