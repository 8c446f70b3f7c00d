"""The match service (OSRM ``/match/v1``) past validation: map matching of GPS traces by a hidden Markov model
(Newson and Krumm 2009, as osrm-backend runs it: ``plugins/match.cpp``, ``routing_algorithms/map_matching.cpp``).

Per trace:

1. **Tidy** (``tidy=true``, OSRM's ``match_parameters_tidy.hpp``): a point is dropped until 15 m (and, with
   timestamps, 5 s) have run up since the last one kept; the first and last are kept.
2. **Candidates.** Every segment of the request's segment index (the largest component, without closed or
   excluded directions: :meth:`gpuroute.engine.Engine._snap_index`) within ``3 sigma`` of the point (sigma: its
   ``radiuses`` entry, the GPS standard deviation, default :data:`gpuroute.config.SERVE_MATCH_SIGMA_M`),
   projected exactly (one ball query of the segment index's k-d tree for every point of every trace, one
   compiled pass: :func:`gpuroute.engine.match_hmm.candidate_pairs`); ``bearings`` keep the directions within
   range. OSRM's ``filterCandidates``: at a point where the trace turns sharply (angle <= 45 or >= 315
   degrees between the points before and after) a two-way segment is one candidate that may be left either
   way (a U-turn); elsewhere it is two candidates, one per direction. The candidates are the points of one
   :class:`gpuroute.geo.segments.PhantomSet` (a candidate's options: its one or two arcs).
3. **Transitions.** The route distance (m) between every candidate of a point and every candidate of the
   next, on the request's metric snapshot, turn-aware: :meth:`gpuroute.engine.algorithms.CRP.many_to_many`
   (or the hierarchy's where the overlay's metric is the built one with free turns:
   :func:`gpuroute.engine.algorithms.table_search`) with ``need_len``, the distance along each cell's
   weight-optimal route. The steps of a trace -- and, in :func:`match_many`, of many traces -- are gathered
   into few searches: a search takes the candidates of consecutive points as sources and of the next
   ones as targets, up to ``config.SERVE_MATCH_TABLE_CANDIDATES`` each, and only its diagonal blocks are
   read (exact: a cell of a many-to-many does not depend on the other sources and targets). A route dearer
   than OSRM's bound ``(great-circle + max_distance_delta) / 4 m/s`` (in the metric's seconds) counts as
   none, as OSRM's bounded search (on a time or weight metric: not on a length, e.g. ``/customize``'s
   ``"distance"``), and so does one longer than any transition can use (the candidates' great-circle distance
   plus ``max_distance_delta``: the searches stop there).
4. **Viterbi** (:func:`gpuroute.engine.match_hmm.forward` and ``reconstruct``, numba): emission ``log
   N(d; 0, sigma)``, transition ``log Exp(|route - great-circle|; beta = 10 m)``, OSRM's breakages, gaps and
   splits; each sub-trace of two or more matched points is a matching.
5. **Routes.** Each matching's route is the route service's through its matched candidates in order
   (``continue_straight=False`` as OSRM's match: the candidates' own directions say where a U-turn is
   allowed), on the same snapshot, one leg per pair of consecutive matched points -- but its legs are not
   searched again: each is the route the transition search found (:func:`_leg_plans`: the search from the
   matched source candidate rerun with its parents kept, :func:`gpuroute.engine.match_hmm.leg_chunk`, every
   leg of the call at once, on threads), built into the route object by the route service's kernels
   (:class:`_Legs`; :func:`gpuroute.engine.services.route.route_object` where steps or annotations are
   asked), so the answer equals :func:`gpuroute.engine.services.route.route`'s through the same candidates
   (up to ties between equal-weight routes), which routes a matching only where a leg has no route within its
   bound (the transitions came from the many-to-many, ``"table"``). Its ``confidence`` is OSRM's (a Bayes
   classifier of ``log(route length / trace length)``, Laplace distributions fitted by OSRM).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ... import config
from ...geo import EARTH_RADIUS_M, unit_vectors
from ...geo.segments import PhantomSet, angle_difference
from ..algorithms import metric_snapshot, table_search
from ..match_hmm import (
    DONE,
    NEED_TABLE,
    NO_MATCH,
    candidate_pairs,
    forward,
    new_state,
    reconstruct,
)
from ..osrm import EngineError, waypoints
from ..traffic import LegPath
from .route import PhantomRows, route, route_object

__all__ = ["match", "match_many", "candidate_index", "confidence", "tidy_keep", "Trace"]

#: OSRM's ``RADIUS_MULTIPLIER``: a point's candidates lie within this many sigma.
RADIUS_MULTIPLIER = 3.0
#: OSRM's ``MAX_BROKEN_STATES``, ``MATCHING_BETA`` (m) and ``MAX_DISTANCE_DELTA`` (m, without timestamps).
MAX_BROKEN_STATES = 10
BETA_M = 10.0
MAX_DISTANCE_DELTA_M = 2000.0
#: OSRM's bound on a transition's route: this speed (m/s) over the great-circle distance plus the delta.
MIN_SPEED_MS = 4.0
#: OSRM's tidy thresholds.
TIDY_M, TIDY_S = 15.0, 5.0
#: OSRM's confidence classifier: positive and negative Laplace (location, scale), positive prior.
_CONF_POS, _CONF_NEG, _CONF_PRIOR = (0.005986, 0.016646), (0.054385, 0.458432), 0.696774


def confidence(trace_length, matched_length):
    """OSRM's ``MatchingConfidence`` of a matching: a float in [0, 1] from the great-circle length of the
    trace between its matched points and the matched route's length (m); 0 where either is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        x = -math.log(trace_length) + math.log(matched_length) if trace_length > 0 and matched_length > 0 else math.nan
    if not math.isfinite(x):
        return 0.0

    def laplace(v, loc, scale):
        return 1.0 / (2.0 * scale) * math.exp(-abs(v - loc) / scale)

    pos = _CONF_PRIOR * laplace(x, *_CONF_POS)
    neg = (1.0 - _CONF_PRIOR) * laplace(x, *_CONF_NEG)
    return pos / (pos + neg) if pos > neg else 1.0 - neg / (pos + neg)


