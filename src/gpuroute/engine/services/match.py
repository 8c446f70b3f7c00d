"""The match service (OSRM ``/match/v1``) past validation: map matching of GPS traces by a hidden Markov model
(Newson and Krumm 2009, as osrm-backend runs it: ``plugins/match.cpp``, ``routing_algorithms/map_matching.cpp``).

Per trace:

1. **Tidy** (``tidy=true``, OSRM's ``match_parameters_tidy.hpp``): a point is dropped until 15 m (and, with
   timestamps, 5 s) have run up since the last one kept; the first and last are kept. **Dense traces** (not
   OSRM's; tidy or not): in a trace whose steps are mostly GPS noise (1 s sampling at 10 m noise), the points
   within 3 noise standard deviations of a step of the first of a group are matched as one point at the group's
   mean (:meth:`Traces._keep_beyond_noise`, :data:`NOISE_SIGMAS`, :data:`DENSE_STEP`); the others' tracepoints
   are null, as tidy's.
2. **Candidates.** Every segment of the request's segment index (the largest component, without closed or
   excluded directions: :meth:`gpuroute.engine.Engine._snap_index`) within :data:`RADIUS_MULTIPLIER` (3.5) sigma of
   the point (sigma: its ``radiuses`` entry, the GPS standard deviation, default
   :data:`gpuroute.config.SERVE_MATCH_SIGMA_M`; OSRM's radius is 3 sigma),
   projected exactly (the samples of the segment index in each point's ball, through a grid, and their
   segments' projections, every point of every trace in compiled passes on threads:
   :func:`gpuroute.engine.match_hmm.ball_samples`, :func:`~gpuroute.engine.match_hmm.candidate_pairs`);
   ``bearings`` keep the directions within
   range. OSRM's ``filterCandidates``: at a point where the trace turns sharply (angle <= 45 or >= 315
   degrees between the points before and after -- here the nearest ones beyond the noise, 4 sigma away:
   :func:`_allow_uturn`) a two-way segment is one candidate that may be left either way (a U-turn); elsewhere it
   is two candidates, one per direction. The candidates are the points of one
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
   plus ``max_distance_delta``: the searches stop there). Not OSRM's: a turn onto a restricted road (destination
   or private access) costs the transitions at most :data:`RESTRICTED_ENTRY_S` (car.lua's 3,276.7 s put every such
   road out of the bound's reach: :func:`_cap_restricted_entry`).
4. **Viterbi** (:func:`gpuroute.engine.match_hmm.forward` and ``reconstruct``, numba): emission ``log
   N(d; 0, sigma)`` (less :data:`UTURN_LOG_PENALTY` for a candidate that may be left backwards: a U-turn is
   rare, OSRM's free one let noise turn the route back on itself), transition ``log Exp(|route - great-circle|; beta = 10 m)``, OSRM's breakages, gaps and
   splits; each sub-trace of two or more matched points is a matching. Every trace of a call in one compiled
   pass (:func:`gpuroute.engine.match_hmm.viterbi_many`, traces on the workers); a trace whose pass asks for a
   table (after a breakage) gets it from one search of every trace's asks, and resumes. With many traces a worker
   (:data:`LAZY_TRACES_PER_THREAD`, and on one thread) the tables of step 3 are not searched up front: the pass
   searches each step's table as it reaches it (:func:`gpuroute.engine.match_hmm.viterbi_search_many`), only the
   rows of the sources the Viterbi has not pruned (a third fewer searches on Monaco's traces; the rows it reads
   are the same searches', so the same answers), the asks after a breakage too (up to
   :data:`LAZY_ASK_POINTS` back): one compiled pass of every trace, no round trip. Where the GPU twin of the
   searches runs (``config.SERVE_MATCH_TRANSITIONS_DEVICE``, :func:`_gpu_backend`), such a batch's tables are
   instead all searched up front on the GPU (:func:`gpuroute.engine.match_gpu.transitions`, one thread per
   search, the CPU's tables bit for bit) and the Viterbi runs over them: the same answers.
5. **Routes.** Each matching's route is the route service's through its matched candidates in order
   (``continue_straight=False`` as OSRM's match: the candidates' own directions say where a U-turn is
   allowed), on the same snapshot, one leg per pair of consecutive matched points -- but its legs are not
   searched again: each is the route the transition search found (:func:`_leg_plans`: the search from the
   matched source candidate rerun with its parents kept, :func:`gpuroute.engine.match_hmm.leg_chunk`, every
   leg of the call at once, on threads), built into the route object by the route service's kernels
   (:class:`_Legs`; :func:`gpuroute.engine.services.route.route_object` where steps or annotations are
   asked), so the answer equals :func:`gpuroute.engine.services.route.route`'s through the same candidates
   (up to ties between equal-weight routes, and but for step 3's turns onto restricted roads), which routes a matching only where a leg has no route within its
   bound (the transitions came from the many-to-many, ``"table"``). Its ``confidence`` is OSRM's (a Bayes
   classifier of ``log(route length / trace length)``, Laplace distributions fitted by OSRM).

The traces of a call travel side by side as flat arrays (:class:`Traces`: points, candidates, tables and
matchings, each trace a range of rows), so a call of many traces runs each step once, in compiled passes,
and builds its answers in bulk (one :func:`gpuroute.engine.osrm.waypoints` call for every matched point). The
parallel kernels hand out their traces (the dearest first) and searches through a work queue
(:func:`gpuroute.engine.match_hmm.next_item`): traces of unequal cost keep every worker busy to the end. A call
of many traces is a pipeline (:data:`PIPELINE_TRACES`): batches solved ahead on a thread (:data:`PIPELINE_DEPTH`
at once) while the calling thread builds the answers, Python's cyclic garbage collector paused (:func:`_gc_paused`);
the records' checks (:func:`match_many`'s ``parse``, :meth:`gpuroute.engine.Engine.match_many`'s) run batch by batch
beside the first batches' solving.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import threading
import weakref

import numba
import numpy as np

from ... import config
from ...geo import EARTH_RADIUS_M, haversine_m, unit_vectors
from ...geo.segments import PhantomSet, angle_difference
from ..algorithms import metric_snapshot, table_search
from ..legs import round_floats
from ..match_hmm import (
    DONE,
    NEED_TABLE,
    NO_MATCH,
    ball_samples,
    candidate_pairs,
    candidate_rows,
    far_neighbours,
    flatten_matchings,
    grid_cell,
    leg_chunk,
    leg_sums,
    new_matchings,
    new_scratch,
    new_states,
    noise_groups,
    sample_grid,
    split_order,
    transition_chunk,
    transitions,
    viterbi_chunk,
    viterbi_many,
    viterbi_search_chunk,
    viterbi_search_many,
)
from ..osrm import EngineError, waypoints
from ..traffic import LegPath
from .route import PhantomRows, route, route_object

__all__ = ["match", "match_many", "candidate_index", "confidence", "tidy_keep", "Traces"]

#: A point's candidates lie within this many sigma (OSRM's ``RADIUS_MULTIPLIER`` is 3). At 3 sigma the true road
#: lies beyond the radius of 0.27 % of the points (the noise across the road is one axis's), a few points of every
#: long trace; where another road lies within it such a point is forced onto that road and the route detours in and
#: out (benchmarks/match_quality.py, Helsinki sigma 5-10 m: 7-15 % long). At 3.5 sigma 0.05 %; beyond 3 sigma
#: the emission (a log probability 4.5-6.1 under the road's nearest) lets a far candidate win only against a detour.
RADIUS_MULTIPLIER = 3.5
#: OSRM's ``MAX_BROKEN_STATES``, ``MATCHING_BETA`` (m) and ``MAX_DISTANCE_DELTA`` (m, without timestamps).
MAX_BROKEN_STATES = 10
BETA_M = 10.0
MAX_DISTANCE_DELTA_M = 2000.0
#: OSRM's bound on a transition's route: this speed (m/s) over the great-circle distance plus the delta.
MIN_SPEED_MS = 4.0
#: A sharp turn (a possible U-turn) is judged between points this many sigma away from the point, within
#: this many points each way (:func:`_allow_uturn`).
UTURN_SIGMAS = 4.0
UTURN_WINDOW = 30
#: What a U-turn candidate (a two-way segment that may be left either way, at a sharp turn) pays on its emission
#: log probability (OSRM's is free; benchmarks/match_quality.py: 3-7 points more within 2 % in 6 of 18 cells tried).
UTURN_LOG_PENALTY = 3.0
#: The most a transition pays (OSRM weight, s) for a turn onto a restricted road (destination / private access;
#: car.lua: ``max_turn_weight``, 3,276.7 s), :func:`_cap_restricted_entry`. 0: the turn is free. Tried on 60 traces a
#: cell of Monaco and Helsinki at sigma 5 and 10 m (benchmarks/match_quality.py): 0, 20, 60 and 150 s (with OSRM's
#: bound of such a step grown by as much) got 94.3, 93.8, 93.8 and 93.3 % within 2 % on average (before: 91.7 %).
RESTRICTED_ENTRY_S = 0.0
#: The candidates' sample grid: cubes of this many metres (a point's ball spans 2 or 3 a side: few cells looked
#: up, every sample in them measured; 4x faster than the k-d tree's ball query on Monaco at 200 m, 2.5x slower at
#: 30 m).
GRID_CELL_M = 200.0
#: OSRM's tidy thresholds.
TIDY_M, TIDY_S = 15.0, 5.0
#: Dense traces (:func:`gpuroute.engine.match_hmm.noise_groups`): a trace whose mean step driven (estimated from its
#: steps less the noise) is under ``DENSE_STEP`` times the noise of a step's two ends is matched on groups of
#: points: each group the points within ``NOISE_SIGMAS`` such noise (``hypot`` of the two sigmas) of its first,
#: matched as one point at their mean (:meth:`Traces._keep_beyond_noise`; Newson and Krumm drop points within
#: 2 sigma of the last one kept). ``NOISE_SIGMAS = 0``: every point matched (OSRM's). benchmarks/match_quality.py:
#: 1 s sampling at sigma 10 m, 58-73 % of the traces within 2 % of the true length before, 88-97 % after
#: (BENCHMARKS.md, "Map-matching quality").
NOISE_SIGMAS = 3.0
DENSE_STEP = 1.0
#: OSRM's confidence classifier: positive and negative Laplace (location, scale), positive prior.
_CONF_POS, _CONF_NEG, _CONF_PRIOR = (0.005986, 0.016646), (0.054385, 0.458432), 0.696774


def confidence(trace_length, matched_length):
    """OSRM's ``MatchingConfidence`` of a matching: a float in [0, 1] from the great-circle length of the
    trace between its matched points and the matched route's length (m); 0 where either is 0."""
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


