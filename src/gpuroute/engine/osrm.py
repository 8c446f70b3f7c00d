"""The OSRM v5 vocabulary the engine speaks: error codes, option values, geometry encodings, the
overview simplification, maneuver modifiers and waypoint objects (osrm-backend ``docs/http.md``).

Nothing here routes; :mod:`gpuroute.engine.engine` does, and builds its responses with these helpers.
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import struct
import threading

import numba
import numpy as np
from numba import njit

from ..geo import EARTH_RADIUS_M
from ..geo.simplify import douglas_peucker_keep, simplify_lonlat
from .legs import MODIFIERS, STEP_TYPES, intersections, leg_arrays, maneuvers, round_floats

try:  # the JSON library of the legs' text (optional: the standard library reads and writes the same values)
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is in the serve extra
    _orjson = None

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
    return _polyline_write(pts, 0, pts.shape[0], factor, buf, 0, False)


@njit(cache=True)
def _polyline_write(pts, r0, r1, factor, buf, p, escape):
    """:func:`_polyline_bytes` of rows ``r0:r1`` of ``pts`` into ``buf`` from byte ``p`` (at least ``26 (r1 - r0)``
    bytes free, twice that with ``escape``); the end. ``escape``: as inside a JSON string (a backslash, the only
    character of 63..126 JSON escapes, doubled)."""
    prev0 = 0
    prev1 = 0
    for i in range(r0, r1):
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
                ch = (0x20 | (d & 0x1F)) + 63
                if escape and ch == 92:
                    buf[p] = 92
                    p += 1
                buf[p] = ch
                p += 1
                d >>= 5
            ch = d + 63
            if escape and ch == 92:
                buf[p] = 92
                p += 1
            buf[p] = ch
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
    points = np.ascontiguousarray(points, dtype=np.float64)
    buf = _overview_polyline(points, bool(simplified), *polyline_args(float(points[0, 1]), simplified, tolerance_m,
                                                                      precision))
    return buf.tobytes().decode("ascii")


def polyline_args(first_lat, simplified, tolerance_m, precision):
    """The arguments of :func:`_overview_polyline` after ``simplified`` for a line whose first point lies at
    latitude ``first_lat`` (degrees): ``(kx, ky, tolerance, factor)`` (local_xy's metres per degree east and
    north, the tolerance in metres, ``10 ** precision``). ValueError as :func:`overview_polyline`'s."""
    tol = float(tolerance_m)
    if simplified and not (tol >= 0.0 and math.isfinite(tol)):
        raise ValueError(f"simplification tolerance must be a finite number of metres >= 0, got {tolerance_m!r}")
    kx = _DEG * EARTH_RADIUS_M * math.cos(float(first_lat) * _DEG)  # local_xy's metres per degree east
    return kx, _M_PER_DEG, tol, float(10 ** precision)


