"""OSRM's geometry on fixed-point coordinates: distances, bearings and the representative coordinate of
a road at an intersection, as osrm-extract 26.x computes them.

Coordinates are ``(lon, lat)`` integer pairs in 1e-6 degrees (OSRM's ``FixedLongitude`` /
``FixedLatitude``; ``toFixed`` rounds half away from zero). Sources (OSRM 26.x):

* :func:`distance_m`, :func:`bearing_deg`: ``util::coordinate_calculation::greatCircleDistance`` and
  ``bearing``: mapbox cheap-ruler on the WGS84 ellipsoid, one ruler per 0.05 degree latitude bucket of the
  two points' mean latitude (``CheapRulerContainer(1800)``).
* :func:`representative_coordinate`: ``intersection::CoordinateExtractor::ExtractRepresentativeCoordinate``
  (``coordinate_extractor.cpp``), every case: self-loops, two coordinates, roundabouts, low-priority
  roads, a far first coordinate, straight roads, straight starts, the regression line, lane offsets
  (``IsDirectOffset``), curves (``IsCurve``), the trimmed regression and the 10 m look-ahead. Differences:
  ``computeAngle`` uses ``atan2`` where OSRM uses a lookup table, and the regression line is an
  ordinary least-squares fit over the same 1 m samples.
* :func:`coordinate_close_to_turn`: ``CoordinateExtractor::GetCoordinateCloseToTurn``.
"""
from __future__ import annotations

import math

__all__ = ["to_fixed", "ruler", "distance_m", "bearing_deg", "coordinate_at_length", "representative_coordinate",
           "coordinate_close_to_turn", "polyline_length", "offset_correction_factor", "reverse_bearing", "angle_between", "angular_deviation"]

_RE = 6378.137
_FE = 1.0 / 298.257223563
_E2 = _FE * (2 - _FE)
_RAD = math.pi / 180.0
_STEP = 50_000  # 90e6 / 1800 fixed units per ruler bucket
_RULERS: dict[int, tuple[float, float]] = {}

ASSUMED_LANE_WIDTH = 3.25
ASSUMED_LANE_COUNT = 2
LOOKAHEAD_DISTANCE_WITHOUT_LANES = 10.0
FAR_LOOKAHEAD_DISTANCE = 40.0
DESIRED_COORDINATE_DIFFERENCE = 2.0
SKIPPING_INACCURACIES_DISTANCE = 2.0


def to_fixed(deg):
    """Degrees -> 1e-6 degree integer, half away from zero (OSRM's ``toFixed``)."""
    x = float(deg) * 1e6
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def ruler(lat_fixed):
    """``(kx, ky)`` metres per degree of longitude / latitude of OSRM's ruler for a fixed latitude."""
    b = (abs(int(lat_fixed)) - 1) // _STEP
    r = _RULERS.get(b)
    if r is None:
        lat = _STEP * (b + 0.5) / 1e6
        mul = _RAD * _RE * 1000
        coslat = math.cos(lat * _RAD)
        w2 = 1 / (1 - _E2 * (1 - coslat * coslat))
        w = math.sqrt(w2)
        r = _RULERS[b] = (mul * w * coslat, mul * w * w2 * (1 - _E2))
    return r


def _mean_lat(a, b):
    s = a[1] + b[1]
    return int(s / 2)  # C++ integer division truncates toward zero


def distance_m(a, b):
    """OSRM's ``greatCircleDistance`` between two fixed coordinates, metres."""
    kx, ky = ruler(_mean_lat(a, b))
    dx = math.remainder((a[0] - b[0]) / 1e6, 360.0) * kx
    dy = ((a[1] - b[1]) / 1e6) * ky
    return math.sqrt(dx * dx + dy * dy)