def _allow_uturn(lon, lat, ptrace, sigma):
    """bool (n,): a sharp turn at each inner point of its trace (``ptrace`` int64 (n,): the trace of each point;
    ``sigma`` float64 (n,) m): OSRM's rule -- the angle at the point between the points before and after within 45
    degrees of a U-turn -- between the nearest points before and after that lie at least :data:`UTURN_SIGMAS`
    sigma away (up to :data:`UTURN_WINDOW` points each way; none that far: no U-turn). OSRM takes the adjacent
    points; where they lie within the noise of each other (1 s sampling, 10 m noise) their angle is noise, every
    other point looks like a U-turn, and its two-way candidates may be left backwards for free: the matched route
    runs up and down the road (a 3 km trace matched 10-50 % too long). Points farther apart than that keep OSRM's
    answer."""
    n = lon.size
    out = np.zeros(n, dtype=bool)
    if n < 3:
        return out
    reach = np.ascontiguousarray(UTURN_SIGMAS * sigma, dtype=np.float64)
    lon = np.ascontiguousarray(lon, dtype=np.float64)
    lat = np.ascontiguousarray(lat, dtype=np.float64)
    ptrace = np.ascontiguousarray(ptrace, dtype=np.int64)
    before = far_neighbours(lon, lat, ptrace, reach, UTURN_WINDOW, -1)
    after = far_neighbours(lon, lat, ptrace, reach, UTURN_WINDOW, 1)
    mid = np.flatnonzero((before >= 0) & (after >= 0))
    k = np.cos(np.radians(lat[mid]))

    def bearing(i1):
        dx = (np.mod(lon[i1] - lon[mid] + 180.0, 360.0) - 180.0) * k
        dy = lat[i1] - lat[mid]
        return np.degrees(np.arctan2(dx, dy))

    ang = np.mod(bearing(before[mid]) - bearing(after[mid]), 360.0)
    out[mid] = (ang <= 45.0) | (ang >= 315.0)
    return out