@njit(cache=True)
def leg_overview(a, fa, b, fb, mid, nodes, has_path, start_lon, start_lat, end_lon, end_lat, coords, wcost, wf, dcost,
                 df, has_dur, length, turns, t_first, fo, head, from_snapshot, is_time, turn_cost, cost, twf, tscale,
                 tc_dur, tc_w, name_id, overview, simplified, kx, ky, tol, factor):
    """A one-leg route without steps or annotations in one compiled call: :func:`gpuroute.engine.legs.leg_arrays`
    (its arguments up to ``name_id``) and, with ``overview``, :func:`_overview_polyline` of the leg's points
    (``simplified``, ``kx`` .. ``factor``: :func:`polyline_args` of ``start_lat``), the same values; only the
    overview's bytes come back as an array.

    Returns
    -------
    (polyline uint8 (p,), weight_sum, duration_sum, distance_sum, turn_duration, turn_weight, n_summary, summary0,
    summary1)
        The overview's bytes (empty without ``overview``), ``leg_arrays``'s sums and turns, and its summary's name
        ids (``n_summary`` of them, 0 to 2; -1 past them).
    """
    arcs, frac, pts, w, d, ln, w_sum, d_sum, l_sum, td, tw, summary = leg_arrays(
        a, fa, b, fb, mid, nodes, has_path, start_lon, start_lat, end_lon, end_lat, coords, wcost, wf, dcost, df,
        has_dur, length, turns, t_first, fo, head, from_snapshot, is_time, turn_cost, cost, twf, tscale, tc_dur,
        tc_w, name_id)
    s0 = summary[0] if summary.size > 0 else -1
    s1 = summary[1] if summary.size > 1 else -1
    if overview:
        buf = _overview_polyline(pts, simplified, kx, ky, tol, factor)
    else:
        buf = np.empty(0, np.uint8)
    return buf, w_sum, d_sum, l_sum, td, tw, summary.size, s0, s1


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
#: base64's alphabet to base64url's (``base64.urlsafe_b64encode``'s translation).
_URLSAFE = bytes.maketrans(b"+/", b"-_")
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
        pack, b64, url = _HINT.pack, binascii.b2a_base64, _URLSAFE  # base64.urlsafe_b64encode's bytes, inline
        seg, frac, nid = phantoms.segment.tolist(), phantoms.segment_fraction.tolist(), phantoms.name_id.tolist()
        dist, lon, lat = phantoms.distance.tolist(), phantoms.lon.tolist(), phantoms.lat.tolist()
        return [{"hint": b64(pack(seg[r], frac[r]) + fp, newline=False).translate(url).decode("ascii"),
                 "distance": round(dist[r], 6),
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
#: Scratch of :func:`matrix_json` (per calling thread, its blocks in disjoint slices): kept between tables (a
#: fresh buffer of megabytes costs its page faults on every table), at most this many bytes a thread.
JSON_SCRATCH_KEEP_BYTES = 64 << 20
_json_local = threading.local()


def _json_scratch(nbytes):
    """This thread's uint8 scratch, its first ``nbytes`` (grown as needed; reused between calls)."""
    buf = getattr(_json_local, "buf", None)
    if buf is None or buf.size < nbytes:
        buf = np.empty(max(nbytes, 1 << 16), dtype=np.uint8)
        if nbytes <= JSON_SCRATCH_KEEP_BYTES:
            _json_local.buf = buf
    return buf[:nbytes]


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

    cap = [(bounds[b + 1] - bounds[b]) * (_CELL_BYTES * c + 3) for b in range(nb)]  # [, ] and the comma after
    first = np.concatenate(([0], np.cumsum(cap))).tolist()
    scratch = _json_scratch(first[-1])  # the calling thread's: each block writes its own slice

    def block(b):
        buf = scratch[first[b]:first[b + 1]]
        n = _rows_json(m, bounds[b], bounds[b + 1], buf, _DIGITS2)
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
    pieces = [b"["]
    for p in parts:  # one copy of each block's bytes, straight from its buffer
        if p.size:
            if len(pieces) > 1:
                pieces.append(b",")
            pieces.append(memoryview(p))
    pieces.append(b"]")
    return b"".join(pieces)


def finite_or_none(x, digits=1):
    """A float rounded to ``digits``, or None for an unreachable (infinite) value (JSON ``null``)."""
    return round(float(x), digits) if math.isfinite(x) else None


# ---------------------------------------------------------------------------------- legs' steps and annotation as JSON
# A leg's ``steps`` and ``annotation`` are written as JSON text by one compiled call (:func:`leg_parts_json`) from
# the leg's arrays: the HTTP answer splices the text in (``orjson.Fragment``), the Python API reads it back
# (:func:`leg_parts`), so each field has one rule, here. Numbers are written as orjson writes the values the
# rules give: ``round(x, 1)`` / ``round(x, 6)`` as Python rounds (exactly, :func:`_round_exact`), ``np.round(x, 6)``
# for GeoJSON positions (as :func:`encode_geometry`), each the shortest decimal that reads back as it.

#: Annotation bits of :func:`leg_parts_json` by name (:data:`ROUTE_ANNOTATIONS`).
ANNOTATION_BITS = {name: 1 << i for i, name in enumerate(ROUTE_ANNOTATIONS)}
#: The bits of :data:`ANNOTATION_BITS` in the order of the annotation's keys.
_ANN_ORDER = np.array([ANNOTATION_BITS[k] for k in ("distance", "duration", "datasources", "nodes", "weight", "speed")],
                      dtype=np.int64)
#: :func:`leg_parts_json`'s geometry codes.
GEOMETRY_CODES = {"polyline": 0, "polyline6": 1, "geojson": 2}
#: Room :func:`leg_parts_json` starts with for fixes (values it leaves to Python, :func:`_splice_fixes`).
_FIXES = 16
#: 10 ** 15: the decimals :func:`_write_dec` writes have fewer digits (a double reads back every one of them).
_DEC_MAX = 10 ** 15


def _lit(text):
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()


_J_GEOMETRY = _lit('{"geometry":')
_J_LINESTRING = _lit('{"type":"LineString","coordinates":[')
_J_MANEUVER = _lit(',"maneuver":{"bearing_after":')
_J_BEARING_BEFORE = _lit(',"bearing_before":')
_J_LOCATION_M = _lit(',"location":')
_J_TYPE = _lit(',"type":"')
_J_MODIFIER = _lit(',"modifier":"')
_J_MODE = _lit('},"mode":"driving","driving_side":"right","name":"')
_J_INTERSECTIONS = _lit('","intersections":[')
_J_LOCATION_I = _lit('{"location":')
_J_BEARINGS = _lit(',"bearings":[')
_J_ENTRY = _lit('],"entry":[')
_J_IN = _lit('],"in":')
_J_OUT = _lit(',"out":')
_J_OUT0 = _lit('],"out":')
_J_WEIGHT = _lit('],"weight":')
_J_DURATION = _lit(',"duration":')
_J_DISTANCE = _lit(',"distance":')
_J_TRUE = _lit("true")
_J_FALSE = _lit("false")
_J_NULL = _lit("null")
_J_ARRIVE_END = _lit('],"weight":0.0,"duration":')
_J_A_DISTANCE = _lit('"distance":[')
_J_A_DURATION = _lit('"duration":[')
_J_A_DATASOURCES = _lit('"datasources":[')
_J_A_NODES = _lit('"nodes":[')
_J_A_WEIGHT = _lit('"weight":[')
_J_A_SPEED = _lit('"speed":[')
_J_A_METADATA = _lit('"metadata":{"datasource_names":["gpuroute"]}')
#: Step types and modifiers (:data:`gpuroute.engine.legs.STEP_TYPES` + ``arrive``, ``MODIFIERS``) as one byte
#: string with offsets.
_STEP_WORDS = STEP_TYPES + ("arrive",)
_J_WORDS = _lit("".join(_STEP_WORDS + MODIFIERS))
_J_WORD_OFF = np.cumsum([0] + [len(w) for w in _STEP_WORDS + MODIFIERS]).astype(np.int64)


@njit(cache=True)
def _put(buf, p, lit):
    for i in range(lit.size):
        buf[p + i] = lit[i]
    return p + lit.size


@njit(cache=True)
def _put_word(buf, p, w):
    for i in range(_J_WORD_OFF[w], _J_WORD_OFF[w + 1]):
        buf[p] = _J_WORDS[i]
        p += 1
    return p


#: Powers of ten, int64 and float64 (0 .. 18).
_P10I = np.array([10 ** i for i in range(19)], dtype=np.int64)
_P10F = np.array([10.0 ** i for i in range(19)], dtype=np.float64)


@njit(cache=True)
def _put_digits(buf, q, v, n):
    """The last ``n`` decimal digits of int64 ``v >= 0`` (zero-padded) ending before ``buf[q]``, two at a time."""
    while n >= 2:
        r = v % 100
        v //= 100
        q -= 2
        buf[q] = _DIGITS2[2 * r]
        buf[q + 1] = _DIGITS2[2 * r + 1]
        n -= 2
    if n:
        buf[q - 1] = 48 + v % 10


@njit(cache=True)
def _put_int(buf, p, v):
    """Decimal of int64 ``v`` (a JSON integer; not -2**63)."""
    if v < 0:
        buf[p] = 45
        p += 1
        v = -v
    n = 1
    while n < 19 and v >= _P10I[n]:
        n += 1
    _put_digits(buf, p + n, v, n)
    return p + n


@njit(cache=True)
def _write_dec(buf, p, k, d, neg):
    """The JSON orjson writes for the double nearest to ``(-1 if neg else 1) * k / 10**d`` (int64 ``0 <= k <
    10**15``, ``d`` in 1..6): the shortest decimal that reads back as it, which is ``k / 10**d`` itself (a double
    reads back every decimal of at most 15 digits): ``int.frac`` without the fraction's trailing zeros (``.0``
    for none), or ``ke-d`` below 1e-5 (orjson's scientific notation)."""
    if neg:
        buf[p] = 45
        p += 1
    s = _P10I[d]
    ip = k // s
    fr = k - ip * s
    if ip == 0 and fr != 0 and k < s // 100000:  # below 1e-5: k has one digit (d <= 6)
        buf[p] = 48 + k
        buf[p + 1] = 101  # e
        buf[p + 2] = 45  # -
        buf[p + 3] = 48 + d
        return p + 4
    p = _put_int(buf, p, ip)
    buf[p] = 46  # .
    p += 1
    if fr == 0:
        buf[p] = 48
        return p + 1
    _put_digits(buf, p + d, fr, d)  # d digits, then the trailing zeros dropped (fr > 0: one is not zero)
    p += d
    while buf[p - 1] == 48:
        p -= 1
    return p


@njit(cache=True)
def _round_exact(x, s):
    """Python's ``round(x, d)`` of a finite double ``x`` as the integer ``k`` of its value ``k / s`` (``s = 10**d``,
    ``d`` in 0..6): the exact ``x * s`` (Dekker's product: its rounded value and error) rounded to the nearest
    integer, halves to even. ``|x * s| < 2**50``."""
    y = x * s
    k = np.rint(y)
    t = y - k  # exact, |t| <= 1/2
    if abs(t) < 0.25:  # the error of y (<= 1/8 here) cannot carry it past a half
        return np.int64(k)
    c = 134217729.0 * x  # Dekker's split of x and s, and the exact error of y
    xh = c - (c - x)
    xl = x - xh
    c = 134217729.0 * s
    sh = c - (c - s)
    sl = s - sh
    err = ((xh * sh - y) + xh * sl + xl * sh) + xl * sl
    sg = 1.0 if t > 0 else -1.0
    dd = abs(t) - 0.5  # exact (Sterbenz)
    e = err * sg
    if dd > -e:  # past the half: away from k
        return np.int64(k + sg)
    if dd < -e:
        return np.int64(k)
    k2 = k + sg  # exactly a half: the even one
    return np.int64(k if k % 2 == 0 else k2)


@njit(cache=True)
def _put_round(buf, p, x, d, numpy_round, fixes, nf):
    """``round(x, d)`` (``numpy_round``: ``np.round(x, d)``) as orjson writes it, ``null`` where not finite. A value
    of 15 digits or more is left to Python: nothing written, ``(p, x, d, numpy_round)`` noted in row ``nf`` of
    ``fixes`` (when it has room). Returns ``(p, nf)``. (The sign is ``x``'s: ``k`` has it, or is 0.)"""
    s = _P10F[d]
    y = x * s
    if abs(y) < 1e15:  # finite, fewer than 15 digits (or 15 after rounding up: checked)
        if numpy_round:
            k = np.int64(np.rint(y))
        else:
            k = _round_exact(x, s)
        if k < 0:
            k = -k
        if k < 1000000000000000:
            return _write_dec(buf, p, k, d, math.copysign(1.0, x) < 0), nf
    if not math.isfinite(x):
        return _put(buf, p, _J_NULL), nf
    if nf < fixes.shape[0]:
        fixes[nf, 0] = p
        fixes[nf, 1] = x
        fixes[nf, 2] = d
        fixes[nf, 3] = 1.0 if numpy_round else 0.0
    return p, nf + 1


@njit(cache=True)
def _room(buf, p, need):
    """``buf``, or a copy twice as large (or more) when fewer than ``need`` bytes are free past ``p``."""
    if p + need <= buf.size:
        return buf
    out = np.empty(max(2 * buf.size, p + need), np.uint8)
    out[:p] = buf[:p]
    return out


@njit(cache=True)
def _put_position(buf, p, pts, i, numpy_round, fixes, nf):
    """Row ``i`` of ``pts`` (lon/lat) as ``[lon,lat]``, each rounded to 6 decimals: ``np.round`` (``numpy_round``:
    a GeoJSON geometry's positions, as :func:`encode_geometry` gives them) or Python's ``round`` (a maneuver's or
    an intersection's location). Returns ``(p, nf)`` (:func:`_put_round`)."""
    buf[p] = 91
    p, nf = _put_round(buf, p + 1, pts[i, 0], 6, numpy_round, fixes, nf)
    buf[p] = 44
    p, nf = _put_round(buf, p + 1, pts[i, 1], 6, numpy_round, fixes, nf)
    buf[p] = 93
    return p + 1, nf


@njit(cache=True)
def _put_geometry(buf, p, pts, r0, r1, geo, fixes, nf):
    """A step's geometry: rows ``r0:r1`` of ``pts`` (lon/lat) as :func:`encode_geometry` gives them (``geo``:
    :data:`GEOMETRY_CODES`)."""
    if geo == 2:
        p = _put(buf, p, _J_LINESTRING)
        for i in range(r0, r1):
            if i > r0:
                buf[p] = 44
                p += 1
            p, nf = _put_position(buf, p, pts, i, True, fixes, nf)
        buf[p] = 93
        buf[p + 1] = 125
        return p + 2, nf
    buf[p] = 34
    p = _polyline_write(pts, r0, r1, 1e6 if geo == 1 else 1e5, buf, p + 1, True)
    buf[p] = 34
    return p + 1, nf


@njit(cache=True)
def _put_name(buf, p, names, name_off, k):
    """Name ``k``'s escaped JSON text (``names[name_off[k]:name_off[k + 1]]``; nothing for ``k`` out of range)."""
    if 0 <= k < name_off.size - 1:
        for i in range(name_off[k], name_off[k + 1]):
            buf[p] = names[i]
            p += 1
    return p


@njit(cache=True)
def leg_parts_json(arcs, pts, weight, duration, distance, has_dur, steps, ann, geo, amod, w_scale, bearing, name_id,
                   head, tail, degree, first_out, rev_first_out, rev_tail, coords, names, name_off, node_ids, fixes):
    """A leg's ``steps`` array and ``annotation`` object as JSON text (UTF-8), as orjson writes OSRM's objects,
    in one compiled call over the leg's arrays (:class:`gpuroute.engine.services.route._Leg`).

    The steps: :func:`gpuroute.engine.legs.maneuvers` (types, modifiers, sums, intersections' pieces) and
    :func:`gpuroute.engine.legs.intersections` (their streets), then per step ``geometry`` (its pieces' points,
    :func:`encode_geometry`'s), ``maneuver`` (``bearing_after``/``bearing_before``: the arcs' bearings rounded
    half to even, mod 360; ``location``; ``type``; ``modifier``), ``mode``, ``driving_side``, ``name``,
    ``intersections`` (``depart``'s own first), ``weight`` (``round(w * w_scale, 1)``), ``duration`` (``null``
    without ``has_dur``), ``distance``; and the ``arrive`` step at the last point (modifier ``amod``). The
    annotation: per piece ``distance`` (6 decimals), ``duration``, ``datasources`` (0), ``nodes`` (OSM ids of
    the pieces' nodes), ``weight``, ``speed`` (``distance / duration``, 0 where ``duration`` is not > 0), each
    as asked by the bits ``ann`` (:data:`ANNOTATION_BITS`), and ``metadata`` with ``datasources``.

    Parameters
    ----------
    arcs : int64 (k,)
        The leg's pieces' arcs; ``pts`` float64 (k + 1, 2) their points (lon/lat, degrees).
    weight, duration, distance : float64 (k,)
        Per piece, in the engine's weight unit, seconds (``distance`` where not ``has_dur``) and metres.
    has_dur, steps : bool
        Durations known; the steps asked (else ``[]``).
    ann : int
        Annotation bits (0: none; then no annotation text).
    geo : int
        :data:`GEOMETRY_CODES`.
    amod : int
        The arrival's modifier (a code of :data:`gpuroute.engine.legs.MODIFIERS`).
    w_scale : float
        The engine's weight unit in OSRM's weight.
    bearing .. node_ids
        The engine's arrays: bearing float64 (m,) degrees per arc, name_id int64 (m,), head, tail int64 (m,),
        degree int64 (n,), the forward and reverse CSR (int64), coords float64 (n, 2), the names' escaped JSON
        text (uint8) with offsets int64 (names + 1), OSM node ids int64 (n,).
    fixes : float64 (f, 4)
        Room for values left to Python (:func:`_put_round`).

    Returns
    -------
    (buf uint8 (b,), split int, n_fixes int)
        The steps' text is ``buf[:split]``, the annotation's ``buf[split:]``; ``n_fixes`` values to splice in
        (more than ``f``: call again with room for them).
    """
    k = arcs.size
    nf = 0
    buf = np.empty(4096 + 64 * k, np.uint8)
    p = 0
    buf[p] = 91
    p += 1
    if steps:
        starts, kinds, mods, sums, i_first, i_at = maneuvers(arcs, bearing, name_id, head, tail, degree, weight,
                                                             duration, distance)
        r = i_at.size
        inodes = np.empty(r, np.int64)
        iprev = np.empty(r, np.int64)
        inext = np.empty(r, np.int64)
        for q in range(r):
            j = i_at[q]
            inodes[q] = tail[arcs[j]]
            iprev[q] = tail[arcs[j - 1]]
            inext[q] = head[arcs[j]]
        first, ibear, entry, in_pos, out_pos = intersections(inodes, iprev, inext, first_out, head, rev_first_out,
                                                             rev_tail, coords)
        ns = starts.size
        for s in range(ns + 1):
            arrive = s == ns
            if arrive:
                j0 = k - 1
                j1 = k
                n_int = 1
                n_str = 1
                g_rows = 2
            else:
                j0 = starts[s]
                j1 = starts[s + 1] if s + 1 < ns else k
                n_int = i_first[s + 1] - i_first[s] + (1 if kinds[s] == 0 else 0)
                n_str = first[i_first[s + 1]] - first[i_first[s]] + 1
                g_rows = j1 - j0 + 1
            nm = name_id[arcs[j0]]
            name_len = name_off[nm + 1] - name_off[nm] if 0 <= nm < name_off.size - 1 else 0
            buf = _room(buf, p, 1024 + name_len + 112 * g_rows + 160 * n_int + 12 * n_str)
            if s:
                buf[p] = 44
                p += 1
            p = _put(buf, p, _J_GEOMETRY)
            if arrive:
                b_last = bearing[arcs[k - 1]]
                bb = np.int64(np.rint(b_last)) % 360
                if geo == 2:
                    p = _put(buf, p, _J_LINESTRING)
                    for t in range(2):
                        if t:
                            buf[p] = 44
                            p += 1
                        p, nf = _put_position(buf, p, pts, k, True, fixes, nf)
                    buf[p] = 93
                    buf[p + 1] = 125
                    p += 2
                else:
                    two = np.empty((2, 2), np.float64)
                    for t in range(2):
                        two[t, 0] = pts[k, 0]
                        two[t, 1] = pts[k, 1]
                    buf[p] = 34
                    p = _polyline_write(two, 0, 2, 1e6 if geo == 1 else 1e5, buf, p + 1, True)
                    buf[p] = 34
                    p += 1
                p = _put(buf, p, _J_MANEUVER)
                buf[p] = 48
                p = _put(buf, p + 1, _J_BEARING_BEFORE)
                p = _put_int(buf, p, bb)
                p = _put(buf, p, _J_LOCATION_M)
                p, nf = _put_position(buf, p, pts, k, False, fixes, nf)
                p = _put(buf, p, _J_TYPE)
                p = _put_word(buf, p, 4)
                buf[p] = 34
                p = _put(buf, p + 1, _J_MODIFIER)
                p = _put_word(buf, p, 5 + amod)
                buf[p] = 34
                p = _put(buf, p + 1, _J_MODE)
                p = _put_name(buf, p, names, name_off, name_id[arcs[k - 1]])
                p = _put(buf, p, _J_INTERSECTIONS)
                p = _put(buf, p, _J_LOCATION_I)
                p, nf = _put_position(buf, p, pts, k, False, fixes, nf)
                p = _put(buf, p, _J_BEARINGS)
                p = _put_int(buf, p, (bb + 180) % 360)
                p = _put(buf, p, _J_ENTRY)
                p = _put(buf, p, _J_TRUE)
                p = _put(buf, p, _J_IN)
                buf[p] = 48
                buf[p + 1] = 125
                p = _put(buf, p + 2, _J_ARRIVE_END)
                if has_dur:
                    buf[p] = 48
                    buf[p + 1] = 46
                    buf[p + 2] = 48
                    p += 3
                else:
                    p = _put(buf, p, _J_NULL)
                p = _put(buf, p, _J_DISTANCE)
                buf[p] = 48
                buf[p + 1] = 46
                buf[p + 2] = 48
                buf[p + 3] = 125
                p += 4
                continue
            kind = kinds[s]
            p, nf = _put_geometry(buf, p, pts, j0, j1 + 1, geo, fixes, nf)
            b_after = np.int64(np.rint(bearing[arcs[j0]])) % 360
            p = _put(buf, p, _J_MANEUVER)
            p = _put_int(buf, p, b_after)
            p = _put(buf, p, _J_BEARING_BEFORE)
            p = _put_int(buf, p, 0 if kind == 0 else np.int64(np.rint(bearing[arcs[j0 - 1]])) % 360)
            p = _put(buf, p, _J_LOCATION_M)
            p, nf = _put_position(buf, p, pts, j0, False, fixes, nf)
            p = _put(buf, p, _J_TYPE)
            p = _put_word(buf, p, kind)
            buf[p] = 34
            p += 1
            if mods[s] >= 0:
                p = _put(buf, p, _J_MODIFIER)
                p = _put_word(buf, p, 5 + mods[s])
                buf[p] = 34
                p += 1
            p = _put(buf, p, _J_MODE)
            p = _put_name(buf, p, names, name_off, nm)
            p = _put(buf, p, _J_INTERSECTIONS)
            if kind == 0:  # depart: the first point, its one street
                p = _put(buf, p, _J_LOCATION_I)
                p, nf = _put_position(buf, p, pts, 0, False, fixes, nf)
                p = _put(buf, p, _J_BEARINGS)
                p = _put_int(buf, p, b_after)
                p = _put(buf, p, _J_ENTRY)
                p = _put(buf, p, _J_TRUE)
                p = _put(buf, p, _J_OUT0)
                buf[p] = 48
                buf[p + 1] = 125
                p += 2
            for q in range(i_first[s], i_first[s + 1]):
                if q > i_first[s] or kind == 0:
                    buf[p] = 44
                    p += 1
                p = _put(buf, p, _J_LOCATION_I)
                p, nf = _put_position(buf, p, pts, i_at[q], False, fixes, nf)
                p = _put(buf, p, _J_BEARINGS)
                for c in range(first[q], first[q + 1]):
                    if c > first[q]:
                        buf[p] = 44
                        p += 1
                    p = _put_int(buf, p, ibear[c])
                p = _put(buf, p, _J_ENTRY)
                for c in range(first[q], first[q + 1]):
                    if c > first[q]:
                        buf[p] = 44
                        p += 1
                    p = _put(buf, p, _J_TRUE if entry[c] else _J_FALSE)
                p = _put(buf, p, _J_IN)
                p = _put_int(buf, p, in_pos[q])
                p = _put(buf, p, _J_OUT)
                p = _put_int(buf, p, out_pos[q])
                buf[p] = 125
                p += 1
            p = _put(buf, p, _J_WEIGHT)
            p, nf = _put_round(buf, p, sums[s, 0] * w_scale, 1, False, fixes, nf)
            p = _put(buf, p, _J_DURATION)
            if has_dur:
                p, nf = _put_round(buf, p, sums[s, 1], 1, False, fixes, nf)
            else:
                p = _put(buf, p, _J_NULL)
            p = _put(buf, p, _J_DISTANCE)
            p, nf = _put_round(buf, p, sums[s, 2], 1, False, fixes, nf)
            buf[p] = 125
            p += 1
    buf[p] = 93
    p += 1
    split = p
    if ann:
        buf = _room(buf, p, 512 + 6 * 26 * k)
        first_key = True
        for part in range(6):  # the annotation's keys in OSRM's order: distance, duration, datasources, nodes,
            if not ann & _ANN_ORDER[part]:  # weight, speed
                continue
            if first_key:
                buf[p] = 123
                p += 1
                first_key = False
            else:
                buf[p] = 44
                p += 1
            if part == 0:
                p = _put(buf, p, _J_A_DISTANCE)
            elif part == 1:
                p = _put(buf, p, _J_A_DURATION)
            elif part == 2:
                p = _put(buf, p, _J_A_DATASOURCES)
            elif part == 3:
                p = _put(buf, p, _J_A_NODES)
            elif part == 4:
                p = _put(buf, p, _J_A_WEIGHT)
            else:
                p = _put(buf, p, _J_A_SPEED)
            n_val = k + 1 if part == 3 else k
            for i in range(n_val):
                if i:
                    buf[p] = 44
                    p += 1
                if part == 0:
                    p, nf = _put_round(buf, p, distance[i], 6, False, fixes, nf)
                elif part == 2:
                    buf[p] = 48
                    p += 1
                elif part == 3:
                    p = _put_int(buf, p, node_ids[tail[arcs[0]] if i == 0 else head[arcs[i - 1]]])
                elif part == 4:
                    p, nf = _put_round(buf, p, weight[i] * w_scale, 1, False, fixes, nf)
                elif not has_dur:
                    p = _put(buf, p, _J_NULL)
                elif part == 1:
                    p, nf = _put_round(buf, p, duration[i], 1, False, fixes, nf)
                else:
                    dv = duration[i]
                    p, nf = _put_round(buf, p, distance[i] / dv if dv > 0 else 0.0, 1, False, fixes, nf)
            buf[p] = 93
            p += 1
        if ann & _ANN_ORDER[2]:
            buf[p] = 44
            p = _put(buf, p + 1, _J_A_METADATA)
        buf[p] = 125
        p += 1
    return buf[:p], split, nf


def leg_parts_text(*args):
    """:func:`leg_parts_json` of ``args`` (its arguments but ``fixes``) as ``(steps bytes, annotation bytes)``: the
    values it leaves to Python (15 digits or more) written by orjson (``json`` without it) and spliced in."""
    fixes = np.empty((_FIXES, 4), np.float64)
    buf, split, nf = leg_parts_json(*args, fixes)
    if nf > fixes.shape[0]:  # room for every fix, and again
        fixes = np.empty((nf, 4), np.float64)
        buf, split, nf = leg_parts_json(*args, fixes)
    raw = buf.tobytes()
    if not nf:
        return raw[:split], raw[split:]
    dumps = _dumps_fn()
    return _splice_fixes(raw, fixes[:nf], 0, split, dumps), _splice_fixes(raw, fixes[:nf], split, len(raw), dumps)


#: ``orjson.loads``, else ``json.loads``: the objects of JSON text (the same objects).
json_loads = _orjson.loads if _orjson is not None else json.loads
#: ``orjson.Fragment`` (orjson >= 3.10: JSON text orjson writes as it is), else None.
json_fragment = getattr(_orjson, "Fragment", None)


def _splice_fixes(raw, fixes, lo, hi, dumps):
    """``raw[lo:hi]`` (bytes) with the values :func:`_put_round` left to Python at its positions in ``[lo, hi)``
    (rows of ``fixes``) written in by ``dumps``."""
    out = raw[lo:hi]
    for pos, x, d, numpy_round in sorted(fixes.tolist(), reverse=True):
        if lo <= pos < hi:
            v = float(np.round(x, int(d))) if numpy_round else round(x, int(d))
            at = int(pos) - lo
            out = out[:at] + dumps(v) + out[at:]
    return out


def names_json(names):
    """Names as :func:`leg_parts_json` reads them: the escaped JSON text of each (orjson's, without the quotes;
    ``json.dumps`` without orjson), concatenated: ``(text uint8, offsets int64 (len(names) + 1))``."""
    dumps = _dumps_fn()
    parts = [dumps(str(n))[1:-1] for n in names]
    off = np.zeros(len(parts) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(b) for b in parts])
    return np.frombuffer(b"".join(parts), dtype=np.uint8).copy(), off


def _dumps_fn():
    """``orjson.dumps``, else ``json.dumps`` to UTF-8 (the same values read back)."""
    if _orjson is not None:
        return _orjson.dumps
    return lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8")


__all__ = ["EngineError", "ERROR_CODES", "GEOMETRIES", "OVERVIEWS", "ROUTE_ANNOTATIONS", "TABLE_ANNOTATIONS",
           "encode_geometry", "encode_geometries", "overview_polyline", "polyline_args", "leg_overview", "simplify", "douglas_peucker_keep", "turn_delta",
           "modifier", "make_hint", "waypoints", "round1", "finite_or_none", "matrix_or_none",
           "matrix_array", "matrix_json", "leg_parts_json", "leg_parts_text", "json_loads", "json_fragment", "names_json", "ANNOTATION_BITS", "GEOMETRY_CODES"]