def bearing_deg(a, b):
    """OSRM's ``bearing`` from ``a`` to ``b``: degrees clockwise from north in [0, 360]; 0 for equal points."""
    kx, ky = ruler(_mean_lat(a, b))
    dx = math.remainder((b[0] - a[0]) / 1e6, 360.0) * kx
    dy = ((b[1] - a[1]) / 1e6) * ky
    r = math.atan2(dx, dy) / _RAD
    return r + 360.0 if r < 0.0 else r


def reverse_bearing(b):
    return b - 180.0 if b >= 180 else b + 180.0


def angle_between(entry, exit_):
    """OSRM's ``angleBetween``: 180 straight, 90 a right turn, 270 a left turn, 0 a U-turn."""
    return math.fmod(entry - exit_ + 540.0, 360.0)


def angular_deviation(a, b):
    d = abs(a - b)
    return min(360.0 - d, d)


def polyline_length(coords):
    return sum(distance_m(coords[i], coords[i + 1]) for i in range(len(coords) - 1))


def _interpolate(f, a, b):
    # static_cast<int32>(from + factor * (to - from)): truncation toward zero
    return (int(a[0] + f * (b[0] - a[0])), int(a[1] + f * (b[1] - a[1])))


def _factor(desired, d0, d1):
    seg = d1 - d0
    if seg <= 0:
        return 0.0
    return max(0.0, min((desired - d0) / seg, 1.0))


def coordinate_at_length(distance, coords, lengths=None):
    """``ExtractCoordinateAtLength``: the point ``distance`` metres along ``coords`` (the last one if shorter)."""
    acc = 0.0
    for i in range(1, len(coords)):
        seg = lengths[i] if lengths is not None else distance_m(coords[i - 1], coords[i])
        if acc + seg >= distance:
            return _interpolate(_factor(distance - acc, 0.0, seg), coords[i - 1], coords[i])
        acc += seg
    return coords[-1]


def _trim_to_length(coords, desired):
    """``TrimCoordinatesToLength``: the first ``desired`` metres of ``coords`` (all of them if shorter)."""
    coords = list(coords)
    acc = 0.0
    for i in range(1, len(coords)):
        nxt = acc + distance_m(coords[i - 1], coords[i])
        if nxt >= desired:
            c = _interpolate(_factor(desired, acc, nxt), coords[i - 1], coords[i])
            return coords[:i] + [c]
        acc = nxt
    return coords


def _length_cache(coords, limit):
    """``PrepareLengthCache``: segment lengths (first entry 0) until ``limit`` metres are reached."""
    out = [0.0]
    acc = 0.0
    for i in range(1, len(coords)):
        d = distance_m(coords[i - 1], coords[i])
        acc += d
        out.append(d)
        if acc >= limit:
            break
    return out


def _trim_with_cache(coords, desired, cache):
    """``TrimCoordinatesToLength`` with a length cache (OSRM compares the cached *segment* lengths with
    the desired length; kept as it is)."""
    coords = list(coords)
    if cache and cache[-1] < desired and len(coords) >= 2:
        if len(coords) > len(cache):
            coords = coords[:len(cache)]
        d = distance_m(coords[-2], coords[-1])
        if d > 0:
            coords[-1] = _interpolate(_factor(cache[-1], 0.0, d), coords[-2], coords[-1])
        return coords
    acc = 0.0
    for i in range(1, len(coords)):
        nxt = cache[i] if i < len(cache) else acc + distance_m(coords[i - 1], coords[i])
        if nxt >= desired:
            c = _interpolate(_factor(desired, acc, nxt), coords[i - 1], coords[i])
            return coords[:i] + [c]
        acc = nxt
    return coords


def _trim_front(coords, desired):
    """``TrimCoordinatesByLengthFront``: drop the first ``desired`` metres ([] if shorter)."""
    acc = 0.0
    idx = 0
    for nxt_i in range(1, len(coords)):
        nxt = acc + distance_m(coords[idx], coords[nxt_i])
        if nxt >= desired:
            c = _interpolate(_factor(desired, acc, nxt), coords[idx], coords[nxt_i])
            return [c] + list(coords[idx + 1:])
        acc = nxt
        idx = nxt_i
    return []