class Traces:
    """The traces of one call prepared for matching, side by side: the points kept (tidy), their sigma, their
    candidates, as flat arrays (trace ``k``'s points are rows ``poff[k]:poff[k + 1]``).

    Attributes
    ----------
    T : int
        Traces.
    poff : int64 (T + 1,)
    ptrace : int64 (n,)
        The trace of each point.
    kept : int64 (n,)
        Each point's index among its trace's input coordinates (all of them, unless tidy or the dense-trace
        groups dropped some: :meth:`_keep_beyond_noise`).
    n_input : int64 (T,)
    lon, lat : float64 (n,)
        Degrees.
    ts : float64 (n,)
        Timestamps (s); 0 in a trace without them (``has_ts``).
    has_ts, split_gaps : bool (T,)
        The trace has timestamps; ``gaps=split``.
    sigma : float64 (n,)
        GPS standard deviation (m).
    bearings : float64 (n, 2) or None
        ``(value, range)`` degrees, NaN where none.
    want_points : bool
        Some trace's answer has an overview (its legs' points are needed).
    cstart : int64 (n + 1,)
        Candidates of point ``i``: rows ``cstart[i]:cstart[i + 1]`` of the call's PhantomSet (:func:`_candidates`).
    coff : int64 (T + 1,)
        Candidates of trace ``k``: rows ``coff[k]:coff[k + 1]``.
    cpoint : int64 (N,)
        The point of each candidate.
    emis, clon, clat : float64 (N,)
        Emission log probability; the candidate's location (degrees).
    """

    def __init__(self, records, default_sigma):
        T = len(records)
        coords, sig, tss, brg, keeps, n_in = [], [], [], [], [], []
        has_ts = np.zeros(T, dtype=bool)
        split = np.zeros(T, dtype=bool)
        any_brg = any_tidy = False
        for k, p in enumerate(records):
            c = p.coords
            n0 = c.shape[0]
            n_in.append(n0)
            ts = p.timestamps
            keep = None
            if p.tidy:
                ts = None if ts is None else np.asarray(ts, dtype=np.float64)
                keep = np.flatnonzero(tidy_keep(c[:, 0], c[:, 1], ts))
                any_tidy = True
                c = c[keep]
            keeps.append(keep)
            coords.append(c)
            n = c.shape[0]
            if ts is not None:
                ts = np.asarray(ts, dtype=np.float64)
                tss.append(ts if keep is None else ts[keep])
                has_ts[k] = True
            else:
                tss.append(np.zeros(n))
            r = p.radiuses
            if r is None:
                sig.append(np.full(n, float(default_sigma)))
            else:
                r = np.asarray(r, dtype=np.float64)
                sig.append(r if keep is None else r[keep])
            if p.bearings is not None:
                any_brg = True
                bb = np.asarray(p.bearings, dtype=np.float64)
                brg.append(bb if keep is None else bb[keep])
            else:
                brg.append(None)
            split[k] = p.gaps == "split"
        self.want_points = any(p.overview != "false" for p in records)
        self.T = T
        npts = np.fromiter((c.shape[0] for c in coords), dtype=np.int64, count=T)
        self.poff = np.zeros(T + 1, dtype=np.int64)
        np.cumsum(npts, out=self.poff[1:])
        n = int(self.poff[-1])
        self.ptrace = np.repeat(np.arange(T, dtype=np.int64), npts)
        if any_tidy:
            self.kept = np.concatenate([np.arange(c.shape[0], dtype=np.int64) if q is None else q
                                        for c, q in zip(coords, keeps, strict=True)]) if T else np.zeros(0, np.int64)
        else:
            self.kept = np.arange(n, dtype=np.int64) - self.poff[:-1][self.ptrace]
        self.n_input = np.asarray(n_in, dtype=np.int64)
        xy = np.concatenate(coords) if T else np.zeros((0, 2))
        self.lon = np.ascontiguousarray(xy[:, 0], dtype=np.float64)
        self.lat = np.ascontiguousarray(xy[:, 1], dtype=np.float64)
        self.ts = np.ascontiguousarray(np.concatenate(tss) if T else np.zeros(0), dtype=np.float64)
        self.sigma = np.ascontiguousarray(np.concatenate(sig) if T else np.zeros(0), dtype=np.float64)
        self.has_ts = has_ts
        self.split_gaps = split
        self.bearings = None
        if any_brg:
            self.bearings = np.concatenate([np.full((c.shape[0], 2), np.nan) if bb is None else bb
                                            for c, bb in zip(coords, brg, strict=True)])
        self._keep_beyond_noise()

    def _keep_beyond_noise(self):
        """Match a dense trace's points beyond the noise of each other only (:func:`gpuroute.engine.match_hmm.noise_groups`
        at :data:`NOISE_SIGMAS` and :data:`DENSE_STEP`): a group of points within the noise of its first is matched
        as one point at their mean position and timestamp (the noise of a mean of ``m`` points is ``1 / sqrt(m)``
        of one's), reported on its middle point; the group's other points are dropped as tidy drops points (null
        tracepoints). A trace's first and last points stay groups of their own (a match runs from the first point
        to the last, as OSRM's)."""
        if NOISE_SIGMAS <= 0 or self.n == 0:
            return
        grp = noise_groups(self.lon, self.lat, self.sigma, self.poff, float(NOISE_SIGMAS), float(DENSE_STEP))
        if np.array_equal(grp, np.arange(self.n, dtype=np.int64)):
            return
        vi = np.flatnonzero(grp >= 0)
        gid = grp[vi]
        cnt = np.bincount(gid)
        at = np.searchsorted(gid, np.arange(cnt.size))
        first, rep = vi[at], vi[at + cnt // 2]
        dlon = np.mod(self.lon[vi] - self.lon[first][gid] + 180.0, 360.0) - 180.0
        lon = self.lon[first] + np.bincount(gid, dlon) / cnt
        lat = self.lat[first] + np.bincount(gid, self.lat[vi] - self.lat[first][gid]) / cnt
        ts = self.ts[first] + np.bincount(gid, self.ts[vi] - self.ts[first][gid]) / cnt
        npts = np.bincount(self.ptrace[rep], minlength=self.T)
        self.poff = np.zeros(self.T + 1, dtype=np.int64)
        np.cumsum(npts, out=self.poff[1:])
        self.ptrace = np.ascontiguousarray(self.ptrace[rep])
        self.kept = np.ascontiguousarray(self.kept[rep])
        self.lon = np.ascontiguousarray(lon, dtype=np.float64)
        self.lat = np.ascontiguousarray(lat, dtype=np.float64)
        self.ts = np.ascontiguousarray(ts, dtype=np.float64)
        self.sigma = np.ascontiguousarray(self.sigma[rep])
        if self.bearings is not None:
            self.bearings = self.bearings[rep]

    @property
    def n(self):
        """Points kept, all traces."""
        return int(self.poff[-1])

    def __len__(self):
        return self.T


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
    """The candidates of every point of :class:`Traces` ``traces`` (see the module notes, step 2), one point each
    of the returned PhantomSet (rows in point order, a point's by distance), their arrays set on ``traces``
    (``cstart``, ``coff``, ``cpoint``, ``emis``, ``clon``, ``clat``): the segment index's samples in each
    point's ball (the balls of its k-d tree, found through a grid: :func:`_sample_grid`,
    :func:`gpuroute.engine.match_hmm.ball_samples`), their segments' exact projections
    (:func:`gpuroute.engine.match_hmm.candidate_pairs`), the directions kept and split and the candidates'
    rows (:func:`gpuroute.engine.match_hmm.candidate_rows`): compiled, chunks of points on threads, each chunk's
    candidates whole (a point's candidates depend on that point alone, and the rows are in point order), joined in
    order."""
    lon, lat, sig = traces.lon, traces.lat, traces.sigma
    radius = RADIUS_MULTIPLIER * sig
    reach = radius * (1.01 + 5.0 * radius / EARTH_RADIUS_M) + index._slack  # the k-d tree's balls
    xyz, h, grid = _sample_grid(index)
    segs = (index.sample_segment, index.lon_u, index.lat_u, index.lon_v, index.lat_v)
    uturn = _allow_uturn(lon, lat, traces.ptrace, sig)
    name_id = np.asarray(index.name_id, dtype=np.int32)

    def one(a, b):  # the candidates of points a:b (without the GIL but for a few NumPy passes)
        q = unit_vectors(lon[a:b], lat[a:b]) * EARTH_RADIUS_M
        lens, samples = ball_samples(q, reach[a:b], xyz, h, *grid)
        pt, seg, f = candidate_pairs(lon[a:b], lat[a:b], radius[a:b], lens, samples, *segs)
        # each projection's great-circle distance from its point (NumPy's, elementwise: the same numbers as one
        # call over every candidate)
        d = haversine_m(lon[a:b][pt], lat[a:b][pt], f[:, 3], f[:, 4])
        pt = pt + a
        fwd = index._phantom_fwd[seg]
        rev = index._phantom_rev[seg]
        has_b = None
        if traces.bearings is not None:
            bb = traces.bearings[pt]
            has_b = ~np.isnan(bb[:, 0])
        if has_b is not None and has_b.any():
            fwd = np.where(has_b & ~(angle_difference(f[:, 2], bb[:, 0]) <= bb[:, 1]), -1, fwd)
            rev = np.where(has_b & ~(angle_difference(f[:, 2] + 180.0, bb[:, 0]) <= bb[:, 1]), -1, rev)
        ok = (fwd >= 0) | (rev >= 0)
        pt, seg, f, fwd, rev, d = pt[ok], seg[ok], f[ok], fwd[ok], rev[ok], d[ok]
        # OSRM's split: away from sharp turns a two-way segment is two candidates, one per direction
        both = (fwd >= 0) & (rev >= 0) & ~uturn[pt]
        # candidates: (point, distance, split copy) order -- the reverse copy after every candidate of its point
        # at that distance: np.lexsort((np.arange(N), distance, point)), by merges -- and one PhantomSet: a point
        # per candidate, its options its arcs (forward before reverse)
        order = split_order(pt, f[:, 1], both)
        rows = candidate_rows(pt, seg, f, np.asarray(fwd, dtype=np.int64), np.asarray(rev, dtype=np.int64), both,
                              order, name_id)  # one signature: the warm-up's
        dist = d[np.concatenate([np.arange(pt.size, dtype=np.int64), np.flatnonzero(both)])[order]]  # its rows'
        # a candidate that may be left backwards (a U-turn at the point) pays for it
        uturn_c = (rows[3] >= 0) & (rows[4] >= 0)
        return rows, dist, emission_log_prob_array(dist, sig[rows[0]]) - UTURN_LOG_PENALTY * uturn_c

    n_threads = _threads(traces.T, VITERBI_CHUNK)
    if n_threads > 1:  # chunks of points on threads, joined in order
        cut = [lon.size * c // n_threads for c in range(n_threads + 1)]
        parts = list(_pool(n_threads).map(one, cut[:-1], cut[1:]))
        cols = [np.concatenate([x[0][i] for x in parts]) for i in range(14)]
        n_c = np.cumsum([0] + [x[0][0].size for x in parts[:-1]])  # candidates before each chunk
        n_r = np.cumsum([0] + [int(x[0][5][-1]) for x in parts[:-1]])  # rows before each chunk
        cols[5] = np.concatenate([np.zeros(1, dtype=np.int64)] + [x[0][5][1:] + r for x, r in zip(parts, n_r,
                                                                                                   strict=True)])
        cols[6] = np.concatenate([x[0][6] + c for x, c in zip(parts, n_c, strict=True)])
        dist = np.concatenate([x[1] for x in parts])
        emis = np.concatenate([x[2] for x in parts])
    else:
        cols, dist, emis = one(0, lon.size)
    (c_pt, c_seg, c_f, c_fwd, c_rev, start, row_c, arc, segment, name, fraction, segment_fraction, o_lon,
     o_lat) = cols
    in_lon, in_lat = lon[c_pt], lat[c_pt]
    allc = PhantomSet(start, arc, fraction, segment, segment_fraction, o_lon, o_lat, dist[row_c], name,
                      np.zeros(row_c.size, dtype=bool), in_lon, in_lat)
    cnt = np.bincount(c_pt, minlength=lon.size)
    traces.cstart = np.zeros(lon.size + 1, dtype=np.int64)
    np.cumsum(cnt, out=traces.cstart[1:])
    traces.coff = traces.cstart[traces.poff]
    traces.cpoint = c_pt
    traces.emis = np.ascontiguousarray(emis)
    traces.clon = np.ascontiguousarray(c_f[:, 3])
    traces.clat = np.ascontiguousarray(c_f[:, 4])
    return allc


#: The segment indexes' sample grids (:func:`_sample_grid`), as long as each index lives.
_GRIDS = weakref.WeakKeyDictionary()
_GRIDS_LOCK = threading.Lock()


def _sample_grid(index):
    """``(xyz, h, grid)``: the samples of segment index ``index`` (its k-d tree's points, float64 (S, 3), m) and
    :func:`gpuroute.engine.match_hmm.sample_grid`'s cells over them, of ``h`` metres
    (:data:`GRID_CELL_M`, at least 4 times the index's slack), made once per index."""
    hit = _GRIDS.get(index)
    if hit is None:
        with _GRIDS_LOCK:
            hit = _GRIDS.get(index)
            if hit is None:
                xyz = np.ascontiguousarray(index.tree.data, dtype=np.float64)
                h = grid_cell(max(GRID_CELL_M, 4.0 * index._slack))
                hit = _GRIDS[index] = (xyz, h, sample_grid(xyz, h))
    return hit


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
    tcost = _cap_restricted_entry(engine.graph, first, out_arc, tcost, cost, scale)
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


def _cap_restricted_entry(graph, first, out_arc, tcost, cost, scale):
    """``tcost`` with every turn from an unrestricted arc onto a restricted one (the graph's ``restricted`` arc
    attribute: OSRM's destination / private access) priced at most :data:`RESTRICTED_ENTRY_S` (OSRM weight s) of
    penalty; a copy where a turn changed, else ``tcost`` itself (``first``, ``out_arc``, ``tcost``, ``cost``: the
    turn-expanded metric of :func:`_turn_metric`, metric units; ``scale``: weight units per metric unit).

    Why: car.lua prices that turn at ``max_turn_weight`` (3,276.7 s), a routing preference ("only to get there"),
    not time; OSRM's weight bound on a transition, ``(great-circle + delta) / 4 m/s``, then rules out every
    transition onto such a road, and a trace that drives one lost the points on it (a trace that starts or ends on
    a destination-only lane, matched 3-11 % short) or was matched round it (0.8-2.4 km detours in Helsinki;
    BENCHMARKS.md, "Map-matching quality"). The routes of the transitions and of the matched legs are the searches'
    on this metric, so a matched route may now enter a restricted road where the trace does."""
    restricted = graph.arc_attrs.get("restricted")
    if restricted is None:
        return tcost
    restricted = np.asarray(restricted, dtype=bool)
    if not restricted.any():
        return tcost
    src = np.repeat(np.arange(first.size - 1, dtype=np.int64), np.diff(first))
    cap = float(RESTRICTED_ENTRY_S) / scale
    into = (tcost >= 0) & restricted[out_arc] & ~restricted[src] & (tcost - cost[out_arc] > cap)
    if not into.any():
        return tcost
    tcost = tcost.copy()
    tcost[into] = cost[out_arc[into]] + cap
    return tcost


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
        self.gpu = None  # the GPU twin's backend where the searches run there (:func:`_gpu_backend`)
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

    def run_arrays(self, cols):
        """:meth:`run` of the pairs ``cols = (s0, s1, t0, t1, bound, lmax)`` (int64 (P,) four times, float64 (P,)
        twice, as :func:`_pairs` gives them), flat: ``(out, off)``, pair ``p``'s table ``out[off[p]:off[p + 1]]``
        (float64, metres; ``off`` int64 (P + 1,))."""
        if self.how == "search":
            return self._search(cols)
        got = self.run_table(_as_tuples(cols))
        off = np.zeros(len(got) + 1, dtype=np.int64)
        np.cumsum([g.size for g in got], out=off[1:])
        return (np.concatenate(got) if got else np.zeros(0)), off

    def run_search(self, pairs):
        """:meth:`run` by bounded searches (:func:`gpuroute.engine.match_hmm.transitions`), all pairs in one
        parallel kernel; a pair whose search ran out of heap goes to :meth:`run_table`."""
        out, off = self._search(_as_arrays(pairs))
        return [out[off[p] : off[p + 1]] for p in range(len(pairs))]

    def _search(self, cols):
        """:meth:`run_search` of the pairs' arrays (:meth:`run_arrays`)."""
        opts, net, scale = _search_inputs(self.engine, self.snap, self.allc)
        s0, s1, t0, t1, bound, lmax = cols
        P = s0.size
        bound = (bound if self.bounded else np.full(P, np.inf)) / scale
        ns = s1 - s0
        nt = t1 - t0
        ns = np.where(nt > 0, ns, 0)
        size = ns * nt
        off = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(size, out=off[1:])
        job_pair = np.repeat(np.arange(P, dtype=np.int64), ns)
        job_s = np.repeat(s0, ns) + (np.arange(job_pair.size, dtype=np.int64) - np.repeat(off_of(ns), ns))
        out = np.empty(int(off[-1]))  # every cell written: each job writes its source's row
        ok = np.ones(job_s.size, dtype=np.bool_)
        jobs = (job_s, job_pair, np.ascontiguousarray(t0), np.ascontiguousarray(t1),
                np.ascontiguousarray(bound, dtype=np.float64), np.ascontiguousarray(lmax, dtype=np.float64),
                off[:-1].copy(), np.ascontiguousarray(s0))
        threads = numba.get_num_threads()
        m = net[3].size
        if self.gpu is not None and job_s.size:  # the GPU twin (gpuroute.engine.match_gpu): the same out and ok
            from .. import match_gpu

            match_gpu.transitions(jobs, opts, net, out, ok, backend=self.gpu)
        elif threads > 1 and job_s.size >= int(config.SERVE_MATCH_PARALLEL_JOBS):
            sc = _SCRATCH.get(m, min(threads, job_s.size))
            try:
                with self.engine._table_lock:  # numba's workqueue layer: one parallel call at a time per engine
                    transitions(jobs, opts, net, out, ok, sc)
            finally:
                _SCRATCH.put(m, sc)
        elif job_s.size:  # a few searches: on this thread
            sc = _SCRATCH.get(m, 1)
            try:
                transition_chunk(0, job_s.size, 1, jobs, opts, net, out, ok, tuple(x[0] for x in sc))
            finally:
                _SCRATCH.put(m, sc)
        self.calls += 1
        bad = np.unique(job_pair[~ok])
        if bad.size:
            again = self.run_table(_as_tuples(tuple(c[bad] for c in cols)))
            for p, t in zip(bad.tolist(), again, strict=True):
                out[off[p] : off[p + 1]] = t
        return out, off

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


def _pairs(traces, p, q, max_speed):
    """The transitions between points ``p[i]`` and ``q[i]`` (int arrays, rows of :class:`Traces` ``traces``,
    each pair in one trace), as arrays ``(s0, s1, t0, t1, bound, lmax)``: the source and target candidate rows
    (int64), OSRM's weight bound (float64, s: the great-circle distance plus ``max_distance_delta`` at 4 m/s)
    and the longest route (float64, m) a transition can use (the candidates' farthest great-circle distance,
    at most the points' plus :data:`RADIUS_MULTIPLIER` sigma each, plus ``max_distance_delta``: a longer route
    makes the transition impossible, so the searches stop there). ``max_distance_delta``
    (:func:`gpuroute.engine.match_hmm.forward`'s): with timestamps the step's time at ``max_speed`` (m/s), at most
    OSRM's, the trace's median sampling step (:func:`_median_steps`) at ``max_speed``; else
    :data:`MAX_DISTANCE_DELTA_M`."""
    p = np.asarray(p, dtype=np.int64)
    q = np.asarray(q, dtype=np.int64)
    lon, lat, sig = traces.lon, traces.lat, traces.sigma
    hav = haversine_m(lon[p], lat[p], lon[q], lat[q])
    k = traces.ptrace[p]
    step = np.minimum(traces.ts[q] - traces.ts[p], _median_steps(traces)[k])
    delta = np.where(traces.has_ts[k], step * max_speed, MAX_DISTANCE_DELTA_M)
    bound = (hav + delta) / MIN_SPEED_MS
    lmax = hav + RADIUS_MULTIPLIER * (sig[p] + sig[q]) + delta + 1.0
    c = traces.cstart
    return c[p], c[p + 1], c[q], c[q + 1], bound, lmax


def _median_steps(traces):
    """float64 (T,): each trace's median sampling step between its points' timestamps (s; the upper median, at least
    1 s: OSRM's ``median_sample_time``; 1 without timestamps or with one point), made once per :class:`Traces`."""
    med = getattr(traces, "_median_step", None)
    if med is None:
        med = np.ones(traces.T)
        for k in np.flatnonzero(traces.has_ts):
            d = np.sort(np.diff(traces.ts[traces.poff[k] : traces.poff[k + 1]]))
            if d.size:
                med[k] = max(1.0, float(d[d.size // 2]))
        traces._median_step = med
    return med


def _pair(traces, p, q, max_speed):
    """:func:`_pairs` of one transition, a tuple ``(s0, s1, t0, t1, bound, lmax)`` of Python numbers."""
    return _as_tuples(_pairs(traces, [p], [q], max_speed))[0]


def _as_tuples(cols):
    """:func:`_pairs`' arrays as a list of ``(s0, s1, t0, t1, bound, lmax)`` tuples."""
    return list(zip(*(c.tolist() for c in cols), strict=True))


def _as_arrays(pairs):
    """A list of ``(s0, s1, t0, t1, bound, lmax)`` tuples as :func:`_pairs`' arrays."""
    P = len(pairs)
    arr = np.asarray([p[:4] for p in pairs], dtype=np.int64).reshape(P, 4)
    fl = np.asarray([p[4:6] for p in pairs], dtype=np.float64).reshape(P, 2)
    return tuple(np.ascontiguousarray(arr[:, i]) for i in range(4)) + (fl[:, 0].copy(), fl[:, 1].copy())


def _max_speed(engine):
    v = engine.graph.meta.get("max_speed_for_map_matching")
    try:
        v = float(v)
    except (TypeError, ValueError):
        v = math.nan
    return v if v > 0 else float(config.SERVE_MATCH_MAX_SPEED_MS)


class _Matched:
    """The reconstructions of every trace of a call (:func:`_viterbi`), flat.

    Attributes
    ----------
    status : int64 (T,)
        :func:`gpuroute.engine.match_hmm.forward`'s last status (``NO_MATCH`` also for a trace without candidates).
    nm : int64 (T,)
        Matchings of each trace; trace ``k``'s are ``mbase[k]:mbase[k] + nm[k]`` (int64 (T,)).
    row_point, row_cand, row_alt : int64 (R,)
        The matched points of every matching in order: point (row of :class:`Traces`), candidate (row of the
        call's PhantomSet), ``alternatives_count``.
    m_r0, m_r1 : int64 (M,)
        Matching ``i``'s rows.
    m_route, m_trace : float64 (M,)
        Its matched route's and trace's lengths (m; OSRM's confidence).
    """

    def __init__(self, traces, status, out):
        self.status = status
        self.nm = out[6]
        (self.row_point, self.row_cand, self.row_alt, self.mbase, self.m_r0, self.m_r1, self.m_route,
         self.m_trace) = flatten_matchings(traces.poff, traces.cstart, out)


#: :func:`match_many`'s Viterbi searches the transition tables itself, only the rows it reads (a source the
#: Viterbi pruned is not searched: about a third of them on Monaco's traces), where every worker has at least this
#: many traces (:func:`_lazy`); else one search of every table, the searches of a few traces spread over every
#: worker (a single trace's 1,500 searches on 16 threads beat one thread's fewer).
LAZY_TRACES_PER_THREAD = 4
#: ... and the tables a pass asks for after a breakage, up to this many points back (the farthest it asks without
#: timestamps: :data:`MAX_BROKEN_STATES` + 1); one farther back (gaps split by time) is one search of every trace's
#: asks, and the pass resumes.
LAZY_ASK_POINTS = MAX_BROKEN_STATES + 1


def _lazy(tables, traces):
    """Whether the Viterbi pass searches its own tables (:data:`LAZY_TRACES_PER_THREAD`): by bounded searches
    (``"search"``, not the many-to-many), on one thread, or with enough traces (with a candidate) for every
    worker."""
    if tables is None or tables.how != "search":
        return False
    threads = numba.get_num_threads()
    if threads == 1:
        return True
    busy = int(np.count_nonzero(traces.coff[1:] > traces.coff[:-1]))
    return busy >= max(1, int(LAZY_TRACES_PER_THREAD)) * threads


def _step_inputs(traces, tables, max_speed):
    """:func:`gpuroute.engine.match_hmm.viterbi_search_chunk`'s ``steps``: the bound (metric units) and lmax (m)
    of the table between points ``t - b`` and ``t`` of a trace at ``[t, b - 1]``, ``b`` from 1 to
    :data:`LAZY_ASK_POINTS` (float64 (n, K) twice, inf where ``t - b`` is not of ``t``'s trace), as
    :meth:`_Tables._search` gives them its pairs (:func:`_pairs`)."""
    n = traces.n
    K = max(1, int(LAZY_ASK_POINTS))
    pt = traces.ptrace
    scale = _search_inputs(tables.engine, tables.snap, tables.allc)[2]
    sb = np.full((n, K), np.inf)
    sl = np.full((n, K), np.inf)
    ps = [np.flatnonzero(pt[:-b] == pt[b:]) for b in range(1, min(K, n - 1) + 1)]
    if not ps:
        return sb, sl
    back = np.repeat(np.arange(1, len(ps) + 1, dtype=np.int64), [p.size for p in ps])
    p = np.concatenate(ps)
    _, _, _, _, bound, lmax = _pairs(traces, p, p + back, max_speed)  # every step back at once (elementwise)
    sb[p + back, back - 1] = (bound if tables.bounded else np.full(p.size, np.inf)) / scale
    sl[p + back, back - 1] = lmax
    return sb, sl


def _viterbi(traces, tables, toff, tdist, max_speed):
    """Run the HMM of every trace of :class:`Traces` ``traces`` (:func:`gpuroute.engine.match_hmm.viterbi_many`;
    ``tdist`` float64 the tables of consecutive points, the one between points ``i - 1`` and ``i`` from
    ``tdist[toff[i]]``; both None: the pass searches them itself, only the rows it reads,
    :func:`gpuroute.engine.match_hmm.viterbi_search_many`): a :class:`_Matched`. A trace whose forward pass asks
    for a table (after a breakage) gets it from ``tables`` -- the asks of every trace in one search -- and resumes,
    until every trace is done."""
    T, n = traces.T, traces.n
    poff, coff = traces.poff, traces.coff
    state = new_states(T, n, int(coff[-1]))
    out = new_matchings(T, n)
    status = np.full(T, NO_MATCH, dtype=np.int64)
    todo = np.flatnonzero(coff[1:] > coff[:-1]).astype(np.int64)
    lazy = toff is None and tables is not None
    if lazy:
        steps = _step_inputs(traces, tables, max_speed)
        opts, net, _ = _search_inputs(tables.engine, tables.snap, tables.allc)
        toff = np.full(n, -1, dtype=np.int64)  # every table asked for
        tdist = np.zeros(0)
        # the dearest traces (most candidates: most searches) first: the workers take them in order as they are
        # free (a work queue), the cheap ones last fill the gaps
        todo = todo[np.argsort(-(coff[todo + 1] - coff[todo]), kind="stable")]
    if todo.size:
        use_ts = traces.has_ts & (np.diff(poff) > 1)
        trace = (poff, traces.cstart, traces.cpoint, traces.emis, traces.lon, traces.lat, traces.clon, traces.clat, traces.ts,
                 use_ts, traces.split_gaps)
        hmm = (float(max_speed), int(MAX_BROKEN_STATES), float(MAX_DISTANCE_DELTA_M), float(BETA_M))
        ask_off = np.zeros(T + 1, dtype=np.int64)
        ask = np.zeros(0)
        while True:
            tabs = (toff, tdist, ask_off, ask)
            if lazy:
                _viterbi_search(tables, todo, trace, hmm, tabs, state, out, status, steps, opts, net)
            else:
                W = _threads(todo.size, VITERBI_CHUNK)
                if W > 1:  # the traces on every worker
                    with tables.engine._table_lock:  # numba's workqueue layer: one parallel call at a time per engine
                        viterbi_many(W, todo, trace, hmm, tabs, state, out, status)
                else:
                    viterbi_chunk(0, todo.size, 1, todo, trace, hmm, tabs, state, out, status)
            need = np.sort(todo[status[todo] == NEED_TABLE])  # trace order, as ask_off's
            if not need.size:
                break
            sc = state[0]
            ask, off = tables.run_arrays(_pairs(traces, poff[need] + sc[need, 5], poff[need] + sc[need, 6], max_speed))
            cnt = np.zeros(T, dtype=np.int64)
            cnt[need] = np.diff(off)
            ask_off = np.zeros(T + 1, dtype=np.int64)
            np.cumsum(cnt, out=ask_off[1:])
            todo = need
    return _Matched(traces, status, out)


def _viterbi_search(tables, todo, trace, hmm, tabs, state, out, status, steps, opts, net):
    """One round of :func:`gpuroute.engine.match_hmm.viterbi_search_many` over the traces ``todo``: on up to
    ``numba.get_num_threads()`` workers (one trace each at least), each on its own scratch row."""
    W = max(1, min(numba.get_num_threads(), todo.size))
    m = net[3].size
    sc = _SCRATCH.get(m, W)
    try:
        if W > 1:
            with tables.engine._table_lock:  # numba's workqueue layer: one parallel call at a time per engine
                viterbi_search_many(W, todo, trace, hmm, tabs, state, out, status, steps, opts, net, sc)
        else:
            viterbi_search_chunk(0, todo.size, 1, todo, trace, hmm, tabs, state, out, status, steps, opts, net,
                                 tuple(x[0] for x in sc))
    finally:
        _SCRATCH.put(m, sc)


def _answers(engine, traces, allc, rec, records, ex, snap, plans, errors):
    """The OSRM match answers of every trace from the reconstructions ``rec`` (:class:`_Matched`); ``plans``
    (:func:`_leg_plans`: one list per trace, None without) each matching's legs as found by the transition
    searches (``(legs, g0, g1)``: legs ``g0:g1`` of a :class:`_Legs`), None where that matching is routed by
    the route service. The waypoints of every matched point come from one :func:`gpuroute.engine.osrm.waypoints`
    call."""
    wps = waypoints(allc, engine._fingerprint, engine._names, points=rec.row_cand) if rec.row_cand.size else []
    alts = rec.row_alt.tolist()
    inp = traces.kept[rec.row_point].tolist()
    r0s, r1s = rec.m_r0.tolist(), rec.m_r1.tolist()
    m_route, m_trace = rec.m_route.tolist(), rec.m_trace.tolist()
    has_c = (traces.coff[1:] > traces.coff[:-1]).tolist()
    ok = ((rec.status == DONE) & (rec.nm > 0)).tolist()
    mbase, nm = rec.mbase.tolist(), rec.nm.tolist()
    n_input = traces.n_input.tolist()
    out = []
    for k, p in enumerate(records):
        try:
            if not has_c[k]:
                raise EngineError("NoSegment", "Could not find a matching segment for any coordinate.")
            if not ok[k]:
                raise EngineError("NoMatch", "Could not match the trace.")
            matchings = []
            tracepoints = [None] * n_input[k]
            pl = plans[k]
            for i in range(nm[k]):
                g = mbase[k] + i
                r0, r1 = r0s[g], r1s[g]
                plan = None if pl is None else pl[i]
                if plan is not None:
                    legs, g0, g1 = plan
                    if p.steps or p.annotations:
                        ph = allc.take(rec.row_cand[r0:r1])
                        r = route_object(engine, ph, PhantomRows(ph), legs.plan(g0, g1), snap, steps=p.steps,
                                         annotations=p.annotations, geometries=p.geometries, overview=p.overview)
                    else:
                        r = legs.route_object(g0, g1, p.geometries, p.overview)
                    wl = wps[r0:r1]
                else:
                    res = route(
                        engine,
                        allc.take(rec.row_cand[r0:r1]),
                        steps=p.steps,
                        annotations=p.annotations,
                        geometries=p.geometries,
                        overview=p.overview,
                        continue_straight=False,
                        exclusion=ex,
                        snap=snap,
                    )
                    r = res["routes"][0]
                    wl = [dict(w) for w in res["waypoints"]]
                r["confidence"] = confidence(m_trace[g], m_route[g])
                matchings.append(r)
                for j, wp in enumerate(wl):
                    wp["matchings_index"] = i
                    wp["waypoint_index"] = j
                    wp["alternatives_count"] = alts[r0 + j]
                    tracepoints[inp[r0 + j]] = wp
            out.append({"code": "Ok", "matchings": matchings, "tracepoints": tracepoints})
        except EngineError as e:
            if errors == "raise":
                raise
            out.append({"code": e.code, "message": e.message})
    return out


def _prepare(engine, traces, index, ex, snap, device):
    """Candidates, and the tables of every trace's consecutive points in one search: ``(allc, tables, toff,
    tdist)`` (the table between points ``i - 1`` and ``i`` from ``tdist[toff[i]]``; ``tables`` None where no
    point has a candidate). Where :func:`_lazy` says so, no table is searched here (``toff`` and ``tdist``
    None): the Viterbi pass searches the rows it reads (:func:`_viterbi`)."""
    allc = _candidates(index, traces)
    if not int(traces.cstart[-1]):
        return allc, None, None, None
    tables = _Tables(engine, allc, ex, snap, device)
    if _lazy(tables, traces):
        busy = int(np.count_nonzero(traces.coff[1:] > traces.coff[:-1]))
        tables.gpu = _gpu_backend(device) if busy >= int(config.SERVE_MATCH_GPU_MIN_TRACES) else None
        if tables.gpu is None:
            return allc, tables, None, None
    pt = traces.ptrace
    p = np.flatnonzero(pt[:-1] == pt[1:])
    tdist, off = tables.run_arrays(_pairs(traces, p, p + 1, _max_speed(engine)))
    toff = np.zeros(traces.n, dtype=np.int64)
    toff[p + 1] = off[:-1]
    return allc, tables, toff, tdist


def _gpu_backend(device):
    """The GPU twin of the transition searches (:mod:`gpuroute.engine.match_gpu`'s backend) where a batch's searches
    run there: ``device`` (the request's) not ``"cpu"`` and ``config.SERVE_MATCH_TRANSITIONS_DEVICE`` ``"gpu"``, or
    ``"auto"`` with a usable GPU; else None (the CPU's searches). Only a batch of at least
    ``config.SERVE_MATCH_GPU_MIN_TRACES`` traces with candidates asks (:func:`_prepare`).

    Raises
    ------
    ValueError
        A bad ``config.SERVE_MATCH_TRANSITIONS_DEVICE``.
    GPUUnavailableError
        ``"gpu"`` without a usable GPU.
    """
    if device == "cpu":
        return None
    from .. import match_gpu

    if not match_gpu.usable(str(config.SERVE_MATCH_TRANSITIONS_DEVICE)):
        return None
    return match_gpu.gpu_backend()


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


def match_many(engine, records, index, *, exclusion=None, device="auto", errors="return", parse=None):
    """The OSRM match answers of many traces, their transition searches gathered (see the module notes).

    Parameters
    ----------
    records : sequence of MatchParams
        Or, with ``parse``, of what ``parse`` takes.
    errors : {"return", "raise"}
        ``"return"``: a trace that cannot be matched gets ``{"code": "NoMatch" or "NoSegment", "message":
        ...}`` in its place; ``"raise"``: the first such EngineError is raised.
    parse : callable, optional
        ``parse(i, records[i])`` -> MatchParams, raising EngineError for bad input: the records checked in
        order, a pipeline's batch by batch, the first batches solved while the later ones are checked (the
        checks are Python; the solving mostly compiled code on other threads). The first bad record's
        EngineError is raised and nothing is answered, as where every record is checked first.

    Returns
    -------
    list of dict, one per record, in order.

    Raises
    ------
    EngineError
        ``parse``'s (the first bad record's), or with ``errors="raise"`` the first trace's that cannot be matched.
    """
    if not records:
        return []
    with _gc_paused():
        return _match_many(engine, records, index, exclusion, device, errors, parse)


#: :func:`match_many` pauses Python's cyclic garbage collector while it runs (:func:`_gc_paused`).
PAUSE_GC = True


@contextlib.contextmanager
def _gc_paused():
    """Python's cyclic garbage collector disabled inside (where :data:`PAUSE_GC`), re-enabled after where it was
    enabled before. The answers are many small dicts and lists (no reference cycles): building them set off the
    collector's passes, and a full pass walks every live object of the process (120,000 with Monaco's engine: 60 to
    200 ms on the 2-core machine, every few batches of 128 traces, against 15 ms for a batch's answers). Their
    garbage is collected on the next pass after."""
    if not PAUSE_GC or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _checked(records, lo, hi, parse):
    """``records[lo:hi]`` as MatchParams (:func:`match_many`'s ``parse``, in order; None: they are)."""
    if parse is None:
        return records[lo:hi]
    return [parse(i, records[i]) for i in range(lo, hi)]


def _match_many(engine, records, index, exclusion, device, errors, parse=None):
    """:func:`match_many` of a non-empty ``records``."""
    size = max(1, int(PIPELINE_TRACES))
    if len(records) < 2 * size:
        records = _checked(records, 0, len(records), parse)
        snap = metric_snapshot(engine, exclusion)  # one metric for the transitions and the routes
        return _answers(*_solve(engine, records, index, exclusion, snap, device), errors)
    snap = metric_snapshot(engine, exclusion)
    # a pipeline: batches i + 1 .. i + PIPELINE_DEPTH solved on threads (compiled passes, mostly without the GIL;
    # one batch's NumPy steps beside another's parallel kernel) while this thread builds batch i's answers (Python)
    from concurrent.futures import ThreadPoolExecutor

    threads = numba.get_num_threads()  # the caller's setting (numba's is per thread)

    def solve(part):
        numba.set_num_threads(threads)
        return _solve(engine, part, index, exclusion, snap, device)

    cuts = list(range(0, len(records), size)) + [len(records)]
    depth = max(1, int(PIPELINE_DEPTH))
    out = []
    with ThreadPoolExecutor(depth) as pool:
        # the first batches solved as soon as they are checked; the others checked meanwhile (parse: Python on this
        # thread; the solves mostly compiled, on the pool's); a bad record: the solves started are dropped
        parts, futs = [], []
        try:
            for j in range(len(cuts) - 1):
                parts.append(_checked(records, cuts[j], cuts[j + 1], parse))
                if j < depth:
                    futs.append(pool.submit(solve, parts[j]))
        except BaseException:
            for f in futs:
                f.cancel()
            raise
        for i in range(len(parts)):
            got = futs[i].result()
            futs[i] = None
            if i + depth < len(parts):
                futs.append(pool.submit(solve, parts[i + depth]))
            out += _answers(*got, errors)
    return out


def _solve(engine, records, index, ex, snap, device):
    """Everything of :func:`match_many` but the answers, for ``records``: the arguments of :func:`_answers`
    but ``errors`` (the legs' sums made, so that their kernel runs here)."""
    traces = Traces(records, config.SERVE_MATCH_SIGMA_M)
    allc, tables, toff, tdist = _prepare(engine, traces, index, ex, snap, device)
    max_speed = _max_speed(engine)
    if tables is None:
        rec = _viterbi(traces, None, None, None, max_speed)
        plans = [None] * traces.T
    else:
        rec = _viterbi(traces, tables, toff, tdist, max_speed)
        plans = _leg_plans(engine, tables, traces, rec, max_speed)
        legs = next((q[0] for pl in plans if pl for q in pl if q is not None), None)
        if legs is not None:
            legs.sums()
    return engine, traces, allc, rec, records, ex, snap, plans


#: :func:`match_many` of at least twice this many traces is a pipeline: batches of this many traces, the answers
#: of one (Python) built while the next one is solved (compiled passes without the GIL) on a thread.
PIPELINE_TRACES = 128
#: ... and this many batches are solved at once ahead of the answers (their compiled passes take turns, their
#: NumPy steps and the parallel kernel of another overlap; 1: one batch ahead). On the 16-core H100 host 2 took
#: 406-458 ms for 1,000 traces against 497-602 ms at 1 (the collector paused or not; BENCHMARKS.md, "Map matching
#: in batches"); on the 2-core machine it was no faster.
PIPELINE_DEPTH = 2


#: Legs per thread, at least, of :func:`_leg_plans`' searches (fewer legs run on the calling thread).
LEG_CHUNK = 64
#: Traces per thread, at least, of :func:`match_many`'s Viterbi passes and of the candidates' projections.
VITERBI_CHUNK = 16


_POOLS = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools():
    """In a forked child: none of the parent's pool threads run there (nor does a lock holder)."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools)


def _pool(n):
    """A thread pool of ``n`` workers for the chunks of a call (the candidates' projections, the legs' searches
    and sums: compiled, without the GIL), kept for the next calls (starting 16 threads a call cost a few ms);
    shared by concurrent calls (their chunks queue)."""
    pool = _POOLS.get(n)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        with _POOLS_LOCK:
            pool = _POOLS.get(n)
            if pool is None:
                pool = _POOLS[n] = ThreadPoolExecutor(n, thread_name_prefix="gpuroute-match")
    return pool


def _threads(n, per):
    """Threads for ``n`` items of at least ``per`` each: up to ``numba.get_num_threads()`` (the engine's
    numba thread setting), 1 for few items."""
    return max(1, min(numba.get_num_threads(), n // max(1, int(per))))


def _leg_plans(engine, tables, traces, rec, max_speed):
    """The route legs of every matching of every trace, from the transition searches themselves (step 5 of
    the module notes): the search from each matched candidate rerun with parents kept
    (:func:`gpuroute.engine.match_hmm.leg_chunk`: the route and length the Viterbi read), every leg of the
    call at once, chunks of at least :data:`LEG_CHUNK` legs on up to ``numba.get_num_threads()`` threads
    (each chunk its own scratch). One list per trace (None without a reconstruction) of one ``(legs, g0,
    g1)`` per matching (legs ``g0:g1`` of one :class:`_Legs`), None where a leg has no route within its
    bound (the route service routes that matching). The legs' points are made where ``traces.want_points``."""
    opts, net, scale = _search_inputs(engine, tables.snap, tables.allc)
    R = rec.row_point.size
    if R < 2:
        return [None] * traces.T
    row_m = np.repeat(np.arange(rec.m_r0.size, dtype=np.int64), rec.m_r1 - rec.m_r0)
    k = np.flatnonzero(row_m[1:] == row_m[:-1])  # consecutive rows of one matching
    if not k.size:
        return [None] * traces.T
    _, _, t0, t1, bound, lmax = _pairs(traces, rec.row_point[k], rec.row_point[k + 1], max_speed)
    leg_s = np.ascontiguousarray(rec.row_cand[k])
    leg_t = np.ascontiguousarray(rec.row_cand[k + 1])
    bound = np.ascontiguousarray((bound if tables.bounded else np.full(k.size, np.inf)) / scale)
    lmax = np.ascontiguousarray(lmax)
    L = leg_s.size
    n_chunks = max(1, min(numba.get_num_threads(), L // max(1, int(LEG_CHUNK))))
    m = net[3].size
    sc = _SCRATCH.get(m, n_chunks)
    try:
        if n_chunks == 1:
            parts = [leg_chunk((leg_s, leg_t, t0, t1, bound, lmax), opts, net, tuple(x[0] for x in sc))]
        else:  # leg_chunk runs without the GIL: one chunk of legs per thread, each on its own scratch row
            cuts = [L * c // n_chunks for c in range(n_chunks + 1)]

            def one(c):
                q = slice(cuts[c], cuts[c + 1])
                legs = (leg_s[q], leg_t[q], t0[q], t1[q], bound[q], lmax[q])
                return leg_chunk(legs, opts, net, tuple(x[c] for x in sc))

            parts = list(_pool(n_chunks).map(one, range(n_chunks)))
    finally:
        _SCRATCH.put(m, sc)
    legs = _Legs(engine, tables.snap, tables.allc, parts, want_points=traces.want_points)
    # matching i's legs: rows m_r0..m_r1 - 1 less one leg per matching before it
    i = np.arange(rec.m_r0.size, dtype=np.int64)
    g0 = rec.m_r0 - i
    g1 = rec.m_r1 - i - 1
    good = (np.minimum.reduceat(legs.dep, g0) >= 0).tolist() if g0.size else []
    g0l, g1l = g0.tolist(), g1.tolist()
    out = []
    for mb, nm in zip(rec.mbase.tolist(), rec.nm.tolist(), strict=True):
        out.append([(legs, g0l[g], g1l[g]) if good[g] else None for g in range(mb, mb + nm)] if nm else None)
    return out


class _Legs:
    """The legs of :func:`_leg_plans` (rows of the candidates' PhantomSet ``allc``; ``parts`` the chunks'
    :func:`gpuroute.engine.match_hmm.leg_chunk` results, in order) and the route objects made of them, on
    the metric snapshot ``snap`` (None: the hierarchy's arrays), as the route service makes them."""

    def __init__(self, engine, snap, allc, parts, want_points=True):
        self.e = engine
        self.want_points = bool(want_points)
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
        self._lists = None

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
            per_leg = (arc[d], a.fraction[d], arc[r], a.fraction[r], self.same)
            ends = (a.lon[d], a.lat[d], a.lon[r], a.lat[r])
            rest = (e._coords_f64, e._head, wcost, float(wf), dcost if has_dur else empty_f, float(df), has_dur,
                    e._len, tc is not None, empty_i if tc is None else e._t_first, empty_i if tc is None else e._fo,
                    *turn, e._name_id, self.want_points)
            mo, mid = self.mid_off, self.mid

            def chunk(c0, c1):
                m0, m1 = int(mo[c0]), int(mo[c1])
                return leg_sums(*(x[c0:c1] for x in per_leg), mo[c0 : c1 + 1] - m0, mid[m0:m1],
                                *(x[c0:c1] for x in ends), *rest)

            L = self.dep.size
            n_chunks = _threads(L, LEG_CHUNK)
            if n_chunks == 1:
                self._sums = chunk(0, L)
            else:  # leg_sums runs without the GIL: chunks of legs on threads, joined in order
                cuts = [L * c // n_chunks for c in range(n_chunks + 1)]
                parts = list(_pool(n_chunks).map(chunk, cuts[:-1], cuts[1:]))
                base = np.cumsum([0] + [int(q[2][-1]) for q in parts[:-1]])
                self._sums = (np.concatenate([q[0] for q in parts]), np.concatenate([q[1] for q in parts]),
                              np.concatenate([[0]] + [q[2][1:] + b for q, b in zip(parts, base, strict=True)]
                                             ).astype(np.int64),
                              np.concatenate([q[3] for q in parts]))
            self.has_dur = has_dur
        return self._sums

    def _leg_lists(self):
        """Every leg's JSON values as lists (made once): rounded weight, duration (None without durations) and
        distance, summary; and the unrounded weight (with its turns), duration, turn duration and distance the
        route's totals add up leg by leg, as the route service does."""
        if self._lists is None:
            sums, summ, _pts_off, _pts = self.sums()
            names = self.e._names
            w = sums[:, 0] + sums[:, 3]
            L = w.size
            r = round_floats(np.concatenate([w * self.e._w_scale, sums[:, 2], sums[:, 1] + sums[:, 4]]
                                            if self.has_dur else [w * self.e._w_scale, sums[:, 2]]), 1)
            lw, ll = r[:L], r[L : 2 * L]
            ld = r[2 * L :] if self.has_dur else [None] * L
            # each distinct (name, name) pair's text made once, then taken per leg (", ".join of both)
            pairs, inv = np.unique(np.asarray(summ, dtype=np.int64).reshape(-1, 2), axis=0, return_inverse=True)
            text = np.empty(len(pairs), dtype=object)
            text[:] = [(names[n0] + ", " + names[n1] if n1 >= 0 else names[n0]) if n0 >= 0 else
                       (names[n1] if n1 >= 0 else "") for n0, n1 in pairs.tolist()]
            summary = text[inv.reshape(-1)].tolist()
            self._lists = (lw, ld, ll, summary, w.tolist(), sums[:, 1].tolist(), sums[:, 4].tolist(),
                           sums[:, 2].tolist())
        return self._lists

    def route_object(self, g0, g1, geometries, overview):
        """The route object of legs ``g0:g1`` without steps or annotations: the route service's
        (:func:`gpuroute.engine.services.route.route_object`) from :meth:`sums`' arrays."""
        from ..osrm import encode_geometry, round1, simplify

        e = self.e
        sums, summ, pts_off, pts = self.sums()
        lw, ld, ll, summary, w_add, d_sum, t_d, l_sum = self._leg_lists()
        sc = e._w_scale
        has_dur = self.has_dur
        legs = [{"steps": [], "summary": summary[g], "weight": lw[g], "duration": ld[g], "distance": ll[g]}
                for g in range(g0, g1)]
        tot_w = tot_d = tot_l = 0.0
        for g in range(g0, g1):
            tot_w += w_add[g]
            tot_d = tot_d + d_sum[g] + t_d[g] if has_dur else None
            tot_l += l_sum[g]
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