def tidy_keep(lon, lat, ts=None):
    """OSRM's tidy: bool (n,), the points kept (the first, the last, and each one reached once 15 m -- and 5 s
    with timestamps -- have run up since the last one kept, summed over consecutive points)."""
    from ...geo import haversine_m

    n = lon.size
    keep = np.ones(n, dtype=bool)
    if n <= 2:
        return keep
    step = haversine_m(lon[:-1], lat[:-1], lon[1:], lat[1:]).tolist()
    dts = None if ts is None else np.diff(ts).tolist()
    run_d = run_t = 0.0
    for cur in range(n - 2):  # next = cur + 1 < n - 1
        run_d += step[cur]
        ok = run_d >= TIDY_M
        if dts is not None:
            run_t += dts[cur]
            ok = ok and run_t >= TIDY_S
        if ok:
            run_d = run_t = 0.0
        else:
            keep[cur + 1] = False
    return keep


def _allow_uturn(lon, lat):
    """bool (n,): OSRM's sharp turn at each inner point (the angle at it between the points before and
    after within 45 degrees of a U-turn)."""
    n = lon.size
    out = np.zeros(n, dtype=bool)
    if n < 3:
        return out
    k = np.cos(np.radians(lat[1:-1]))

    def bearing(i0, i1):
        dx = (np.mod(lon[i1] - lon[i0] + 180.0, 360.0) - 180.0) * k
        dy = lat[i1] - lat[i0]
        return np.degrees(np.arctan2(dx, dy))

    mid = np.arange(1, n - 1)
    ang = np.mod(bearing(mid, mid - 1) - bearing(mid, mid + 1), 360.0)
    out[1:-1] = (ang <= 45.0) | (ang >= 315.0)
    return out


class Trace:
    """One trace prepared for matching: the points kept (tidy), their sigma, their candidates.

    Attributes
    ----------
    kept : int64 (n,)
        Input indices of the points matched (all, unless tidy dropped some).
    n_input : int
    lon, lat, ts : float64 (n,)
        ``ts`` None without timestamps.
    sigma : float64 (n,)
        GPS standard deviation (m).
    cstart : int64 (n + 1,)
        Candidates of each point (rows of :attr:`candidates`' points).
    cpoint : int64 (N,)
    candidates : PhantomSet
        One point per candidate.
    emis : float64 (N,)
    """

    def __init__(self, p, default_sigma):
        c = p.coords
        n0 = c.shape[0]
        ts = None if p.timestamps is None else np.asarray(p.timestamps, dtype=np.float64)
        keep = tidy_keep(c[:, 0], c[:, 1], ts) if p.tidy else np.ones(n0, dtype=bool)
        self.kept = np.flatnonzero(keep)
        self.n_input = n0
        self.lon = np.ascontiguousarray(c[self.kept, 0])
        self.lat = np.ascontiguousarray(c[self.kept, 1])
        self.ts = None if ts is None else np.ascontiguousarray(ts[self.kept])
        sig = np.full(n0, float(default_sigma)) if p.radiuses is None else np.asarray(p.radiuses, dtype=np.float64)
        self.sigma = np.ascontiguousarray(sig[self.kept])
        self.bearings = None if p.bearings is None else np.asarray(p.bearings)[self.kept]
        self.split_gaps = p.gaps == "split"

    @property
    def n(self):
        return int(self.kept.size)


def candidate_index(engine, ex=None):
    """The segment index candidates come from: every segment of the largest component, those where a route may
    not start (``is_startpoint``: ferries, ...) included, as OSRM's ``GetPhantomNodesInRange(...,
    use_all_edges=true)`` (built once per graph); with an exclusion or arcs closed by traffic, the request's
    index (:meth:`gpuroute.engine.Engine._snap_index`)."""
    from ...geo.segments import SegmentIndex

    idx = engine._snap_index(ex)
    if idx is not None:
        return idx
    g = engine.graph
    if "is_startpoint" not in g.arc_attrs:
        return engine.segments
    comp = engine.segments.component
    return g.derived(("segment_index_all_edges", comp), lambda: SegmentIndex(g, component=comp, startpoints=False))