def _lat_to_y(lat):
    f = math.sin(math.radians(max(-85.051128779806, min(85.051128779806, lat))))
    return math.degrees(0.5 * math.log((1 + f) / (1 - f)))


def _compute_angle(a, b, c):
    """``computeAngle``: the angle a-b-c in [0, 360) (180 straight), on web-mercator y."""
    if a == b or b == c:
        return 180.0
    v1x = (a[0] - b[0]) / 1e6
    v1y = _lat_to_y(a[1] / 1e6) - _lat_to_y(b[1] / 1e6)
    v2x = (c[0] - b[0]) / 1e6
    v2y = _lat_to_y(c[1] / 1e6) - _lat_to_y(b[1] / 1e6)
    ang = math.degrees(math.atan2(v2y, v2x) - math.atan2(v1y, v1x))
    while ang < 0:
        ang += 360.0
    return ang


def _ccw(a, b, c):
    la, oa = a[1] / 1e6, a[0] / 1e6
    lb, ob = b[1] / 1e6, b[0] / 1e6
    lc, oc = c[1] / 1e6, c[0] / 1e6
    return 0.5 * (-ob * la + oc * la + oa * lb - oc * lb - oa * lc + ob * lc) > 0


def _is_curve(coords, seg, length, lane_width, roundabout):
    """``CoordinateExtractor::IsCurve``."""
    if roundabout:
        return True
    b0 = bearing_deg(coords[0], coords[1])
    b1 = bearing_deg(coords[-2], coords[-1])
    if angular_deviation(b0, b1) <= 0.5 * 40.0:
        return False
    if len(coords) > 3:
        ccw = _ccw(coords[0], coords[-1], coords[1])
        if any(_ccw(coords[0], coords[-1], c) != ccw for c in coords[2:-1]):
            return False

    def dev(c):
        return distance_m(_project(coords[0], coords[-1], c), c)

    if len(coords) == 3:
        ok, imax, dmax = True, 1, dev(coords[1])
    else:
        devs = [dev(c) for c in coords]
        k = 1
        while k + 1 < len(coords) and devs[k] < devs[k + 1]:
            k += 1
        past = k + 1
        if past >= len(coords):
            ok, imax, dmax = True, len(coords) - 1, 0.0
        elif all(devs[i] > devs[i + 1] for i in range(past, len(coords) - 1)):
            ok, imax, dmax = True, past - 1, devs[past - 1]
        else:
            ok, imax, dmax = False, 0, 0.0
    if not ok:
        return False
    to_max = sum(seg[:imax + 1])
    if ((to_max <= 0.35 * length or dmax < max(0.3 * lane_width, 0.5 * ASSUMED_LANE_WIDTH))
            and length > LOOKAHEAD_DISTANCE_WITHOUT_LANES):
        return False
    angles = [_compute_angle(coords[i], coords[i + 1], coords[i + 2]) for i in range(len(coords) - 2)]
    last_straight = False
    straight = max(0.0, seg[1] - lane_width)
    di = 1
    for prev, cur in zip(angles, angles[1:], strict=False):
        both = angular_deviation(prev, 180.0) > 25.0 and angular_deviation(cur, 180.0) > 25.0
        if both and ((prev > 180.0) == (cur < 180.0)):
            return False
        is_straight = angular_deviation(cur, 180.0) < 5
        di += 1
        if is_straight:
            straight += seg[di] if di < len(seg) else 0.0
            if last_straight and straight > 0.3 * length:
                return False
        elif straight > 0.3 * length:
            return False
        else:
            straight = seg[di] if di < len(seg) else 0.0
        last_straight = is_straight
    return length > 2 * lane_width