def _candidates(index, traces):
    """Fill each trace's candidates (see the module notes, step 2): one ball query for every point of every
    trace, one compiled projection pass."""
    lon = np.concatenate([t.lon for t in traces])
    lat = np.concatenate([t.lat for t in traces])
    sig = np.concatenate([t.sigma for t in traces])
    radius = RADIUS_MULTIPLIER * sig
    q = unit_vectors(lon, lat) * EARTH_RADIUS_M
    balls = index.tree.query_ball_point(
        q,
        radius * (1.01 + 5.0 * radius / EARTH_RADIUS_M) + index._slack,
        return_sorted=False,
        workers=-1 if lon.size >= 256 else 1,
    )
    lens = np.fromiter(map(len, balls), dtype=np.int64, count=lon.size)
    samples = np.fromiter(itertools.chain.from_iterable(balls), dtype=np.int64, count=int(lens.sum()))
    segs = (index.sample_segment, index.lon_u, index.lat_u, index.lon_v, index.lat_v)
    n_threads = _threads(len(traces), VITERBI_CHUNK)
    if n_threads > 1:  # the projections run without the GIL: chunks of points on threads
        from concurrent.futures import ThreadPoolExecutor

        cut = [lon.size * c // n_threads for c in range(n_threads + 1)]
        cum = np.zeros(lon.size + 1, dtype=np.int64)
        np.cumsum(lens, out=cum[1:])

        def one(c):
            a, b = cut[c], cut[c + 1]
            return candidate_pairs(lon[a:b], lat[a:b], radius[a:b], lens[a:b], samples[cum[a] : cum[b]], *segs)

        with ThreadPoolExecutor(n_threads) as pool:
            parts = list(pool.map(one, range(n_threads)))
        pt = np.concatenate([q[0] + cut[c] for c, q in enumerate(parts)])
        seg = np.concatenate([q[1] for q in parts])
        f = np.concatenate([q[2] for q in parts])
    else:
        pt, seg, f = candidate_pairs(lon, lat, radius, lens, samples, *segs)
    fwd = index._phantom_fwd[seg]
    rev = index._phantom_rev[seg]
    brg = np.concatenate([np.full((t.n, 2), np.nan) if t.bearings is None else t.bearings for t in traces])
    b = brg[pt]
    has_b = ~np.isnan(b[:, 0])
    if has_b.any():
        fwd = np.where(has_b & ~(angle_difference(f[:, 2], b[:, 0]) <= b[:, 1]), -1, fwd)
        rev = np.where(has_b & ~(angle_difference(f[:, 2] + 180.0, b[:, 0]) <= b[:, 1]), -1, rev)
    ok = (fwd >= 0) | (rev >= 0)
    pt, seg, f, fwd, rev = pt[ok], seg[ok], f[ok], fwd[ok], rev[ok]
    uturn = np.concatenate([_allow_uturn(t.lon, t.lat) for t in traces])
    # OSRM's split: away from sharp turns a two-way segment is two candidates, one per direction
    both = (fwd >= 0) & (rev >= 0) & ~uturn[pt]
    # candidates: (point, distance, split copy) order; the reverse copy after every candidate of its point
    c_pt = np.concatenate([pt, pt[both]])
    c_seg = np.concatenate([seg, seg[both]])
    c_f = np.concatenate([f, f[both]])
    c_fwd = np.concatenate([np.where(both, fwd, fwd), np.full(int(both.sum()), -1)])
    c_rev = np.concatenate([np.where(both, -1, rev), rev[both]])
    order = np.lexsort((np.arange(c_pt.size), c_f[:, 1], c_pt))
    c_pt, c_seg, c_f, c_fwd, c_rev = c_pt[order], c_seg[order], c_f[order], c_fwd[order], c_rev[order]
    # one PhantomSet: a point per candidate, its options its arcs (forward before reverse)
    nopt = (c_fwd >= 0).astype(np.int64) + (c_rev >= 0)
    start = np.zeros(c_pt.size + 1, dtype=np.int64)
    np.cumsum(nopt, out=start[1:])
    row_c = np.repeat(np.arange(c_pt.size), nopt)
    second = np.zeros(row_c.size, dtype=bool)
    second[1:] = row_c[1:] == row_c[:-1]
    is_rev = second | (c_fwd[row_c] < 0)
    arc = np.where(is_rev, c_rev[row_c], c_fwd[row_c])
    frac_seg = c_f[row_c, 0]
    in_lon, in_lat = lon[c_pt], lat[c_pt]
    from ...geo import haversine_m

    dist = haversine_m(in_lon, in_lat, c_f[:, 3], c_f[:, 4])
    allc = PhantomSet(
        start,
        arc.astype(np.int32),
        np.where(is_rev, 1.0 - frac_seg, frac_seg),
        c_seg[row_c].astype(np.int32),
        frac_seg,
        c_f[row_c, 3],
        c_f[row_c, 4],
        dist[row_c],
        index.name_id[c_seg[row_c]].astype(np.int32),
        np.zeros(row_c.size, dtype=bool),
        in_lon,
        in_lat,
    )
    emis_all = emission_log_prob_array(dist, sig[c_pt])
    # per trace
    off = 0
    c_off = 0
    for t in traces:
        cnt = np.bincount(c_pt[(c_pt >= off) & (c_pt < off + t.n)] - off, minlength=t.n)
        t.cstart = np.zeros(t.n + 1, dtype=np.int64)
        np.cumsum(cnt, out=t.cstart[1:])
        N = int(t.cstart[-1])
        t.cpoint = np.repeat(np.arange(t.n, dtype=np.int64), cnt)
        t.cand0 = c_off  # first candidate in ``allc``
        t.emis = np.ascontiguousarray(emis_all[c_off : c_off + N])
        t.clon = np.ascontiguousarray(c_f[c_off : c_off + N, 3])
        t.clat = np.ascontiguousarray(c_f[c_off : c_off + N, 4])
        off += t.n
        c_off += N
    return allc


def emission_log_prob_array(d, sigma):
    """:func:`gpuroute.engine.match_hmm.emission_log_prob` of arrays."""
    z = d / sigma
    return -0.5 * (math.log(2.0 * math.pi) + z * z) - np.log(sigma)


def _turn_metric(engine, snap):
    """``(first, out_arc, tcost, cost, scale, minpen)`` of the bounded transition searches: the overlay
    snapshot's arc and turn costs (metric units; turns forbidden < 0) and its scale (metric unit -> OSRM
    weight), or, without an overlay, the hierarchy's weight with every turn free (the turns of an arc: the
    arcs out of its head); ``minpen`` the least turn penalty (<= 0)."""
    if snap is not None:
        key = id(snap)
        hit = _TURN_CACHE.get(key)
        if hit is not None and hit[0] is snap:
            return hit[1]
        tr = engine._traffic.overlay.turns
        first = np.ascontiguousarray(tr.first, dtype=np.int64)
        out_arc = np.ascontiguousarray(tr.out_arc, dtype=np.int64)
        cost = np.ascontiguousarray(snap.cost, dtype=np.float64)
        tcost = np.ascontiguousarray(snap.turn_cost, dtype=np.float64)
        scale = float(snap.scale)
    else:
        g = engine.graph

        def build():
            fo = np.asarray(g.first_out, dtype=np.int64)
            head = np.asarray(g.head, dtype=np.int64)
            deg = np.diff(fo)[head]
            first = np.zeros(head.size + 1, dtype=np.int64)
            np.cumsum(deg, out=first[1:])
            pos = np.arange(int(first[-1]), dtype=np.int64) - np.repeat(first[:-1], deg)
            return first, np.repeat(fo[head], deg) + pos

        first, out_arc = g.derived(("match_turns",), build)
        cost = np.ascontiguousarray(engine._w, dtype=np.float64)
        tcost = cost[out_arc]
        scale = float(engine._w_scale)
    ok = tcost >= 0
    pen = tcost[ok] - cost[out_arc[ok]]
    minpen = float(min(0.0, pen.min())) if pen.size else 0.0
    res = (first, out_arc, tcost, cost, scale, minpen)
    if snap is not None:
        if len(_TURN_CACHE) >= 4:
            _TURN_CACHE.clear()
        _TURN_CACHE[id(snap)] = (snap, res)
    return res


#: ``{id(snapshot): (snapshot, _turn_metric(...))}`` of the last few metric snapshots.
_TURN_CACHE = {}


class _ScratchPool:
    """The bounded searches' scratch (:func:`gpuroute.engine.match_hmm.new_scratch`: O(arcs) per worker, left
    clean by every search), kept between calls: allocating and clearing it took more than the searches of a
    short trace. ``get`` hands a set of at least ``rows`` rows to one caller (a new one where none is free:
    concurrent requests never share one), ``put`` takes it back; at most :attr:`KEEP` sets are kept."""

    KEEP = 8

    def __init__(self):
        import threading

        self._lock = threading.Lock()
        self._free = {}

    def get(self, m, rows):
        from ..match_hmm import new_scratch

        with self._lock:
            free = self._free.get(m, [])
            for i, sc in enumerate(free):
                if sc[0].shape[0] >= rows:
                    return free.pop(i)
        return new_scratch(rows, m)

    def put(self, m, sc):
        with self._lock:
            if len(self._free) > 2 and m not in self._free:  # another graph: forget the old ones
                self._free.clear()
            free = self._free.setdefault(m, [])
            if sum(len(v) for v in self._free.values()) < self.KEEP:
                free.append(sc)


_SCRATCH = _ScratchPool()
#: How the transition tables are computed (``config.SERVE_MATCH_TRANSITIONS``): ``"search"``, one bounded
#: turn-expanded Dijkstra per source candidate (numba, parallel over every step of every trace); ``"table"``,
#: the engine's many-to-many (the overlay's, CPU or GPU twin); ``"auto"``: the searches on every device (13x
#: faster than the GPU many-to-many on the H100: ``config.SERVE_MATCH_TRANSITIONS``).
TRANSITIONS = ("auto", "search", "table")


class _Tables:
    """The transition searches of a request (see the module notes, step 3): ``run(pairs)`` computes the
    tables of ``pairs`` (global candidate ranges)."""

    def __init__(self, engine, allc, ex, snap, device):
        self.engine = engine
        self.allc = allc
        self.ex = ex
        self.snap = snap
        self.search = table_search(engine, ex, snap)
        self.device = device
        self.w_scale = engine._w_scale
        self.calls = 0
        how = str(config.SERVE_MATCH_TRANSITIONS)
        if how not in TRANSITIONS:
            raise ValueError(f"config.SERVE_MATCH_TRANSITIONS must be one of {TRANSITIONS}, got {how!r}")
        if how == "auto":
            how = "search"
        self.how = how
        # OSRM's weight bound assumes 4 m/s: a time (or a weight like car.lua's routability), never a length
        if snap is not None:
            from ...crp.overlay import metric_unit

            quantity = metric_unit(engine.graph, snap.metric).quantity
        else:
            quantity = engine.graph.units[engine.weight].quantity
        self.bounded = quantity != "length"

    def run(self, pairs):
        """``pairs``: list of ``(s0, s1, t0, t1, bound, lmax)`` (sources rows ``s0:s1`` and targets ``t0:t1`` of
        the candidates, bound in OSRM's weight (s), lmax the longest useful route in metres): a list of float64
        (s1 - s0) * (t1 - t0) distance tables (m; inf where no route within the bound and lmax)."""
        if self.how == "search":
            return self.run_search(pairs)
        return self.run_table(pairs)

    def run_search(self, pairs):
        """:meth:`run` by bounded searches (:func:`gpuroute.engine.match_hmm.transitions`), all pairs in one
        parallel kernel; a pair whose search ran out of heap goes to :meth:`run_table`."""
        import numba

        from ..match_hmm import transition_chunk, transitions

        opts, net, scale = _search_inputs(self.engine, self.snap, self.allc)
        P = len(pairs)
        arr = np.asarray([p[:4] for p in pairs], dtype=np.int64).reshape(P, 4)
        bound = np.asarray([p[4] if self.bounded else np.inf for p in pairs], dtype=np.float64) / scale
        lmax = np.asarray([p[5] for p in pairs], dtype=np.float64)
        ns = arr[:, 1] - arr[:, 0]
        nt = arr[:, 3] - arr[:, 2]
        ns = np.where(nt > 0, ns, 0)
        size = ns * nt
        off = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(size, out=off[1:])
        job_pair = np.repeat(np.arange(P, dtype=np.int64), ns)
        job_s = np.repeat(arr[:, 0], ns) + (np.arange(job_pair.size, dtype=np.int64) - np.repeat(off_of(ns), ns))
        out = np.full(int(off[-1]), np.inf)
        ok = np.ones(job_s.size, dtype=np.bool_)
        jobs = (job_s, job_pair, arr[:, 2].copy(), arr[:, 3].copy(), bound, lmax, off[:-1].copy(), arr[:, 0].copy())
        threads = numba.get_num_threads()
        m = net[3].size
        if threads > 1 and job_s.size >= int(config.SERVE_MATCH_PARALLEL_JOBS):
            sc = _SCRATCH.get(m, min(threads, job_s.size))
            try:
                with self.engine._table_lock:  # numba's workqueue layer: one parallel call at a time per engine
                    transitions(jobs, opts, net, out, ok, sc)
            finally:
                _SCRATCH.put(m, sc)
        else:  # a few searches: on this thread
            sc = _SCRATCH.get(m, 1)
            try:
                transition_chunk(0, job_s.size, 1, jobs, opts, net, out, ok, tuple(x[0] for x in sc))
            finally:
                _SCRATCH.put(m, sc)
        self.calls += 1
        res = [out[off[p] : off[p + 1]] for p in range(P)]
        bad = np.unique(job_pair[~ok])
        if bad.size:
            again = self.run_table([pairs[p] for p in bad.tolist()])
            for p, t in zip(bad.tolist(), again, strict=True):
                res[p] = t
        return res

    def run_table(self, pairs):
        """:meth:`run` by the engine's many-to-many, the steps gathered into searches of up to
        ``config.SERVE_MATCH_TABLE_CANDIDATES`` sources and targets."""
        out = [None] * len(pairs)
        cap = max(1, int(config.SERVE_MATCH_TABLE_CANDIDATES))
        i = 0
        while i < len(pairs):
            j = i
            src, dst = {}, {}
            ns = nt = 0
            while j < len(pairs):
                s0, s1, t0, t1 = pairs[j][:4]
                if s1 == s0 or t1 == t0:  # a point without candidates: no search
                    j += 1
                    continue
                add_s = 0 if (s0, s1) in src else s1 - s0
                add_t = 0 if (t0, t1) in dst else t1 - t0
                if j > i and (ns + add_s > cap or nt + add_t > cap):
                    break
                if add_s:
                    src[(s0, s1)] = ns
                    ns += add_s
                if add_t:
                    dst[(t0, t1)] = nt
                    nt += add_t
                j += 1
            if src and dst:
                s_rows = np.concatenate([np.arange(a, b) for a, b in src])
                t_rows = np.concatenate([np.arange(a, b) for a, b in dst])
                res = self.search.many_to_many(
                    self.allc.take(s_rows), self.allc.take(t_rows), need_len=True, device=self.device
                )
                self.calls += 1
                cost, length = res.cost * self.w_scale, res.distance
            for k in range(i, j):
                s0, s1, t0, t1, bound, lmax = pairs[k]
                bound = bound if self.bounded else np.inf
                if s1 == s0 or t1 == t0:
                    out[k] = np.zeros(0)
                    continue
                a, b = src[(s0, s1)], dst[(t0, t1)]
                c = cost[a : a + s1 - s0, b : b + t1 - t0]
                d = length[a : a + s1 - s0, b : b + t1 - t0]
                out[k] = np.ascontiguousarray(np.where((c <= bound) & (d <= lmax), d, np.inf)).ravel()
            i = j
        return out


def _search_inputs(engine, snap, allc):
    """The inputs of :mod:`gpuroute.engine.match_hmm`'s bounded searches on the metric snapshot ``snap``:
    ``(opts, net, scale)``, the candidates' options (PhantomSet ``allc``), the turn-expanded metric
    (:func:`_turn_metric`'s arrays and the engine's arc lengths, m) and the metric's scale (weight units per
    metric unit: a bound in OSRM's weight divided by it is in metric units)."""
    first, out_arc, tcost, cost, scale, minpen = _turn_metric(engine, snap)
    opts = (allc.point_start, allc.arc.astype(np.int64), allc.fraction)
    net = (first, out_arc, tcost, cost, np.ascontiguousarray(engine._len, dtype=np.float64), minpen)
    return opts, net, scale


def off_of(counts):
    """Exclusive prefix sums of ``counts`` (int64)."""
    return np.cumsum(counts) - counts


def _pairs(t, p, q, max_speed):
    """The transitions of trace ``t`` between points ``p[i]`` and ``q[i]`` (int arrays): ``(s0, s1, t0, t1,
    bound, lmax)`` tuples: the source and target candidate rows (global), OSRM's weight bound (s: the
    great-circle distance plus ``max_distance_delta`` at 4 m/s) and the longest route (m) a transition can use
    (the candidates' farthest great-circle distance, at most the points' plus 3 sigma each, plus
    ``max_distance_delta``: a longer route makes the transition impossible, so the searches stop there)."""
    from ...geo import haversine_m

    p = np.asarray(p, dtype=np.int64)
    q = np.asarray(q, dtype=np.int64)
    hav = haversine_m(t.lon[p], t.lat[p], t.lon[q], t.lat[q])
    delta = (t.ts[q] - t.ts[p]) * max_speed if t.ts is not None else np.full(p.size, MAX_DISTANCE_DELTA_M)
    bound = (hav + delta) / MIN_SPEED_MS
    lmax = hav + RADIUS_MULTIPLIER * (t.sigma[p] + t.sigma[q]) + delta + 1.0
    c = t.cand0 + t.cstart
    return list(
        zip(
            c[p].tolist(),
            c[p + 1].tolist(),
            c[q].tolist(),
            c[q + 1].tolist(),
            bound.tolist(),
            lmax.tolist(),
            strict=True,
        )
    )


def _pair(t, p, q, max_speed):
    """:func:`_pairs` of one transition."""
    return _pairs(t, [p], [q], max_speed)[0]


def _max_speed(engine):
    v = engine.graph.meta.get("max_speed_for_map_matching")
    try:
        v = float(v)
    except (TypeError, ValueError):
        v = math.nan
    return v if v > 0 else float(config.SERVE_MATCH_MAX_SPEED_MS)


def _viterbi(t, tables, tdist, max_speed):
    """Run the HMM of trace ``t`` (consecutive tables ``tdist``, flat, offsets set on ``t``): the
    reconstruct arrays, or None when no point has a candidate to start from."""
    n = t.n
    st = new_state(n, int(t.cstart[-1]))
    use_ts = t.ts is not None and n > 1
    ts = t.ts if use_ts else np.zeros(n)
    if use_ts:
        med = np.diff(ts)
        med = float(np.partition(med, (med.size) // 2)[med.size // 2]) if med.size else 1.0
        max_broken = max(1.0, med) * MAX_BROKEN_STATES
    else:
        max_broken = float(MAX_BROKEN_STATES)
    ask = np.zeros(0)
    while True:
        status = forward(
            st,
            t.cstart,
            t.emis,
            t.lon,
            t.lat,
            t.clon,
            t.clat,
            ts,
            use_ts,
            t.split_gaps,
            float(max_speed),
            max_broken,
            MAX_BROKEN_STATES,
            MAX_DISTANCE_DELTA_M,
            BETA_M,
            t.toff,
            tdist,
            ask,
        )
        if status == NO_MATCH:
            return None
        if status == DONE:
            break
        assert status == NEED_TABLE
        p, q = int(st[0][5]), int(st[0][6])
        (ask,) = tables.run([_pair(t, p, q, max_speed)])
    return reconstruct(st, t.cstart, t.cpoint, t.lon, t.lat)


def _answer(engine, t, allc, rec, p, ex, snap, plans=None):
    """The OSRM match answer of trace ``t`` from its reconstruction ``rec``; ``plans`` (one per matching, or
    None) each matching's legs as found by the transition searches (``(legs, g0, g1)``: legs ``g0:g1`` of a
    :class:`_Legs`, :func:`_leg_plans`), None where that matching is routed by the route service."""
    if rec is None:
        raise EngineError("NoMatch", "Could not match the trace.")
    m_off, m_point, m_cand, m_alt, m_route, m_trace = rec
    k = m_off.size - 1
    if k == 0:
        raise EngineError("NoMatch", "Could not match the trace.")
    matchings = []
    tracepoints = [None] * t.n_input
    for i in range(k):
        rows = slice(int(m_off[i]), int(m_off[i + 1]))
        ph = allc.take(t.cand0 + m_cand[rows])
        plan = None if plans is None else plans[i]
        if plan is not None:
            legs, g0, g1 = plan
            if p.steps or p.annotations:
                r = route_object(engine, ph, PhantomRows(ph), legs.plan(g0, g1), snap, steps=p.steps,
                                 annotations=p.annotations, geometries=p.geometries, overview=p.overview)
            else:
                r = legs.route_object(g0, g1, p.geometries, p.overview)
            res = {"waypoints": waypoints(ph, engine._fingerprint, engine._names)}
        else:
            res = route(
                engine,
                ph,
                steps=p.steps,
                annotations=p.annotations,
                geometries=p.geometries,
                overview=p.overview,
                continue_straight=False,
                exclusion=ex,
                snap=snap,
            )
            r = res["routes"][0]
        r["confidence"] = confidence(float(m_trace[i]), float(m_route[i]))
        matchings.append(r)
        for j, (pt, alt, wp) in enumerate(
            zip(m_point[rows].tolist(), m_alt[rows].tolist(), res["waypoints"], strict=True)
        ):
            wp = dict(wp)
            wp["matchings_index"] = i
            wp["waypoint_index"] = j
            wp["alternatives_count"] = int(alt)
            tracepoints[int(t.kept[pt])] = wp
    return {"code": "Ok", "matchings": matchings, "tracepoints": tracepoints}


def _prepare(engine, traces, index, ex, snap, device):
    """Candidates, and the tables of every trace's consecutive points in few searches: ``(allc, tables,
    tdists)``."""
    allc = _candidates(index, traces)
    if not any(int(t.cstart[-1]) for t in traces):
        return allc, None, None
    tables = _Tables(engine, allc, ex, snap, device)
    max_speed = _max_speed(engine)
    pairs = []
    for t in traces:
        if t.n > 1:
            pairs += _pairs(t, np.arange(t.n - 1), np.arange(1, t.n), max_speed)
    got = tables.run(pairs)
    tdists = []
    k = 0
    for t in traces:
        sizes = [got[k + q - 1].size for q in range(1, t.n)]
        t.toff = np.zeros(max(t.n, 1), dtype=np.int64)
        if t.n > 1:
            t.toff[1:] = np.cumsum([0] + sizes[:-1])
        tdists.append(np.concatenate(got[k : k + t.n - 1]) if t.n > 1 else np.zeros(0))
        k += t.n - 1
    return allc, tables, tdists


def match(engine, p, index, *, exclusion=None, device="auto"):
    """The OSRM match answer of one trace (see :meth:`gpuroute.engine.Engine.match`).

    Parameters
    ----------
    engine : Engine
    p : gpuroute.engine.params.MatchParams
        The checked record.
    index : SegmentIndex
        The segment index the request snaps on (:meth:`gpuroute.engine.Engine._snap_index`).
    exclusion : Exclusion, optional
        The resolved ``exclude=`` / avoids.
    device : {"auto", "cpu", "gpu"}
        Of the transition searches.

    Returns
    -------
    dict
        ``{"code": "Ok", "matchings": [route + "confidence"], "tracepoints": [waypoint or None]}``.

    Raises
    ------
    EngineError
        ``NoSegment`` (no point has a candidate), ``NoMatch`` (no matching of two or more points).
    """
    return match_many(engine, [p], index, exclusion=exclusion, device=device, errors="raise")[0]


def match_many(engine, records, index, *, exclusion=None, device="auto", errors="return"):
    """The OSRM match answers of many traces, their transition searches gathered (see the module notes).

    Parameters
    ----------
    records : sequence of MatchParams
    errors : {"return", "raise"}
        ``"return"``: a trace that cannot be matched gets ``{"code": "NoMatch" or "NoSegment", "message":
        ...}`` in its place; ``"raise"``: the first such EngineError is raised.

    Returns
    -------
    list of dict, one per record, in order.
    """
    snap = metric_snapshot(engine, exclusion)  # one metric for the transitions and the routes
    traces = [Trace(p, config.SERVE_MATCH_SIGMA_M) for p in records]
    allc, tables, tdists = _prepare(engine, traces, index, exclusion, snap, device)
    max_speed = _max_speed(engine)

    def viterbi(job):
        t, tdist = job
        return None if int(t.cstart[-1]) == 0 else _viterbi(t, tables, tdist, max_speed)

    jobs = list(zip(traces, tdists or [None] * len(traces), strict=True))
    n_threads = _threads(len(traces), VITERBI_CHUNK)
    if n_threads > 1:  # the Viterbi kernels run without the GIL: traces on threads
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(n_threads) as pool:
            recs = list(pool.map(viterbi, jobs, chunksize=max(1, len(jobs) // (4 * n_threads))))
    else:
        recs = [viterbi(j) for j in jobs]
    plans = _leg_plans(engine, tables, traces, recs, max_speed) if tables is not None else [None] * len(traces)
    out = []
    for t, p, rec, plan in zip(traces, records, recs, plans, strict=True):
        try:
            if int(t.cstart[-1]) == 0:
                raise EngineError("NoSegment", "Could not find a matching segment for any coordinate.")
            out.append(_answer(engine, t, allc, rec, p, exclusion, snap, plan))
        except EngineError as e:
            if errors == "raise":
                raise
            out.append({"code": e.code, "message": e.message})
    return out


#: Legs per thread, at least, of :func:`_leg_plans`' searches (fewer legs run on the calling thread).
LEG_CHUNK = 64
#: Traces per thread, at least, of :func:`match_many`'s Viterbi passes and of the candidates' projections.
VITERBI_CHUNK = 16


def _threads(n, per):
    """Threads for ``n`` items of at least ``per`` each: up to ``numba.get_num_threads()`` (the engine's
    numba thread setting), 1 for few items."""
    import numba

    return max(1, min(numba.get_num_threads(), n // max(1, int(per))))


def _leg_plans(engine, tables, traces, recs, max_speed):
    """The route legs of every matching of every trace, from the transition searches themselves (step 5 of
    the module notes): the search from each matched candidate rerun with parents kept
    (:func:`gpuroute.engine.match_hmm.leg_chunk`: the route and length the Viterbi read), every leg of the
    call at once, chunks of at least :data:`LEG_CHUNK` legs on up to ``numba.get_num_threads()`` threads
    (each chunk its own scratch). One list per trace (None without a reconstruction) of one ``(legs, g0,
    g1)`` per matching (legs ``g0:g1`` of one :class:`_Legs`), None where a leg has no route within its
    bound (the route service routes that matching)."""
    import numba

    from ..match_hmm import leg_chunk

    opts, net, scale = _search_inputs(engine, tables.snap, tables.allc)
    cols = [[] for _ in range(6)]
    for t, rec in zip(traces, recs, strict=True):
        if rec is None or rec[0].size < 2:
            continue
        m_off, m_point, m_cand = rec[0], rec[1], rec[2]
        same_m = np.zeros(m_point.size, dtype=bool)  # consecutive rows of one matching
        for i in range(m_off.size - 1):
            same_m[int(m_off[i]) : int(m_off[i + 1]) - 1] = True
        k = np.flatnonzero(same_m)
        if not k.size:
            continue
        prs = _pairs(t, m_point[k], m_point[k + 1], max_speed)
        cols[0].append(t.cand0 + m_cand[k])
        cols[1].append(t.cand0 + m_cand[k + 1])
        cols[2].append(np.asarray([q[2] for q in prs], dtype=np.int64))
        cols[3].append(np.asarray([q[3] for q in prs], dtype=np.int64))
        cols[4].append(np.asarray([q[4] if tables.bounded else np.inf for q in prs], dtype=np.float64) / scale)
        cols[5].append(np.asarray([q[5] for q in prs], dtype=np.float64))
    if not cols[0]:
        return [None] * len(traces)
    leg_s, leg_t, t0, t1, bound, lmax = (np.ascontiguousarray(np.concatenate(c)) for c in cols)
    L = leg_s.size
    n_chunks = max(1, min(numba.get_num_threads(), L // max(1, int(LEG_CHUNK))))
    m = net[3].size
    sc = _SCRATCH.get(m, n_chunks)
    try:
        if n_chunks == 1:
            parts = [leg_chunk((leg_s, leg_t, t0, t1, bound, lmax), opts, net, tuple(x[0] for x in sc))]
        else:  # leg_chunk runs without the GIL: one chunk of legs per thread, each on its own scratch row
            from concurrent.futures import ThreadPoolExecutor

            cuts = [L * c // n_chunks for c in range(n_chunks + 1)]

            def one(c):
                q = slice(cuts[c], cuts[c + 1])
                legs = (leg_s[q], leg_t[q], t0[q], t1[q], bound[q], lmax[q])
                return leg_chunk(legs, opts, net, tuple(x[c] for x in sc))

            with ThreadPoolExecutor(n_chunks) as pool:
                parts = list(pool.map(one, range(n_chunks)))
    finally:
        _SCRATCH.put(m, sc)
    legs = _Legs(engine, tables.snap, tables.allc, parts)
    dep = legs.dep
    out = []
    g = 0
    for rec in recs:
        if rec is None or rec[0].size < 2:
            out.append(None)
            continue
        m_off = rec[0]
        plans = []
        for i in range(m_off.size - 1):
            n = int(m_off[i + 1] - m_off[i]) - 1
            plans.append((legs, g, g + n) if n > 0 and dep[g : g + n].min() >= 0 else None)
            g += n
        out.append(plans)
    return out


class _Legs:
    """The legs of :func:`_leg_plans` (rows of the candidates' PhantomSet ``allc``; ``parts`` the chunks'
    :func:`gpuroute.engine.match_hmm.leg_chunk` results, in order) and the route objects made of them, on
    the metric snapshot ``snap`` (None: the hierarchy's arrays), as the route service makes them."""

    def __init__(self, engine, snap, allc, parts):
        self.e = engine
        self.snap = snap
        self.dep = np.concatenate([q[0] for q in parts])
        self.arr = np.concatenate([q[1] for q in parts])
        self.same = np.concatenate([q[4] for q in parts])
        self.blen = np.concatenate([q[5] for q in parts])
        mo = [q[2] for q in parts]
        base = np.cumsum([0] + [int(x[-1]) for x in mo[:-1]])
        self.mid_off = np.concatenate([[0]] + [x[1:] + b for x, b in zip(mo, base, strict=True)]).astype(np.int64)
        self.mid = np.concatenate([q[3] for q in parts]).astype(np.int64)
        self.allc = allc
        self._sums = None

    def plan(self, g0, g1):
        """The route service's leg plan of legs ``g0:g1`` (:func:`gpuroute.engine.services.route.route_object`):
        ``[((arc, fraction), (arc, fraction), LegPath or None)]``."""
        a = self.allc
        head = self.e._head
        out = []
        for g in range(g0, g1):
            d, r = int(self.dep[g]), int(self.arr[g])
            if self.same[g]:
                path = None
            else:
                mid = self.mid[self.mid_off[g] : self.mid_off[g + 1]]
                nodes = np.empty(mid.size + 1, dtype=np.int64)
                nodes[0] = head[a.arc[d]]
                nodes[1:] = head[mid]
                path = LegPath(mid, nodes, float(self.blen[g]))
            out.append(((int(a.arc[d]), float(a.fraction[d])), (int(a.arc[r]), float(a.fraction[r])), path))
        return out

    def sums(self):
        """:func:`gpuroute.engine.match_hmm.leg_sums` of every leg (computed once), with the points."""
        if self._sums is None:
            from ..match_hmm import leg_sums

            e, snap, a = self.e, self.snap, self.allc
            if snap is not None:
                wcost, wf = snap.cost, snap.scale / e._w_scale
                dcost, df = ((snap.cost, snap.scale) if snap.is_time
                             else (e._dur if snap.duration is None else snap.duration, 1.0))
            else:
                wcost, wf = e._w, 1.0
                dcost, df = e._dur, 1.0
            has_dur = dcost is not None
            empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0)
            tc = e._tc
            if tc is not None and snap is not None:
                turn = (True, bool(snap.is_time), snap.turn_cost, snap.cost, float(snap.scale / e._w_scale),
                        float(snap.scale), tc.duration, tc.weight)
            elif tc is not None:
                turn = (False, False, empty_i, empty_f, 1.0, 1.0, tc.duration, tc.weight)
            else:
                turn = (False, False, empty_i, empty_f, 1.0, 1.0, empty_f, empty_f)
            d = np.maximum(self.dep, 0)
            r = np.maximum(self.arr, 0)
            arc = a.arc.astype(np.int64)
            self._sums = leg_sums(
                arc[d], a.fraction[d], arc[r], a.fraction[r], self.same, self.mid_off, self.mid, a.lon[d], a.lat[d],
                a.lon[r], a.lat[r], e._coords_f64, e._head, wcost, float(wf), dcost if has_dur else empty_f,
                float(df), has_dur, e._len, tc is not None, empty_i if tc is None else e._t_first,
                empty_i if tc is None else e._fo, *turn,
                e._name_id, True)
            self.has_dur = has_dur
        return self._sums

    def route_object(self, g0, g1, geometries, overview):
        """The route object of legs ``g0:g1`` without steps or annotations: the route service's
        (:func:`gpuroute.engine.services.route.route_object`) from :meth:`sums`' arrays."""
        from ... import config
        from ..osrm import encode_geometry, round1, simplify

        e = self.e
        sums, summ, pts_off, pts = self.sums()
        names = e._names
        sc = e._w_scale
        has_dur = self.has_dur
        legs = []
        tot_w = tot_d = tot_l = 0.0
        for g, (w_sum, d_sum, l_sum, tw, td), (n0, n1) in zip(range(g0, g1), sums[g0:g1].tolist(),
                                                             summ[g0:g1].tolist(), strict=True):
            summary = ", ".join(names[i] for i in (n0, n1) if i >= 0)
            legs.append({"steps": [], "summary": summary, "weight": round1((w_sum + tw) * sc),
                         "duration": round1(d_sum + td) if has_dur else None, "distance": round1(l_sum)})
            tot_w += w_sum + tw
            tot_d = tot_d + d_sum + td if has_dur else None
            tot_l += l_sum
            del g
        out = {}
        if overview != "false":
            p = [pts[pts_off[g0] : pts_off[g0 + 1]]] + [pts[pts_off[g] + 1 : pts_off[g + 1]] for g in range(g0 + 1, g1)]
            q = np.concatenate(p)
            if overview == "simplified":
                q = simplify(q, config.SERVE_SIMPLIFY_TOLERANCE_M)
            out["geometry"] = encode_geometry(q, geometries)
        snap = self.snap
        weight_name = e.weight_name if snap is None or snap.name == "time" else snap.name
        out.update(legs=legs, weight_name=weight_name, weight=round1(tot_w * sc),
                   duration=None if not has_dur else round1(tot_d), distance=round1(tot_l))
        return out