def _is_direct_offset(coords, straight_index, straight, length, seg, lanes):
    """``CoordinateExtractor::IsDirectOffset`` (``lanes``: OSRM passes an 8-bit integer)."""
    k = max(1, straight_index)
    if k + 1 >= len(coords):
        return False
    if sum(seg[:k + 1]) - 0.5 * lanes * ASSUMED_LANE_WIDTH >= ASSUMED_LANE_WIDTH:
        return False
    if length < 0.4 * FAR_LOOKAHEAD_DISTANCE:
        return False
    if (length - max(straight, seg[1])) < 0.1 * length:
        return False
    j = next((i for i in range(k, len(seg)) if seg[i] >= 30), len(seg))
    end = min(len(coords), j + 1)
    return 0.5 * ASSUMED_LANE_WIDTH > _max_deviation(coords[k:end], coords[k], coords[end - 1])


def _project(s, t, p):
    """``projectPointOnSegment`` in plain degrees: the clamped foot point (float lon, lat)."""
    sx, sy = s[0] / 1e6, s[1] / 1e6
    vx, vy = t[0] / 1e6 - sx, t[1] / 1e6 - sy
    rx, ry = p[0] / 1e6 - sx, p[1] / 1e6 - sy
    sq = vx * vx + vy * vy
    if sq < 2.220446049250313e-16:
        return (s[0], s[1])
    r = min(1.0, max(0.0, (vx * rx + vy * ry) / sq))
    return (to_fixed((1 - r) * sx + r * (t[0] / 1e6)), to_fixed((1 - r) * sy + r * (t[1] / 1e6)))


def _max_deviation(coords, a, b):
    return max((distance_m(_project(a, b, c), c) for c in coords), default=0.0)


def _corrected(fix, base, head):
    """``GetCorrectedCoordinate``: ``head`` moved back by 90 % of ``base - fix``."""
    if distance_m(base, head) < DESIRED_COORDINATE_DIFFERENCE:
        return head
    return (head[0] - int(90 * int(base[0] - fix[0]) / 100), head[1] - int(90 * int(base[1] - fix[1]) / 100))


def _sample(coords, max_length, rate):
    out = [coords[0]]
    carry = total = 0.0
    for i in range(1, len(coords)):
        if total > max_length:
            break
        a, b = coords[i - 1], coords[i]
        d = distance_m(a, b)
        if carry + d >= rate:
            base = rate - carry
            k = int(math.floor((min(max_length - total, d) + carry) / rate))
            for s in range(k):
                out.append(_interpolate(_factor(base + s * rate, 0.0, d), a, b))
            carry = (d + carry) - k * rate
        else:
            carry += d
        total += d
    return out


def _regression(coords):
    """``RegressionLine``: a least-squares line through 1 m samples of the first 40 m, as the feet of
    the first and last coordinate on it."""
    pts = _sample(coords, FAR_LOOKAHEAD_DISTANCE, 1.0)
    if len(pts) < 2:
        return coords[0], coords[-1]
    xs = [p[0] / 1e6 for p in pts]
    ys = [p[1] / 1e6 for p in pts]
    rotate = (max(ys) - min(ys)) > 2 * (max(xs) - min(xs))
    if rotate:  # fit lon as a function of lat
        xs, ys = ys, xs
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx < 1e-30:
        return coords[0], coords[-1]
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    x0, x1 = min(xs), max(xs)
    p0 = (x0, my + slope * (x0 - mx))
    p1 = (x1, my + slope * (x1 - mx))
    if rotate:
        p0, p1 = (p0[1], p0[0]), (p1[1], p1[0])
    a = (to_fixed(p0[0]), to_fixed(p0[1]))
    b = (to_fixed(p1[0]), to_fixed(p1[1]))
    return _project(a, b, coords[0]), _project(a, b, coords[-1])


def _regression_raw(coords):
    """``leastSquareRegression``: the fitted line's ends (fixed coordinates) over the span of ``coords``."""
    xs = [p[0] / 1e6 for p in coords]
    ys = [p[1] / 1e6 for p in coords]
    rotate = (max(ys) - min(ys)) > 2 * (max(xs) - min(xs))
    if rotate:
        xs, ys = ys, xs
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx < 1e-30:
        return coords[0], coords[-1]
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    x0, x1 = min(xs), max(xs)
    p0, p1 = (x0, my + slope * (x0 - mx)), (x1, my + slope * (x1 - mx))
    if rotate:
        p0, p1 = (p0[1], p0[0]), (p1[1], p1[0])
    return (to_fixed(p0[0]), to_fixed(p0[1])), (to_fixed(p1[0]), to_fixed(p1[1]))


def coordinate_close_to_turn(coords):
    """``GetCoordinateCloseToTurn``: the first coordinate after the start more than 1 m from it (the
    road's end when none is)."""
    s = coords[0]
    for c in coords[1:]:
        if distance_m(c, s) > 1:
            return c
    return coords[-1]


def offset_correction_factor(motorway_or_ramp, priority):
    """``GetOffsetCorrectionFactor``: 2.5 for motorways and ramps, 2 for trunk roads, 1.5 for primary roads,
    else 1 (``priority``: the road priority class, trunk 2, primary 4)."""
    if motorway_or_ramp:
        return 2.5
    return {2: 2.0, 4: 1.5}.get(int(priority), 1.0)


def representative_coordinate(coords, *, self_loop, roundabout, low_priority, considered_lanes):
    """``ExtractRepresentativeCoordinate`` for a road leaving the intersection at ``coords[0]``.

    Parameters
    ----------
    coords : list of (int, int)
        The road's geometry from the intersection to the next one, consecutive duplicates removed.
    self_loop : bool
        The road comes back to the intersection.
    roundabout : bool
        A roundabout or circular road.
    low_priority : bool
        ``may_be_ignored`` (OSRM's ``IsLowPriorityRoadClass``).
    considered_lanes : float
        The offset correction factor times the intersection's lane count (2 when unknown).
    """
    if self_loop:
        return coords[1]
    if len(coords) <= 2:
        return coords[-1]
    if roundabout:
        return coordinate_at_length(SKIPPING_INACCURACIES_DISTANCE, coords)
    turn = coords[0]
    if low_priority:
        c = _trim_to_length(coords, LOOKAHEAD_DISTANCE_WITHOUT_LANES)
        if len(c) > 2 and distance_m(turn, c[1]) < ASSUMED_LANE_WIDTH:
            first = distance_m(turn, c[1])
            total = distance_m(turn, c[-1])
            if first > ASSUMED_LANE_WIDTH and total > first:  # never true (as in OSRM)
                return _corrected(turn, c[1], c[-1])
        return c[-1]
    first = distance_m(coords[0], coords[1])
    if first > considered_lanes * ASSUMED_LANE_WIDTH + LOOKAHEAD_DISTANCE_WITHOUT_LANES:
        return coords[1]
    lookahead = FAR_LOOKAHEAD_DISTANCE + considered_lanes * ASSUMED_LANE_WIDTH
    seg = _length_cache(coords, lookahead)
    coords = _trim_with_cache(coords, lookahead, seg)
    seg[-1] = min(seg[-1], lookahead)
    total = sum(seg)
    if len(coords) == 2 or total <= SKIPPING_INACCURACIES_DISTANCE:
        return coords[-1]
    if _max_deviation(coords, coords[0], coords[-1]) < 0.5 * ASSUMED_LANE_WIDTH:
        if coords[0] == coords[-1]:
            return coordinate_at_length(SKIPPING_INACCURACIES_DISTANCE, coords)
        return coords[-1]
    straight = seg[1]
    index = 2
    while index < len(coords):
        if _max_deviation(coords[:index], coords[0], coords[index]) < 0.25 * ASSUMED_LANE_WIDTH:
            straight += seg[index]
            index += 1
        else:
            break
    straight_index = index - 1
    if straight >= considered_lanes * ASSUMED_LANE_WIDTH + LOOKAHEAD_DISTANCE_WITHOUT_LANES:
        return coordinate_at_length(5, coords, seg)
    a, b = _regression(coords)
    if _max_deviation(coords, a, b) < 0.35 * ASSUMED_LANE_WIDTH:
        return _corrected(turn, _project(a, b, coords[0]), _project(a, b, coords[-1]))
    if _is_direct_offset(coords, straight_index, straight, total, seg, int(considered_lanes)):
        k = max(1, straight_index)
        return _corrected(turn, coords[k], coords[k + 1])
    if _is_curve(coords, seg, total, considered_lanes * ASSUMED_LANE_WIDTH, roundabout):
        if total <= SKIPPING_INACCURACIES_DISTANCE:
            return coords[-1]
        c = _trim_with_cache(coords, 3 * SKIPPING_INACCURACIES_DISTANCE, seg)
        seg2 = seg[:len(c)]
        seg2[-1] = distance_m(c[-2], c[-1])
        head = c[-1]
        c = _trim_with_cache(c, 2 * SKIPPING_INACCURACIES_DISTANCE, seg2)
        return _corrected(turn, c[-1], head)
    trimming = 0.8 * (considered_lanes * ASSUMED_LANE_WIDTH)
    trimmed = _trim_front(coords, 0.8 * trimming)
    if len(trimmed) >= 2 and total >= trimming + 2:
        ta, tb = _regression(trimmed)
        if _max_deviation(trimmed, ta, tb) < 0.5 * ASSUMED_LANE_WIDTH:
            return _corrected(turn, ta, tb)
    result = coordinate_at_length(LOOKAHEAD_DISTANCE_WITHOUT_LANES, coords, seg)
    if result != turn:
        return result
    for c in coords:
        if c != turn:
            return c
    return result


def fixed_from_e7(x):
    """OSRM's fixed coordinate (1e-6 degree) of libosmium's 1e-7 degree integers (int64 arrays):
    ``lround(x / 1e7 * 1e6)`` in doubles, as osrm-extract computes it."""
    import numpy as np

    f = (np.asarray(x, dtype=np.int64) / 1e7) * 1e6
    return np.where(f >= 0, np.floor(f + 0.5), -np.floor(-f + 0.5)).astype(np.int64)


def distance_m_array(a_lon, a_lat, b_lon, b_lat):
    """:func:`distance_m` for arrays of fixed coordinates (int64), float64 metres."""
    import numpy as np

    a_lat = np.asarray(a_lat, dtype=np.int64)
    b_lat = np.asarray(b_lat, dtype=np.int64)
    s = a_lat + b_lat
    mean = np.where(s >= 0, s // 2, -((-s) // 2))  # C++ division truncates toward zero
    bucket = (np.abs(mean) - 1) // _STEP
    lat = _STEP * (bucket + 0.5) / 1e6
    mul = _RAD * _RE * 1000
    coslat = np.cos(lat * _RAD)
    w2 = 1 / (1 - _E2 * (1 - coslat * coslat))
    w = np.sqrt(w2)
    kx = mul * w * coslat
    ky = mul * w * w2 * (1 - _E2)
    dlon = (np.asarray(a_lon, dtype=np.int64) - np.asarray(b_lon, dtype=np.int64)) / 1e6
    dx = np.remainder(dlon + 180.0, 360.0) - 180.0  # std::remainder(d, 360) for |d| < 540
    dx = np.where(dx == -180.0, np.where(dlon > 0, 180.0, -180.0), dx) * kx
    dy = ((a_lat - b_lat) / 1e6) * ky
    return np.sqrt(dx * dx + dy * dy)
